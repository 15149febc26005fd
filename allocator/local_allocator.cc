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
      counters_(options.spaces.raise_ahead),
      pool_(options.threads, "kleaf-alloc") {}

LocalAllocator::~LocalAllocator() { pool_.Stop(); }

Result<void> LocalAllocator::WriteRaises() {
  std::vector<state::SectionRecord> raises = counters_.TakeRaises();
  if (raises.empty()) return {};
  state::Store::Batch batch;
  batch.sections = raises;
  auto put = store_.Write(batch, /*sync=*/true);
  counters_.Settle(raises, put.has_value());
  return put;
}

template <typename Op>
Result<typename Op::Result> LocalAllocator::RunNow(const Op& op) {
  MutexLock lock(mu_);
  StoreReader reader(store_);
  if constexpr (kNeedsCounters<Op>) {
    // The store holds only what a synced write made durable: a section's committed maximum
    // (docs/architecture.md, R6).
    SequenceState seq{counters_, [this](const std::string& space, uint64_t section) {
                        return store_.GetSection(space, section);
                      }};
    Outcome<Op> outcome = Execute(op, reader, rules_, clock_.NowMs(), seq);
    if (seq.needs_raise) {
      // The raise first, synced, then the values: none is computed above a durable maximum (I5).
      if (auto w = WriteRaises(); !w) return std::unexpected(w.error());
      seq.needs_raise = false;
      outcome = Execute(op, reader, rules_, clock_.NowMs(), seq);
      if (seq.needs_raise) {
        return Fail(Code::kInternal, "a sequence call still needs a raise after its raise");
      }
    }
    // Raises ahead of need and imports. The values computed are at or below the durable maxima
    // already, so a failed raise ahead of need only leaves it wanted again by the next call (whose
    // raise at need reports the store's error); an import is answered only once its raise is
    // durable.
    if (auto w = WriteRaises(); !w && std::is_same_v<Op, op::RaiseSection>) {
      return std::unexpected(w.error());
    }
    return std::move(outcome.result);
  } else {
    Outcome<Op> outcome = Execute(op, reader, rules_, clock_.NowMs());
    if (!outcome.result) return std::move(outcome.result);
    if (!outcome.effects.empty()) {
      state::Store::Batch batch;
      batch.Append(std::move(outcome.effects));
      if (auto put = store_.Write(batch, /*sync=*/true); !put) return std::unexpected(put.error());
    }
    if constexpr (std::is_same_v<Op, op::DeleteSpace>) {
      // Reloading at the committed maximum is always safe; a deleted space's counters are memory
      // no one needs.
      counters_.Forget(op.space);
    }
    return std::move(outcome.result);
  }
}

template <typename Op>
void LocalAllocator::Post(Op op, Callback<typename Op::Result> done) {
  pool_.Post([this, op = std::move(op), done = std::move(done)] { done(RunNow(op)); });
}

void LocalAllocator::Submit(AnyCall call) {
  std::visit([this](auto& c) { Post(std::move(c.op), std::move(c.done)); }, call);
}

// For the callers of RunNow() outside this file; Submit() instantiates it for every operation.
template Result<Segment> LocalAllocator::RunNow(const op::Allocate&);
template Result<state::TagRecord> LocalAllocator::RunNow(const op::PutTag&);
template Result<state::SpaceRecord> LocalAllocator::RunNow(const op::GetSpace&);
template Result<state::SpaceRecord> LocalAllocator::RunNow(const op::PutSpace&);
template Result<state::SpaceRecord> LocalAllocator::RunNow(const op::DeleteSpace&);
template Result<std::vector<state::SpaceRecord>> LocalAllocator::RunNow(const op::ListSpaces&);
template Result<std::vector<uint64_t>> LocalAllocator::RunNow(const op::NextSeq&);
template Result<uint64_t> LocalAllocator::RunNow(const op::CurrentSeq&);
template Result<uint64_t> LocalAllocator::RunNow(const op::RaiseSection&);

size_t LocalAllocator::SequenceMemoryBytes() {
  MutexLock lock(mu_);
  return counters_.MemoryBytes();
}

size_t LocalAllocator::SequenceTrackedKeys() {
  MutexLock lock(mu_);
  return counters_.TrackedKeys();
}

}  // namespace kleaf::allocator
