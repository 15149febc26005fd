// The asynchronous interface between gateways (and producers) and allocators: get a segment of a
// tag, administer tags and sequence spaces, lease a snowflake worker id. Implemented in-process
// (LocalAllocator) and, in the cluster shape, over Kafka (cluster/allocator_client.h); the wire
// format stays behind it.
//
// One entry for every operation: an implementation writes Submit(), which takes any operation of
// allocator::Request (operations.h) with the callback of its result type; callers write
// Run(op::PutTag{tag, update}, done). A new operation is one more alternative of Request, with no
// method to add here.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "allocator/allocation.h"
#include "allocator/operations.h"
#include "allocator/segment_source.h"
#include "allocator/worker_registry.h"
#include "allocator/workers.h"

namespace kleaf::allocator {

// One operation with the callback of its result.
template <typename Op>
struct Call {
  Op op;
  Callback<typename Op::Result> done;
};

namespace detail {
template <typename Variant>
struct CallsOf;
template <typename... Ops>
struct CallsOf<std::variant<Ops...>> {
  using type = std::variant<Call<Ops>...>;
};
}  // namespace detail

// A Call of any operation of Request (one alternative per alternative of Request, in its order).
using AnyCall = detail::CallsOf<Request>::type;

// Submit() returns at once and completes the call's `done` exactly once, on a thread of the
// implementation's choosing (never the caller's I/O thread for blocking work). What each operation
// does and answers is in operations.h. The narrow interfaces (SegmentSource for segment buffers
// and producers, WorkerRegistry for snowflake nodes) are served through Submit too.
class Allocator : public SegmentSource, public WorkerRegistry {
 public:
  virtual void Submit(AnyCall call) = 0;

  // Submit() of one operation: the result type is the operation's (op::X::Result).
  template <typename Op>
  void Run(Op op, Callback<typename Op::Result> done) {
    Submit(AnyCall(std::in_place_type<Call<Op>>, Call<Op>{std::move(op), std::move(done)}));
  }

  void AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) final {
    Run(op::Allocate{std::move(tag), step}, std::move(done));
  }
  void ClaimWorker(WorkerClaim claim, Callback<WorkerLeaseInfo> done) final {
    Run(op::ClaimWorker{std::move(claim)}, std::move(done));
  }
  void RenewWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) final {
    Run(op::RenewWorker{std::move(report)}, std::move(done));
  }
  void ReleaseWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) final {
    Run(op::ReleaseWorker{std::move(report)}, std::move(done));
  }
  void WorkerStatus(Callback<WorkerCounts> done) final { Run(op::WorkerStatus{}, std::move(done)); }
};

}  // namespace kleaf::allocator
