// The snowflake worker-id registry's rules: who gets which worker id, for how long, and from
// which timestamp on. Pure code; the allocator owning the `__workers__` partition applies it to
// the records it keeps in the state topic (`wrk/<id>`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

inline constexpr char kWorkersKey[] = "__workers__";

using state::WorkerRecord;

// The registry hands out ids in [min_worker_id, max_worker_id] only: the slice of the worker-id
// space of this cluster's datacenter (datacenter.h WorkerRangeOf; all ids with one datacenter).
struct WorkerRules {
  int64_t max_worker_id = 1023;  // from the snowflake layout and the datacenter's slice
  int64_t lease_ttl_ms = 60000;
  int64_t max_clock_skew_ms = 1000;  // a claim whose clock differs more is refused
  int64_t min_worker_id = 0;         // the datacenter's slice starts here
};

// Who asks for, renews or releases a lease. A node id is only a name: two processes can share it
// (two gateways on one host, a gateway and a producer, a replacement VM that kept the host name).
// The process is `holder`, a random token it draws at start; `previous_holder` is the token of the
// process that last ran on this node's state directory, which this process can vouch is gone
// because it holds that directory's lock.
struct Claimant {
  std::string node_id = {};
  std::string holder = {};
  std::string previous_holder = {};  // empty: no earlier process on this state directory
};

// True when `record` was last held by this claimant's process or by the earlier process on the
// same state directory. Records and claimants without holders (written by older kleaf versions)
// match each other by node id alone.
bool HeldBy(const WorkerRecord& record, const Claimant& claimant);

struct WorkerGrant {
  WorkerRecord record;   // as it must be stored
  int64_t not_before_ms;  // issue no timestamp at or before this
  // Set when another live process with the same node id holds a lease: what it holds, so the
  // claimant can warn its operator (the grant itself is a different id).
  std::string notice = {};
};

// Claim by `claimant`, whose wall clock read `node_now_ms` when it asked. Its own id comes back
// when this process or the previous one on its state directory holds it, or when its lease ended;
// a live lease of another process with the same node id is never handed over. Otherwise the lowest
// id never used, then the lowest expired one.
[[nodiscard]] Result<WorkerGrant> ClaimWorker(const std::vector<WorkerRecord>& records,
                                              const Claimant& claimant, int64_t node_now_ms,
                                              int64_t now_ms, const WorkerRules& rules);

// Renewal by the holder (HeldBy), reporting its newest issued timestamp; the lease then names this
// process as its holder. Fails with kFailedPrecondition when another process holds the id now (the
// caller must stop issuing).
[[nodiscard]] Result<WorkerRecord> RenewWorker(const std::optional<WorkerRecord>& record,
                                               int64_t worker_id, const Claimant& claimant,
                                               int64_t last_timestamp_ms, int64_t now_ms,
                                               const WorkerRules& rules);

// Release at shutdown by the holder: the lease ends now, the reported timestamp is kept.
[[nodiscard]] Result<WorkerRecord> ReleaseWorker(const std::optional<WorkerRecord>& record,
                                                 int64_t worker_id, const Claimant& claimant,
                                                 int64_t last_timestamp_ms, int64_t now_ms);

// What a gateway or producer asks the registry (Allocator::ClaimWorker and the rest) and what it
// answers; the allocator applies the rules above to the records.
struct WorkerClaim {
  Claimant claimant = {};
  int64_t node_now_ms = 0;  // the claimant's wall clock when it asked
};
// A renewal or release by the holder of `worker_id`.
struct WorkerReport {
  Claimant claimant = {};
  int64_t worker_id = -1;
  int64_t node_now_ms = 0;
  int64_t last_timestamp_ms = 0;  // the newest timestamp the holder issued
};
struct WorkerLeaseInfo {
  int64_t worker_id = -1;
  int64_t lease_until_ms = 0;
  int64_t not_before_ms = 0;  // claim: issue no timestamp at or before this
  // The allocator's wall clock when it handled the request (0 from allocators that predate it):
  // lets the node estimate its clock offset to the allocator (claim, renew).
  int64_t allocator_now_ms = 0;
  std::string notice = {};  // claim: another live process uses this node id (WorkerGrant)
};

struct WorkerCounts {
  int64_t leased = 0;
  int64_t free = 0;  // never used or expired
};
WorkerCounts CountWorkers(const std::vector<WorkerRecord>& records, int64_t now_ms,
                          const WorkerRules& rules);

}  // namespace kleaf::allocator
