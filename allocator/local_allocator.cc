#include "allocator/local_allocator.h"

namespace kleaf::allocator {
namespace {

class StoreReader final : public StateReader {
 public:
  explicit StoreReader(state::Store& store) : store_(store) {}
  Result<std::optional<state::TagRecord>> Get(const std::string& tag) override {
    return store_.GetTag(tag);
  }
  Result<std::vector<state::TagRecord>> List() override { return store_.ListTags(); }
  Result<std::vector<state::WorkerRecord>> ListWorkers() override { return store_.ListWorkers(); }
  Result<std::optional<state::SpaceRecord>> GetSpace(const std::string& space) override {
    return store_.GetSpace(space);
  }
  Result<std::vector<state::SpaceRecord>> ListSpaces() override { return store_.ListSpaces(); }
  Result<std::optional<state::SectionRecord>> GetSection(const std::string& space,
                                                         uint64_t section) override {
    return store_.GetSection(space, section);
  }

 private:
  state::Store& store_;
};

Rules RulesOf(const LocalAllocatorOptions& o) {
  Rules r{o.max_step, o.default_step, o.auto_create, o.workers, o.default_id_mode};
  r.spaces = o.spaces;
  return r;
}

}  // namespace

LocalAllocator::LocalAllocator(state::Store& store, Clock& clock, LocalAllocatorOptions options)
    : store_(store),
      clock_(clock),
      rules_(RulesOf(options)),
      pool_(options.threads, "kleaf-alloc") {}

LocalAllocator::~LocalAllocator() { pool_.Stop(); }

template <typename Op>
Result<typename Op::Result> LocalAllocator::Run(const Op& op) {
  MutexLock lock(mu_);
  StoreReader reader(store_);
  if constexpr (kNeedsCounters<Op>) {
    auto plan = counters_.Begin();
    if (!plan) return std::unexpected(plan.error());
    SequenceState seq{counters_, *plan};
    Outcome<Op> outcome = Execute(op, reader, rules_, clock_.NowMs(), seq);
    if (!outcome.result) return std::move(outcome.result);  // the plan is dropped
    // I5: the raised maxima are durable before any value above the old ones leaves; only then
    // do the counters take the values. A failed write drops the plan: nothing was handed out.
    std::vector<state::SectionRecord> raises = plan->Raises();
    if (!raises.empty()) {
      state::Store::Batch batch;
      batch.sections = std::move(raises);
      if (auto put = store_.Write(batch, /*sync=*/true); !put) {
        return std::unexpected(put.error());
      }
    }
    if (auto c = counters_.Commit(std::move(*plan)); !c) return std::unexpected(c.error());
    return std::move(outcome.result);
  } else {
    Outcome<Op> outcome = Execute(op, reader, rules_, clock_.NowMs());
    if (!outcome.effects.empty()) {
      state::Store::Batch batch;
      batch.tags = outcome.effects.writes;
      batch.workers = outcome.effects.worker_writes;
      batch.spaces = outcome.effects.space_writes;
      if (auto put = store_.Write(batch, /*sync=*/true); !put) {
        return std::unexpected(put.error());
      }
    }
    if constexpr (std::is_same_v<Op, op::DeleteSpace>) {
      // Reloading at the persisted maximum is always safe; a deleted space's counters are memory
      // no one needs.
      if (outcome.result) counters_.Forget(op.space);
    }
    return std::move(outcome.result);
  }
}

template Result<Segment> LocalAllocator::Run(const op::Allocate&);
template Result<state::TagRecord> LocalAllocator::Run(const op::PutTag&);
template Result<state::SpaceRecord> LocalAllocator::Run(const op::GetSpace&);
template Result<state::SpaceRecord> LocalAllocator::Run(const op::PutSpace&);
template Result<state::SpaceRecord> LocalAllocator::Run(const op::DeleteSpace&);
template Result<std::vector<state::SpaceRecord>> LocalAllocator::Run(const op::ListSpaces&);
template Result<std::vector<uint64_t>> LocalAllocator::Run(const op::NextSeq&);
template Result<uint64_t> LocalAllocator::Run(const op::CurrentSeq&);
template Result<uint64_t> LocalAllocator::Run(const op::RaiseSection&);

template <typename Op>
void LocalAllocator::Post(Op op, Callback<typename Op::Result> done) {
  pool_.Post([this, op = std::move(op), done = std::move(done)] { done(Run(op)); });
}

void LocalAllocator::AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) {
  Post(op::Allocate{std::move(tag), step}, std::move(done));
}

void LocalAllocator::ListTags(Callback<std::vector<state::TagRecord>> done) {
  Post(op::ListTags{}, std::move(done));
}

void LocalAllocator::GetTag(std::string tag, Callback<state::TagRecord> done) {
  Post(op::GetTag{std::move(tag)}, std::move(done));
}

void LocalAllocator::PutTag(std::string tag, TagUpdate update, Callback<state::TagRecord> done) {
  Post(op::PutTag{std::move(tag), std::move(update)}, std::move(done));
}

void LocalAllocator::DeleteTag(std::string tag, Callback<state::TagRecord> done) {
  Post(op::DeleteTag{std::move(tag)}, std::move(done));
}

void LocalAllocator::ClaimWorker(WorkerClaim claim, Callback<WorkerLeaseInfo> done) {
  Post(op::ClaimWorker{std::move(claim)}, std::move(done));
}

void LocalAllocator::RenewWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  Post(op::RenewWorker{std::move(report)}, std::move(done));
}

void LocalAllocator::ReleaseWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  Post(op::ReleaseWorker{std::move(report)}, std::move(done));
}

void LocalAllocator::WorkerStatus(Callback<WorkerCounts> done) {
  Post(op::WorkerStatus{}, std::move(done));
}

void LocalAllocator::GetSpace(std::string space, Callback<state::SpaceRecord> done) {
  Post(op::GetSpace{std::move(space)}, std::move(done));
}

void LocalAllocator::PutSpace(std::string space, SpaceUpdate update,
                              Callback<state::SpaceRecord> done) {
  Post(op::PutSpace{std::move(space), std::move(update)}, std::move(done));
}

void LocalAllocator::DeleteSpace(std::string space, Callback<state::SpaceRecord> done) {
  Post(op::DeleteSpace{std::move(space)}, std::move(done));
}

void LocalAllocator::ListSpaces(Callback<std::vector<state::SpaceRecord>> done) {
  Post(op::ListSpaces{}, std::move(done));
}

void LocalAllocator::NextSeq(std::string space, std::vector<uint64_t> keys,
                             Callback<std::vector<uint64_t>> done) {
  Post(op::NextSeq{std::move(space), std::move(keys)}, std::move(done));
}

void LocalAllocator::CurrentSeq(std::string space, uint64_t key, Callback<uint64_t> done) {
  Post(op::CurrentSeq{std::move(space), key}, std::move(done));
}

void LocalAllocator::RaiseSection(std::string space, uint64_t section, int64_t section_size,
                                  uint64_t max_seq, Callback<uint64_t> done) {
  Post(op::RaiseSection{std::move(space), section, section_size, max_seq}, std::move(done));
}

size_t LocalAllocator::SequenceMemoryBytes() {
  MutexLock lock(mu_);
  return counters_.MemoryBytes();
}

size_t LocalAllocator::SequenceTrackedKeys() {
  MutexLock lock(mu_);
  return counters_.TrackedKeys();
}

}  // namespace kleaf::allocator
