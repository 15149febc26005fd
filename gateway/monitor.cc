#include "gateway/monitor.h"

#include <nlohmann/json.hpp>

#include "allocator/id_format.h"
#include "state/records.h"

namespace kleaf::gateway {

using http::HttpResponse;
using http::PathOf;
using http::ReadyCheck;

namespace {

using nlohmann::json;

constexpr size_t kMaxPathChars = 200;
constexpr size_t kMaxMessageChars = 300;

int64_t IdsLeft(const SegmentBuffer::Snapshot& s) {
  int64_t left = 0;
  if (s.active) left += std::max<int64_t>(0, s.active->end - s.next);
  if (s.standby) left += s.standby->size();
  return left;
}

json SegmentJson(const std::optional<allocator::Segment>& s) {
  if (!s) return nullptr;
  return {
      {"start", std::to_string(s->start)}, {"end", std::to_string(s->end)}, {"size", s->size()}};
}

// The status page's "worker": from the registry's lease, or the config's id.
json WorkerJson(int64_t worker_id,
                const std::function<snowflake::WorkerLease::Status()>& lease_status) {
  json worker = {{"worker_id", worker_id}};
  if (lease_status) {
    auto s = lease_status();
    worker["source"] = "registry";
    worker["held"] = s.valid_for_ms > 0;
    worker["valid_for_ms"] = s.valid_for_ms;
    worker["last_error"] = s.last_error.empty() ? json(nullptr) : json(s.last_error);
    worker["clock_offset_ms"] = s.clock_offset_ms ? json(*s.clock_offset_ms) : json(nullptr);
    worker["clock_offset_error_ms"] =
        s.clock_offset_ms ? json(s.clock_offset_error_ms) : json(nullptr);
  } else {
    worker["source"] = "config";
    worker["held"] = true;
    worker["valid_for_ms"] = nullptr;
    worker["last_error"] = nullptr;
    worker["clock_offset_ms"] = nullptr;
    worker["clock_offset_error_ms"] = nullptr;
  }
  return worker;
}

// {"ready","checks"}, as /readyz answers.
json ReadyJson(const std::vector<ReadyCheck>& checks) {
  json ready_checks = json::array();
  bool ready = true;
  for (const auto& c : checks) {
    ready = ready && (c.ok || !c.required);
    ready_checks.push_back(
        {{"name", c.name}, {"ok", c.ok}, {"required", c.required}, {"detail", c.detail}});
  }
  return {{"ready", ready}, {"checks", ready_checks}};
}

// The id_mode this node serves the tag in: its newest segment's; null before the first arrives.
json IdModeJson(const SegmentBuffer::Snapshot& s) {
  const auto& newest = s.standby ? s.standby : s.active;
  if (!newest) return nullptr;
  return state::IdModeName(newest->format ? newest->format->mode() : state::IdMode::kPlain);
}

// {"time_ms","ids_per_s","fetch_ms"} as arrays, oldest first; null for a tag without a ring.
json HistoryJson(const std::optional<std::vector<TagHistory::Point>>& points) {
  if (!points) return nullptr;
  json time = json::array(), rate = json::array(), fetch = json::array();
  for (const auto& p : *points) {
    time.push_back(p.time_ms);
    rate.push_back(p.ids_per_s);
    fetch.push_back(p.fetch_ms ? json(*p.fetch_ms) : json(nullptr));
  }
  return {{"time_ms", time}, {"ids_per_s", rate}, {"fetch_ms", fetch}};
}

json TagsJson(const std::vector<SegmentBuffer::Snapshot>& snapshots, const TagHistory& history) {
  json tags = json::array();
  for (const auto& s : snapshots) {
    json active = SegmentJson(s.active);
    if (s.active) active["next"] = std::to_string(s.next);
    tags.push_back({{"tag", s.tag},
                    {"active", active},
                    {"standby", SegmentJson(s.standby)},
                    {"step", s.step},
                    {"min_step", s.min_step},
                    {"ids_left", IdsLeft(s)},
                    {"next_ready", s.standby.has_value()},
                    {"fetching", s.fetching},
                    {"last_error", s.last_error ? json(s.last_error->message) : json(nullptr)},
                    {"id_mode", IdModeJson(s)},
                    {"history", HistoryJson(history.Series(s.tag))}});
  }
  return tags;
}

json ErrorsJson(const std::vector<Monitor::ErrorEntry>& entries) {
  json errors = json::array();
  for (const auto& e : entries) {
    errors.push_back({{"time", FormatUtcMs(e.time_ms)},
                      {"method", e.method},
                      {"path", e.path},
                      {"status", e.status},
                      {"code", e.code},
                      {"message", e.message}});
  }
  return errors;
}

}  // namespace

Monitor::Monitor(Options options, SegmentCache& segments, snowflake::SnowflakeGenerator& snowflake,
                 Clock& clock)
    : options_(std::move(options)),
      segments_(segments),
      snowflake_(snowflake),
      clock_(clock),
      started_ms_(clock.NowMs()),
      registry_(metrics::Registry::Default()),
      history_(options_.history_interval_ms) {
  collector_id_ = registry_.AddCollector([this] { Collect(); });
  // Every error code with its status present from the first scrape, at 0 (rate() alerts need the
  // start); the server's own framing answers (400, 413, 431, ...) appear when first sent.
  MutexLock lock(mu_);
  for (int c = 0; c <= static_cast<int>(Code::kInternal); ++c) {
    ErrorCounter(std::string(CodeName(static_cast<Code>(c))), HttpStatus(static_cast<Code>(c)));
  }
}

metrics::Counter& Monitor::ErrorCounter(const std::string& code, int status) {
  auto& counter = error_counters_[{code, status}];
  if (counter == nullptr) {
    counter = &registry_.GetCounter("kleaf_http_errors_total",
                                    "HTTP answers with an error status, per error code and status.",
                                    {{"code", code}, {"status", std::to_string(status)}});
  }
  return *counter;
}

Monitor::~Monitor() {
  registry_.RemoveCollector(collector_id_);
  MutexLock lock(collect_mu_);
  for (const auto& tag : gauge_tags_) {
    registry_.Remove("kleaf_segment_buffer_ids", {{"tag", tag}});
    registry_.Remove("kleaf_segment_step", {{"tag", tag}});
  }
}

void Monitor::RecordError(std::string_view method, std::string_view target,
                          const HttpResponse& response) {
  // A 503 from /readyz answers a probe, not a client: it would drown the real errors.
  if (PathOf(target) == "/readyz") return;
  // Our error answers carry their code and message (HttpResponse::error_code); any other keeps
  // its status as code.
  ErrorEntry e{clock_.NowMs(),
               std::string(method),
               std::string(PathOf(target).substr(0, kMaxPathChars)),
               response.status,
               response.error_code.empty() ? "http_" + std::to_string(response.status)
                                           : std::string(response.error_code),
               response.error_message.substr(0, kMaxMessageChars)};
  MutexLock lock(mu_);
  ErrorCounter(e.code, e.status).Inc();
  recent_.push_back(std::move(e));
  while (recent_.size() > options_.recent_errors) recent_.pop_front();
}

std::vector<Monitor::ErrorEntry> Monitor::RecentErrors() const {
  MutexLock lock(mu_);
  return {recent_.begin(), recent_.end()};
}

std::vector<ReadyCheck> Monitor::Readiness() {
  std::vector<ReadyCheck> checks;
  if (options_.lease) return GatewayReadiness();
  checks.push_back(
      {"worker_id", true, "worker id " + std::to_string(snowflake_.worker_id()) + " from config"});
  if (options_.ready_checks) {
    for (auto& c : options_.ready_checks()) checks.push_back(std::move(c));
  }
  return checks;
}

// A gateway is ready while it can hand out IDs: that is the time its buffers are for, and taking
// it out of a Service then would leave clients nothing. Its worker lease, Kafka and the
// allocators are listed (required: false) and alerted on; the one required check, "serving", is
// ok while the lease holds (snowflake IDs), the allocators answer (segments on demand) or a tag's
// buffer still holds IDs.
std::vector<ReadyCheck> Monitor::GatewayReadiness() {
  std::vector<ReadyCheck> checks;
  bool lease_valid = false;
  {
    auto s = options_.lease();
    lease_valid = s.valid_for_ms > 0;
    // A failed renewal while the lease still holds (a leader moving, a broker restarting) does
    // not stop snowflake IDs: the node stays ready until the lease itself runs out.
    ReadyCheck c{"worker_lease", s.valid_for_ms > 0, ""};
    if (s.valid_for_ms <= 0) {
      c.detail = "worker id " + std::to_string(s.worker_id) + " not leased (snowflake IDs refused)";
    } else if (!s.last_error.empty()) {
      c.detail = "worker id " + std::to_string(s.worker_id) + ", valid for " +
                 std::to_string(s.valid_for_ms) + " ms; the last renewal failed: " + s.last_error;
    } else {
      c.detail = "worker id " + std::to_string(s.worker_id) + ", valid for " +
                 std::to_string(s.valid_for_ms) + " ms";
    }
    c.required = false;
    checks.push_back(std::move(c));
  }
  bool allocators = false;
  if (options_.ready_checks) {
    for (auto& c : options_.ready_checks()) {
      if (c.name == "allocators") allocators = c.ok;
      c.required = false;
      checks.push_back(std::move(c));
    }
  }
  int64_t buffered = 0;
  int buffered_tags = 0;
  for (const auto& s : segments_.Snapshots()) {
    const int64_t left = IdsLeft(s);
    buffered += left;
    if (left > 0) ++buffered_tags;
  }
  std::vector<std::string> can;
  if (lease_valid) can.push_back("snowflake IDs");
  if (allocators) can.push_back("segments from the allocators");
  if (buffered > 0) {
    can.push_back(std::to_string(buffered) + " buffered segment IDs of " +
                  std::to_string(buffered_tags) + " tag(s)");
  }
  std::string detail;
  for (const auto& c : can) detail += (detail.empty() ? "serves " : ", ") + c;
  if (can.empty()) {
    detail = "cannot hand out IDs: no worker lease, no answer from the allocators, no buffered IDs";
  }
  checks.push_back({"serving", !can.empty(), detail, true});
  return checks;
}

void Monitor::Collect() {
  MutexLock lock(collect_mu_);
  std::set<std::string> seen;
  for (const auto& s : segments_.Snapshots()) {
    registry_
        .GetGauge("kleaf_segment_buffer_ids",
                  "IDs left in a tag's active and standby segments on this node.", {{"tag", s.tag}})
        .Set(static_cast<double>(IdsLeft(s)));
    registry_
        .GetGauge("kleaf_segment_step",
                  "Size of the last segment fetched for a tag (its current step).",
                  {{"tag", s.tag}})
        .Set(static_cast<double>(s.step));
    seen.insert(s.tag);
  }
  for (const auto& tag : gauge_tags_) {
    if (seen.contains(tag)) continue;
    registry_.Remove("kleaf_segment_buffer_ids", {{"tag", tag}});
    registry_.Remove("kleaf_segment_step", {{"tag", tag}});
  }
  gauge_tags_ = std::move(seen);

  auto& held = registry_.GetGauge("kleaf_worker_lease_held",
                                  "1 while this node may issue snowflake IDs with its worker id.");
  if (options_.lease) {
    auto s = options_.lease();
    held.Set(s.valid_for_ms > 0 ? 1 : 0);
    registry_
        .GetGauge(
            "kleaf_worker_lease_expiry_seconds",
            "Seconds until this node stops issuing snowflake IDs unless the lease is renewed.")
        .Set(static_cast<double>(s.valid_for_ms) / 1000.0);
    if (s.clock_offset_ms) {
      registry_
          .GetGauge("kleaf_worker_clock_offset_seconds",
                    "The allocator's wall clock minus this node's, from the last lease reply.")
          .Set(static_cast<double>(*s.clock_offset_ms) / 1000.0);
    }
  } else {
    held.Set(1);  // the worker id comes from config
  }
  registry_.GetGauge("kleaf_snowflake_worker_id", "This node's snowflake worker id.")
      .Set(static_cast<double>(snowflake_.worker_id()));
  registry_
      .GetGauge("kleaf_snowflake_timestamp_remaining_seconds",
                "Seconds until the snowflake timestamp bits run out (then snowflake IDs fail).")
      .Set(static_cast<double>(snowflake_.layout().last_ms() - clock_.NowMs()) / 1000.0);
}

std::string Monitor::StatusJson() {
  const int64_t now = clock_.NowMs();
  json out;
  out["node"] = {{"id", options_.node_id},
                 {"role", options_.role},
                 {"time", FormatUtcMs(now)},
                 {"uptime_s", (now - started_ms_) / 1000}};
  out["worker"] = WorkerJson(snowflake_.worker_id(), options_.lease);
  const auto& layout = snowflake_.layout();
  const int64_t last_ms = snowflake_.last_ms();
  out["snowflake"] = {
      {"last_issued", last_ms > layout.epoch_ms() ? json(FormatUtcMs(last_ms)) : json(nullptr)},
      {"runs_out", FormatUtcMs(layout.last_ms())},
      {"timestamp_remaining_s", (layout.last_ms() - now) / 1000}};
  out["ready"] = ReadyJson(Readiness());
  out["tags"] = TagsJson(segments_.Snapshots(), history_);
  out["history"] = {{"interval_ms", history_.interval_ms()},
                    {"points", TagHistory::kPoints},
                    {"max_tags", TagHistory::kMaxTags},
                    {"untracked_tags", history_.untracked()}};
  out["recent_errors"] = ErrorsJson(RecentErrors());
  return out.dump(-1, ' ', false, json::error_handler_t::replace);  // paths may be any bytes
}

void Monitor::SampleHistory() {
  std::vector<TagCounters> counters;
  for (const auto& s : segments_.Snapshots()) {
    counters.push_back({s.tag, s.issued, s.fetches, s.fetch_ns});
  }
  history_.Sample(clock_.NowMs(), counters);
}

}  // namespace kleaf::gateway
