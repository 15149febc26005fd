#include "tests/integration/workers/worker_env.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/integration/id_load.h"

namespace kleaf::integration::workers {

std::map<std::string, std::string> Layout::Keys() const {
  return {{"snowflake.timestamp_bits", std::to_string(timestamp_bits)},
          {"snowflake.worker_bits", std::to_string(worker_bits)},
          {"snowflake.sequence_bits", std::to_string(sequence_bits)},
          {"snowflake.epoch_ms", std::to_string(epoch_ms)}};
}

IdParts Split(const Layout& layout, int64_t id) {
  const int64_t worker_mask = (int64_t{1} << layout.worker_bits) - 1;
  const int64_t sequence_mask = (int64_t{1} << layout.sequence_bits) - 1;
  return {(id >> (layout.worker_bits + layout.sequence_bits)) + layout.epoch_ms,
          (id >> layout.sequence_bits) & worker_mask, id & sequence_mask};
}

std::optional<int64_t> ParseUtcMs(std::string_view text) {
  static const std::regex kIso(R"((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z)");
  std::string s(text);
  std::smatch m;
  if (!std::regex_match(s, m, kIso)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1].str()) - 1900;
  tm.tm_mon = std::stoi(m[2].str()) - 1;
  tm.tm_mday = std::stoi(m[3].str());
  tm.tm_hour = std::stoi(m[4].str());
  tm.tm_min = std::stoi(m[5].str());
  tm.tm_sec = std::stoi(m[6].str());
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + std::stoi(m[7].str());
}

std::optional<int64_t> ClaimedNotBeforeMs(const Node& gateway) {
  static const std::regex kClaimed(R"(\[lease\] claimed worker id \d+ \(not before ([^)]*)\))");
  const std::string log = gateway.Log();
  std::optional<int64_t> last;
  for (std::sregex_iterator it(log.begin(), log.end(), kClaimed), end; it != end; ++it) {
    last = ParseUtcMs((*it)[1].str()).value_or(-1);
  }
  return last;
}

std::expected<int64_t, std::string> DecodeWorkerId(const Node& node, int64_t id) {
  auto r = e2e::RunKleaf({"decode", std::to_string(id), "--config", node.config.string()});
  if (!r.status.exited || r.status.code != 0) {
    return std::unexpected("kleaf decode " + std::to_string(id) + ": " + r.status.ToString() +
                           ": " + r.err);
  }
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object() || !j.contains("worker_id")) {
    return std::unexpected("kleaf decode printed no worker_id: " + r.out);
  }
  return j["worker_id"].get<int64_t>();
}

// --- Cluster -------------------------------------------------------------------------------------

namespace {

std::map<std::string, std::string> WithShortLeases(std::map<std::string, std::string> overrides) {
  for (auto& [key, value] : ShortLeases(kLeaseTtlMs)) overrides.try_emplace(key, value);
  return overrides;
}

}  // namespace

RegistryCluster::RegistryCluster(const KafkaBroker& broker, const std::string& name,
                                 const std::map<std::string, std::string>& overrides)
    : Cluster(broker, "wrk-" + name, WithShortLeases(overrides)) {}

std::expected<void, std::string> RegistryCluster::StartAllocator(milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  if (allocator_ == nullptr) allocator_ = &AddAllocator("alloc");
  if (auto r = Start({allocator_}, timeout); !r) return r;
  std::string error;
  bool ready = WaitUntil(
      [&] {
        if (auto served = ServedPartitions(*allocator_);
            served && static_cast<int>(served->size()) == kPartitions) {
          return true;
        }
        if (auto s = allocator_->process->WaitExit(milliseconds(0)); !s.timed_out) {
          error = "allocator exited (" + s.ToString() + ")";
          return true;
        }
        return false;
      },
      std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
  if (!ready) {
    error = "allocator did not serve all " + std::to_string(kPartitions) + " partitions in time";
  }
  if (!error.empty()) {
    return std::unexpected(error + "; stderr:\n" + LastLines(allocator_->Log(), 40));
  }
  return {};
}

Node& RegistryCluster::AddGateway(const std::string& name,
                                  std::map<std::string, std::string> overrides) {
  // Gateways share the reply partitions round robin (replies carry the gateway's correlation ids).
  overrides.try_emplace("kafka.reply_partition", std::to_string(gateways_++ % kReplyPartitions));
  return AddNode(name, Node::Role::kGateway, std::move(overrides));
}

std::optional<std::string> FindDuplicate(std::vector<int64_t> ids) {
  const size_t total = ids.size();
  Duplicates d = FindDuplicates(std::move(ids));
  if (d.count == 0) return std::nullopt;
  return "ID " + std::to_string(d.examples.front()) + " issued twice (of " + std::to_string(total) +
         ")";
}

std::optional<std::string> FindNonIncreasing(const std::vector<int64_t>& ids) {
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      return "ID #" + std::to_string(i) + " (" + std::to_string(ids[i]) + ") is not above #" +
             std::to_string(i - 1) + " (" + std::to_string(ids[i - 1]) + ")";
    }
  }
  return std::nullopt;
}

}  // namespace kleaf::integration::workers
