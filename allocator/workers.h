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

struct WorkerRules {
  int64_t max_worker_id = 1023;     // from the snowflake layout: 2^worker_bits - 1
  int64_t lease_ttl_ms = 30000;
  int64_t max_clock_skew_ms = 1000;  // a claim whose clock differs more is refused
};

struct WorkerGrant {
  WorkerRecord record;   // as it must be stored
  int64_t not_before_ms;  // issue no timestamp at or before this
};

// Claim by `node_id`, whose wall clock read `node_now_ms` when it asked. Its previous id comes
// back when no one else holds it; otherwise the lowest id never used, then the lowest expired one.
Result<WorkerGrant> ClaimWorker(const std::vector<WorkerRecord>& records, const std::string& node_id,
                                int64_t node_now_ms, int64_t now_ms, const WorkerRules& rules);

// Renewal by the holder, reporting its newest issued timestamp. Fails with kFailedPrecondition when
// someone else holds the id now (the caller must stop issuing).
Result<WorkerRecord> RenewWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                 const std::string& node_id, int64_t last_timestamp_ms,
                                 int64_t now_ms, const WorkerRules& rules);

// Release at shutdown: the lease ends now, the reported timestamp is kept.
Result<WorkerRecord> ReleaseWorker(const std::optional<WorkerRecord>& record, int64_t worker_id,
                                   const std::string& node_id, int64_t last_timestamp_ms,
                                   int64_t now_ms);

struct WorkerCounts {
  int64_t leased = 0;
  int64_t free = 0;  // never used or expired
};
WorkerCounts CountWorkers(const std::vector<WorkerRecord>& records, int64_t now_ms,
                          const WorkerRules& rules);

}  // namespace kleaf::allocator
