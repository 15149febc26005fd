#include "allocator/service.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/tag.h"
#include "kafka/client.h"

namespace kleaf::allocator {
namespace {

using nlohmann::json;

Outcome Failed(Error e) {
  Outcome o;
  o.reply.error = std::move(e);
  return o;
}

TagRules TagRulesOf(const Rules& rules) {
  TagRules t;
  t.default_step = rules.default_step;
  t.max_step = rules.max_step;
  t.default_id_mode = rules.default_id_mode;
  t.datacenter_count = rules.datacenter_count;
  return t;
}

// A segment's format on the wire: {"id_mode","id_key","id_base"} (the key travels only inside
// the cluster's topics, like the state record it comes from).
void FormatToJson(const Segment& s, json& out) {
  if (!s.format) return;
  state::TagRecord r;
  s.format->WriteTo(r);
  out["id_mode"] = state::IdModeName(r.id_mode);
  out["id_key"] = r.id_key;
  out["id_base"] = r.id_base;
}

[[nodiscard]] Result<std::shared_ptr<const IdFormat>> FormatFromJson(const std::string& tag,
                                                                     const json& j) {
  if (!j.contains("id_mode")) return std::shared_ptr<const IdFormat>();
  state::TagRecord r;
  r.tag = tag;
  auto mode = state::ParseIdMode(j.at("id_mode").get<std::string>());
  if (!mode) return std::unexpected(mode.error());
  r.id_mode = *mode;
  r.id_key = j.at("id_key").get<std::string>();
  r.id_base = j.at("id_base").get<int64_t>();
  return IdFormat::Of(r);
}

Outcome ExecuteAllocate(const Request& r, StateReader& reader, const Rules& rules, int64_t now_ms) {
  auto existing = reader.Get(r.tag);
  if (!existing) return Failed(existing.error());
  state::TagRecord record;
  if (*existing && !(*existing)->deleted) {
    record = **existing;
  } else if (rules.auto_create) {
    auto created = ApplyTagUpdate(*existing, r.tag, TagUpdate{}, TagRulesOf(rules), now_ms);
    if (!created) return Failed(created.error());
    record = *created;
  } else {
    return Failed(Error{Code::kNotFound, "unknown tag '" + r.tag + "'"});
  }
  auto segment = ReserveSegment(record, r.step, rules.max_step, now_ms);
  if (!segment) return Failed(segment.error());
  Outcome o;
  o.reply.segment = *segment;
  o.writes.push_back(std::move(record));
  return o;
}

json TagToJson(const state::TagRecord& r) {
  return json::parse(state::EncodeTag(r));
}


Claimant ClaimantOf(const Request& r) { return Claimant{r.node_id, r.holder, r.previous_holder}; }

Outcome ExecuteWorker(const Request& r, StateReader& reader, const Rules& rules, int64_t now_ms) {
  auto all = reader.ListWorkers();
  if (!all) return Failed(all.error());
  if (r.op == Request::Op::kWorkerStatus) {
    Outcome o;
    o.reply.workers = CountWorkers(*all, now_ms, rules.workers);
    return o;
  }
  if (r.op == Request::Op::kClaimWorker) {
    auto grant = ClaimWorker(*all, ClaimantOf(r), r.node_now_ms, now_ms, rules.workers);
    if (!grant) return Failed(grant.error());
    Outcome o;
    o.reply.lease = WorkerLeaseInfo{grant->record.worker_id, grant->record.lease_until_ms,
                                    grant->not_before_ms, now_ms, grant->notice};
    o.worker_writes.push_back(grant->record);
    return o;
  }
  std::optional<state::WorkerRecord> current;
  for (const auto& w : *all) {
    if (w.worker_id == r.worker_id) current = w;
  }
  auto updated = r.op == Request::Op::kRenewWorker
                     ? RenewWorker(current, r.worker_id, ClaimantOf(r), r.last_timestamp_ms, now_ms,
                                   rules.workers)
                     : ReleaseWorker(current, r.worker_id, ClaimantOf(r), r.last_timestamp_ms, now_ms);
  if (!updated) return Failed(updated.error());
  Outcome o;
  if (r.last_timestamp_ms > now_ms + rules.workers.max_clock_skew_ms) {
    // The holder's clock ran ahead of ours after its claim: it may issue timestamps past the
    // lease end as we count it. Record what it reported, keep the id blocked for a whole TTL
    // beyond that, and tell it to stop.
    updated->lease_until_ms = std::max(updated->lease_until_ms, r.last_timestamp_ms + rules.workers.lease_ttl_ms);
    o.worker_writes.push_back(*updated);
    o.reply.error = Error{Code::kFailedPrecondition,
                          "worker id " + std::to_string(r.worker_id) + ": this node issued timestamps " +
                              std::to_string(r.last_timestamp_ms - now_ms) +
                              " ms ahead of the allocator's clock; fix the clock (NTP)"};
    return o;
  }
  o.reply.lease = WorkerLeaseInfo{updated->worker_id, updated->lease_until_ms, 0, now_ms};
  o.worker_writes.push_back(*updated);
  return o;
}

constexpr const char* kOpNames[] = {"allocate",     "get_tag",      "put_tag",
                                    "delete_tag",   "list_tags",    "claim_worker",
                                    "renew_worker", "release_worker", "worker_status"};

bool IsWorkerOp(Request::Op op) {
  return op == Request::Op::kClaimWorker || op == Request::Op::kRenewWorker ||
         op == Request::Op::kReleaseWorker || op == Request::Op::kWorkerStatus;
}

}  // namespace

Result<void> CheckRoute(const Request& r, int32_t arrived_on, int32_t partitions) {
  if (r.partitions > 0 && r.partitions != partitions) {
    return Fail(Code::kFailedPrecondition,
                "request routed for " + std::to_string(r.partitions) +
                    " partitions arrived on partition " + std::to_string(arrived_on) +
                    " of an allocator whose cluster has " + std::to_string(partitions) +
                    ": the sender's partition count is wrong; restart it without kafka.partitions");
  }
  if (r.op == Request::Op::kListTags) return {};  // asked of every partition, each for its own tags
  const bool registry = IsWorkerOp(r.op);
  const std::string& key = registry ? std::string(kWorkersKey) : r.tag;
  const int32_t owner = kafka::PartitionFor(key, partitions);
  if (owner == arrived_on) return {};
  return Fail(Code::kFailedPrecondition,
              (registry ? std::string("registry request") : "tag '" + r.tag + "'") + " belongs to partition " +
                  std::to_string(owner) + " of " + std::to_string(partitions) +
                  ", but the request arrived on partition " + std::to_string(arrived_on) +
                  ": its sender routes with another partition count; refused so that no tag has two "
                  "owners. Restart the sender without kafka.partitions");
}

const char* OpName(Request::Op op) { return kOpNames[static_cast<int>(op)]; }
static_assert(std::size(kOpNames) == kOpCount);

// One short case per op, so that what each request does reads side by side in one switch.
Outcome Execute(const Request& r, StateReader& reader, const Rules& rules, int64_t now_ms) {
  if (r.op != Request::Op::kListTags && !IsWorkerOp(r.op)) {
    if (auto v = ValidateTag(r.tag); !v) return Failed(v.error());
  }
  switch (r.op) {
    case Request::Op::kAllocate:
      return ExecuteAllocate(r, reader, rules, now_ms);
    case Request::Op::kGetTag: {
      auto existing = reader.Get(r.tag);
      if (!existing) return Failed(existing.error());
      if (!*existing || (*existing)->deleted) return Failed(Error{Code::kNotFound, "unknown tag '" + r.tag + "'"});
      Outcome o;
      o.reply.tag = **existing;
      return o;
    }
    case Request::Op::kPutTag: {
      auto existing = reader.Get(r.tag);
      if (!existing) return Failed(existing.error());
      auto record = ApplyTagUpdate(*existing, r.tag, r.update, TagRulesOf(rules), now_ms);
      if (!record) return Failed(record.error());
      Outcome o;
      o.reply.tag = *record;
      o.writes.push_back(std::move(*record));
      return o;
    }
    case Request::Op::kDeleteTag: {
      auto existing = reader.Get(r.tag);
      if (!existing) return Failed(existing.error());
      if (!*existing || (*existing)->deleted) return Failed(Error{Code::kNotFound, "unknown tag '" + r.tag + "'"});
      Outcome o;
      o.reply.tag = **existing;
      state::TagRecord deleted = **existing;
      deleted.deleted = true;
      deleted.update_time_ms = now_ms;
      o.writes.push_back(std::move(deleted));
      return o;
    }
    case Request::Op::kClaimWorker:
    case Request::Op::kRenewWorker:
    case Request::Op::kReleaseWorker:
    case Request::Op::kWorkerStatus:
      return ExecuteWorker(r, reader, rules, now_ms);
    case Request::Op::kListTags: {
      auto all = reader.List();
      if (!all) return Failed(all.error());
      Outcome o;
      for (auto& t : *all) {
        if (!t.deleted) o.reply.tags.push_back(std::move(t));
      }
      std::sort(o.reply.tags.begin(), o.reply.tags.end(),
                [](const auto& a, const auto& b) { return a.tag < b.tag; });
      return o;
    }
  }
  return Failed(Error{Code::kInternal, "unknown request"});
}

std::string EncodeRequest(const Request& r) {
  json j = {{"op", kOpNames[static_cast<int>(r.op)]}};
  if (r.partitions > 0 && !IsWorkerOp(r.op)) j["partitions"] = r.partitions;
  if (IsWorkerOp(r.op)) {
    j["node_id"] = r.node_id;
    if (!r.holder.empty()) j["holder"] = r.holder;
    if (!r.previous_holder.empty()) j["previous_holder"] = r.previous_holder;
    if (r.partitions > 0) j["partitions"] = r.partitions;
    j["worker_id"] = r.worker_id;
    j["node_now"] = r.node_now_ms;
    j["last_timestamp"] = r.last_timestamp_ms;
    return j.dump();
  }
  if (r.op != Request::Op::kListTags) j["tag"] = r.tag;
  if (r.op == Request::Op::kAllocate) j["step"] = r.step;
  if (r.op == Request::Op::kPutTag) {
    json u = json::object();
    if (r.update.step) u["step"] = *r.update.step;
    if (r.update.max_id) u["max_id"] = *r.update.max_id;
    if (r.update.description) u["description"] = *r.update.description;
    if (r.update.id_mode) u["id_mode"] = state::IdModeName(*r.update.id_mode);
    if (r.update.restore_id_format) u["restore"] = TagToJson(*r.update.restore_id_format);
    j["update"] = u;
  }
  return j.dump();
}

Result<Request> DecodeRequest(std::string_view text) {
  try {
    json j = json::parse(text);
    Request r;
    std::string op = j.at("op").get<std::string>();
    r.partitions = j.value("partitions", int32_t{0});
    if (op == "allocate") {
      r.op = Request::Op::kAllocate;
      r.step = j.value("step", int64_t{0});
    } else if (op == "get_tag") {
      r.op = Request::Op::kGetTag;
    } else if (op == "put_tag") {
      r.op = Request::Op::kPutTag;
      const json& u = j.at("update");
      if (u.contains("step")) r.update.step = u.at("step").get<int64_t>();
      if (u.contains("max_id")) r.update.max_id = u.at("max_id").get<int64_t>();
      if (u.contains("description")) r.update.description = u.at("description").get<std::string>();
      if (u.contains("id_mode")) {
        auto mode = state::ParseIdMode(u.at("id_mode").get<std::string>());
        if (!mode) return std::unexpected(mode.error());
        r.update.id_mode = *mode;
      }
      if (u.contains("restore")) {
        auto restore = state::DecodeTag(u.at("restore").dump());
        if (!restore) return std::unexpected(restore.error());
        r.update.restore_id_format = *restore;
      }
    } else if (op == "delete_tag") {
      r.op = Request::Op::kDeleteTag;
    } else if (op == "list_tags") {
      r.op = Request::Op::kListTags;
    } else if (op == "claim_worker" || op == "renew_worker" || op == "release_worker" ||
               op == "worker_status") {
      for (int i = 5; i < 9; ++i) {
        if (op == kOpNames[i]) r.op = static_cast<Request::Op>(i);
      }
      r.node_id = j.value("node_id", "");
      r.holder = j.value("holder", "");
      r.previous_holder = j.value("previous_holder", "");
      r.worker_id = j.value("worker_id", int64_t{-1});
      r.node_now_ms = j.value("node_now", int64_t{0});
      r.last_timestamp_ms = j.value("last_timestamp", int64_t{0});
      return r;
    } else {
      return Fail(Code::kInvalidArgument, "unknown request op '" + op + "'");
    }
    if (r.op != Request::Op::kListTags) r.tag = j.at("tag").get<std::string>();
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInvalidArgument, std::string("malformed request: ") + e.what());
  }
}

std::string EncodeReply(const Reply& r) {
  json j = json::object();
  if (r.error) {
    j["error"] = {{"code", CodeName(r.error->code)}, {"message", r.error->message}};
  }
  if (r.segment) {
    j["segment"] = {{"tag", r.segment->tag},
                    {"start", r.segment->start},
                    {"end", r.segment->end},
                    {"min_step", r.segment->min_step}};
    FormatToJson(*r.segment, j["segment"]);
  }
  if (r.tag) j["tag"] = TagToJson(*r.tag);
  if (!r.tags.empty()) {
    j["tags"] = json::array();
    for (const auto& t : r.tags) j["tags"].push_back(TagToJson(t));
  }
  if (r.lease) {
    j["lease"] = {{"worker_id", r.lease->worker_id},
                  {"lease_until", r.lease->lease_until_ms},
                  {"not_before", r.lease->not_before_ms},
                  {"allocator_now", r.lease->allocator_now_ms}};
    if (!r.lease->notice.empty()) j["lease"]["notice"] = r.lease->notice;
  }
  if (r.workers) j["workers"] = {{"leased", r.workers->leased}, {"free", r.workers->free}};
  return j.dump();
}

Result<Reply> DecodeReply(std::string_view text) {
  try {
    json j = json::parse(text);
    Reply r;
    if (j.contains("error")) {
      r.error = Error{CodeFromName(j["error"].at("code").get<std::string>()),
                      j["error"].at("message").get<std::string>()};
    }
    if (j.contains("segment")) {
      const json& s = j["segment"];
      r.segment = Segment{s.at("tag").get<std::string>(), s.at("start").get<int64_t>(),
                          s.at("end").get<int64_t>(), s.at("min_step").get<int64_t>()};
      auto format = FormatFromJson(r.segment->tag, s);
      if (!format) return std::unexpected(format.error());
      r.segment->format = *format;
    }
    if (j.contains("tag")) {
      auto t = state::DecodeTag(j["tag"].dump());
      if (!t) return std::unexpected(t.error());
      r.tag = *t;
    }
    if (j.contains("lease")) {
      const json& l = j["lease"];
      r.lease =
          WorkerLeaseInfo{l.at("worker_id").get<int64_t>(), l.at("lease_until").get<int64_t>(),
                          l.at("not_before").get<int64_t>(), l.value("allocator_now", int64_t{0}),
                          l.value("notice", std::string())};
    }
    if (j.contains("workers")) {
      r.workers = WorkerCounts{j["workers"].at("leased").get<int64_t>(), j["workers"].at("free").get<int64_t>()};
    }
    if (j.contains("tags")) {
      for (const auto& t : j["tags"]) {
        auto d = state::DecodeTag(t.dump());
        if (!d) return std::unexpected(d.error());
        r.tags.push_back(*d);
      }
    }
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("malformed reply: ") + e.what());
  }
}

}  // namespace kleaf::allocator
