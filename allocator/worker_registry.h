// The snowflake worker-id registry as its clients see it: claim, renew, release, count. All that
// a snowflake node needs of the allocators (snowflake/worker_lease.h); the rules are in
// workers.h, and the Allocator (allocator.h) serves them beside the segments.
#pragma once

#include <functional>

#include "allocator/workers.h"
#include "base/error.h"

namespace kleaf::allocator {

template <typename T>
using Callback = std::function<void(Result<T>)>;

// Every method returns at once and completes `done` exactly once, on a thread of the
// implementation's choosing (never the caller's I/O thread for blocking work). Requests are
// serialized with each other by the owner of the `__workers__` partition (in-process: one mutex).
class WorkerRegistry {
 public:
  virtual ~WorkerRegistry() = default;
  // A worker id for `claim.claimant`, leased until the answer's lease_until_ms.
  virtual void ClaimWorker(WorkerClaim claim, Callback<WorkerLeaseInfo> done) = 0;
  // Extends the holder's lease; kFailedPrecondition when another process holds the id now.
  virtual void RenewWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) = 0;
  // Ends the holder's lease now (at shutdown).
  virtual void ReleaseWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) = 0;
  // How many ids are leased and free.
  virtual void WorkerStatus(Callback<WorkerCounts> done) = 0;
};

}  // namespace kleaf::allocator
