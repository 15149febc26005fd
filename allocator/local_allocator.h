// The in-process allocator of the standalone shape: reserves segments in a local state::Store.
#pragma once

#include <memory>

#include "allocator/allocator.h"
#include "allocator/operations.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "base/worker_pool.h"
#include "state/store.h"

namespace kleaf::allocator {

struct LocalAllocatorOptions {
  int64_t max_step = 1000000;
  int64_t default_step = 1000;
  bool auto_create = false;  // an unknown tag gets a record with default_step instead of kNotFound
  int threads = 2;
  WorkerRules workers;
  state::IdMode default_id_mode = state::IdMode::kPlain;  // of tags created without id_mode
  SpaceRules spaces = {};
};

// Thread-safe. Owns its worker threads; callbacks run on them. Invariant (docs/architecture.md,
// I2): the record holding a segment's new max_id is synced to the store before the callback sees
// it. Sequences (I5): the section maxima a NextSeq raises are synced to the store before its
// values are returned, and only then do the in-memory counters take the values; a restart loads
// each section at its persisted maximum, above every value returned before.
class LocalAllocator final : public Allocator {
 public:
  LocalAllocator(state::Store& store, Clock& clock, LocalAllocatorOptions options);
  ~LocalAllocator() override;

  // Runs the call's operation on a worker thread (RunNow) and completes its callback there.
  void Submit(AnyCall call) override;

  // Runs one operation, blocking the caller: the writes it implies are synced to the store
  // before its result is returned. Submit() runs it on the worker threads.
  template <typename Op>
  [[nodiscard]] Result<typename Op::Result> RunNow(const Op& op);
  [[nodiscard]] Result<Segment> AllocateSegmentNow(const std::string& tag, int64_t step) {
    return RunNow(op::Allocate{tag, step});
  }
  [[nodiscard]] Result<state::TagRecord> PutTagNow(const std::string& tag,
                                                   const TagUpdate& update) {
    return RunNow(op::PutTag{tag, update});
  }

  // The counters' heap bytes and tracked keys (for metrics and tests).
  size_t SequenceMemoryBytes();
  size_t SequenceTrackedKeys();

  // Drains queued work and joins the worker threads.
  void Stop() { pool_.Stop(); }

 private:
  // Runs `op` on a worker thread and completes `done` with its result there.
  template <typename Op>
  void Post(Op op, Callback<typename Op::Result> done);
  // Writes the counters' wanted raises (TakeRaises), synced, and settles them.
  [[nodiscard]] Result<void> WriteRaises() KLEAF_REQUIRES(mu_);

  state::Store& store_;
  Clock& clock_;
  const Rules rules_;
  Mutex mu_;  // serializes every operation: read, decide, synced write
  SequenceCounters counters_ KLEAF_GUARDED_BY(mu_);
  WorkerPool pool_;
};

}  // namespace kleaf::allocator
