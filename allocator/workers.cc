#include "allocator/workers.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace kleaf::allocator {

bool HeldBy(const WorkerRecord& record, const Claimant& claimant) {
  if (record.node_id != claimant.node_id) return false;
  if (record.holder == claimant.holder) return true;
  return !claimant.previous_holder.empty() && record.holder == claimant.previous_holder;
}

namespace {

std::string HolderName(const WorkerRecord& r) {
  return r.holder.empty() ? std::string("a process") : "process " + r.holder;
}

// The id a claim gets, in order of preference, among the records of ids in range.
struct Choice {
  const WorkerRecord* chosen = nullptr;    // the record of the chosen id; null for an unused id
  int64_t chosen_id = -1;                  // -1: every id is leased
  const WorkerRecord* conflict = nullptr;  // a live lease of another process with this node id
};

Choice ChooseWorkerId(const std::map<int64_t, const WorkerRecord*>& by_id, const Claimant& claimant,
                      int64_t now_ms, const WorkerRules& rules) {
  auto expired = [&](const WorkerRecord& r) { return r.lease_until_ms <= now_ms; };
  Choice c;
  // 1. This process's id, or the previous process's on the same state directory: it is gone.
  for (const auto& [id, r] : by_id) {
    if (HeldBy(*r, claimant)) return {r, id, nullptr};
  }
  // 2. An id this node id held whose lease ended. A live one belongs to another process.
  for (const auto& [id, r] : by_id) {
    if (r->node_id != claimant.node_id) continue;
    if (expired(*r)) return {r, id, c.conflict};
    if (c.conflict == nullptr) c.conflict = r;
  }
  // 3. The lowest id never used.
  for (int64_t id = rules.min_worker_id; id <= rules.max_worker_id; ++id) {
    if (!by_id.contains(id)) {
      c.chosen_id = id;
      return c;
    }
  }
  // 4. The lowest expired one.
  for (const auto& [id, r] : by_id) {
    if (expired(*r)) {
      c.chosen = r;
      c.chosen_id = id;
      return c;
    }
  }
  return c;
}

}  // namespace

Result<WorkerGrant> ClaimWorker(const std::vector<WorkerRecord>& records, const Claimant& claimant,
                                int64_t node_now_ms, int64_t now_ms, const WorkerRules& rules) {
  if (claimant.node_id.empty()) return Fail(Code::kInvalidArgument, "claim: node.id is empty");
  const int64_t skew = node_now_ms - now_ms;
  if (std::llabs(skew) > rules.max_clock_skew_ms) {
    return Fail(Code::kFailedPrecondition,
                "claim refused: this node's clock differs from the allocator's by " +
                    std::to_string(skew) + " ms (more than " + std::to_string(rules.max_clock_skew_ms) +
                    " ms); fix the clock (NTP)");
  }
  std::map<int64_t, const WorkerRecord*> by_id;
  for (const auto& r : records) {
    // Ids outside this datacenter's slice are another datacenter's (or a wider layout's): never
    // handed out here, whoever holds them.
    if (r.worker_id >= rules.min_worker_id && r.worker_id <= rules.max_worker_id) {
      by_id[r.worker_id] = &r;
    }
  }
  const auto [chosen, chosen_id, conflict] = ChooseWorkerId(by_id, claimant, now_ms, rules);
  if (chosen_id < 0) {
    return Fail(Code::kResourceExhausted,
                "all " + std::to_string(rules.max_worker_id - rules.min_worker_id + 1) +
                    " snowflake worker ids are leased (" + std::to_string(rules.min_worker_id) +
                    " to " + std::to_string(rules.max_worker_id) +
                    ", this datacenter's); free one (stop a node) or use more worker bits");
  }
  WorkerGrant grant;
  grant.record.worker_id = chosen_id;
  grant.record.node_id = claimant.node_id;
  grant.record.holder = claimant.holder;
  grant.record.lease_until_ms = now_ms + rules.lease_ttl_ms;
  grant.not_before_ms = 0;
  if (chosen != nullptr) {
    grant.record.last_timestamp_ms = chosen->last_timestamp_ms;
    // The previous holder (this node's earlier life included: it may have crashed and lost its
    // local mark) may have issued timestamps after its last report, up to the end of its lease
    // (it never issues past the lease end it was granted) and never beyond its clock, which is
    // within max_clock_skew of ours: start after all of them.
    const int64_t issued_at_most =
        std::min(chosen->lease_until_ms, now_ms + rules.max_clock_skew_ms);
    grant.not_before_ms = std::max(chosen->last_timestamp_ms, issued_at_most);
  }
  if (conflict != nullptr) {
    grant.notice = "node id '" + claimant.node_id + "' already holds worker id " +
                   std::to_string(conflict->worker_id) + " through " + HolderName(*conflict) +
                   " (lease until " + std::to_string(conflict->lease_until_ms) +
                   " ms): another live process uses this node.id; granted worker id " +
                   std::to_string(chosen_id) + " instead. Give every process its own node.id";
  }
  return grant;
}

Result<WorkerRecord> RenewWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                 const Claimant& claimant, int64_t last_timestamp_ms,
                                 int64_t now_ms, const WorkerRules& rules) {
  if (worker_id < rules.min_worker_id || worker_id > rules.max_worker_id) {
    return Fail(Code::kFailedPrecondition,
                "worker id " + std::to_string(worker_id) + " is outside this datacenter's ids (" +
                    std::to_string(rules.min_worker_id) + " to " +
                    std::to_string(rules.max_worker_id) + "): stop issuing with it");
  }
  if (!record || !HeldBy(*record, claimant)) {
    return Fail(Code::kFailedPrecondition,
                "worker id " + std::to_string(worker_id) + " is no longer leased to this process (node " +
                    claimant.node_id + ")" +
                    (record ? ": held by node " + record->node_id + ", " + HolderName(*record) : ""));
  }
  WorkerRecord r = *record;
  r.holder = claimant.holder;
  r.lease_until_ms = std::max(r.lease_until_ms, now_ms + rules.lease_ttl_ms);
  r.last_timestamp_ms = std::max(r.last_timestamp_ms, last_timestamp_ms);
  return r;
}

Result<WorkerRecord> ReleaseWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                   const Claimant& claimant, int64_t last_timestamp_ms,
                                   int64_t now_ms) {
  if (!record || !HeldBy(*record, claimant)) {
    return Fail(Code::kFailedPrecondition, "worker id " + std::to_string(worker_id) +
                                               " is not leased to this process (node " +
                                               claimant.node_id + ")");
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
    if (r.worker_id >= rules.min_worker_id && r.worker_id <= rules.max_worker_id &&
        r.lease_until_ms > now_ms) {
      ++c.leased;
    }
  }
  c.free = rules.max_worker_id - rules.min_worker_id + 1 - c.leased;
  return c;
}

}  // namespace kleaf::allocator
