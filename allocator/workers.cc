#include "allocator/workers.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace kleaf::allocator {

Result<WorkerGrant> ClaimWorker(const std::vector<WorkerRecord>& records, const std::string& node_id,
                                int64_t node_now_ms, int64_t now_ms, const WorkerRules& rules) {
  if (node_id.empty()) return Fail(Code::kInvalidArgument, "claim: node.id is empty");
  const int64_t skew = node_now_ms - now_ms;
  if (std::llabs(skew) > rules.max_clock_skew_ms) {
    return Fail(Code::kFailedPrecondition,
                "claim refused: this node's clock differs from the allocator's by " +
                    std::to_string(skew) + " ms (more than " + std::to_string(rules.max_clock_skew_ms) +
                    " ms); fix the clock (NTP)");
  }
  std::map<int64_t, const WorkerRecord*> by_id;
  for (const auto& r : records) {
    if (r.worker_id >= 0 && r.worker_id <= rules.max_worker_id) by_id[r.worker_id] = &r;
  }
  auto expired = [&](const WorkerRecord& r) { return r.lease_until_ms <= now_ms; };
  const WorkerRecord* chosen = nullptr;
  int64_t chosen_id = -1;
  // 1. This node's previous id, unless someone else holds it now.
  for (const auto& [id, r] : by_id) {
    if (r->node_id == node_id) {
      chosen = r;
      chosen_id = id;
      break;
    }
  }
  // 2. The lowest id never used.
  if (chosen == nullptr) {
    for (int64_t id = 0; id <= rules.max_worker_id; ++id) {
      if (!by_id.contains(id)) {
        chosen_id = id;
        break;
      }
    }
  }
  // 3. The lowest expired one.
  if (chosen_id < 0) {
    for (const auto& [id, r] : by_id) {
      if (expired(*r)) {
        chosen = r;
        chosen_id = id;
        break;
      }
    }
  }
  if (chosen_id < 0) {
    return Fail(Code::kResourceExhausted,
                "all " + std::to_string(rules.max_worker_id + 1) +
                    " snowflake worker ids are leased; free one (stop a node) or use more worker bits");
  }
  WorkerGrant grant;
  grant.record.worker_id = chosen_id;
  grant.record.node_id = node_id;
  grant.record.lease_until_ms = now_ms + rules.lease_ttl_ms;
  grant.not_before_ms = 0;
  if (chosen != nullptr) {
    grant.record.last_timestamp_ms = chosen->last_timestamp_ms;
    // The previous holder (this node's earlier life included: it may have crashed and lost its
    // local mark) may have issued timestamps after its last report, up to the end of its lease
    // and never beyond its clock, which is within max_clock_skew of ours: start after all of them.
    const int64_t issued_at_most =
        std::min(chosen->lease_until_ms, now_ms + rules.max_clock_skew_ms);
    grant.not_before_ms = std::max(chosen->last_timestamp_ms, issued_at_most);
  }
  return grant;
}

Result<WorkerRecord> RenewWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                 const std::string& node_id, int64_t last_timestamp_ms,
                                 int64_t now_ms, const WorkerRules& rules) {
  if (!record || record->node_id != node_id) {
    return Fail(Code::kFailedPrecondition, "worker id " + std::to_string(worker_id) +
                                               " is no longer leased to node " + node_id);
  }
  WorkerRecord r = *record;
  r.lease_until_ms = std::max(r.lease_until_ms, now_ms + rules.lease_ttl_ms);
  r.last_timestamp_ms = std::max(r.last_timestamp_ms, last_timestamp_ms);
  return r;
}

Result<WorkerRecord> ReleaseWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                   const std::string& node_id, int64_t last_timestamp_ms,
                                   int64_t now_ms) {
  if (!record || record->node_id != node_id) {
    return Fail(Code::kFailedPrecondition, "worker id " + std::to_string(worker_id) +
                                               " is not leased to node " + node_id);
  }
  WorkerRecord r = *record;
  r.last_timestamp_ms = std::max(r.last_timestamp_ms, last_timestamp_ms);
  // The lease ends, but never before the newest reported timestamp: a later holder starts above it.
  r.lease_until_ms = std::min(r.lease_until_ms, std::max(now_ms, r.last_timestamp_ms));
  return r;
}

WorkerCounts CountWorkers(const std::vector<WorkerRecord>& records, int64_t now_ms,
                          const WorkerRules& rules) {
  WorkerCounts c;
  for (const auto& r : records) {
    if (r.worker_id <= rules.max_worker_id && r.lease_until_ms > now_ms) ++c.leased;
  }
  c.free = rules.max_worker_id + 1 - c.leased;
  return c;
}

}  // namespace kleaf::allocator
