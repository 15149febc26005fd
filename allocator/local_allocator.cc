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

// Runs `op` on `reader`; an operation that needs the counters gets a plan of `counters` (kept in
// `plan`, for the caller to commit once the effects are durable), and the plan's section raises
// are appended to its effects.
template <typename Op>
Outcome<Op> ExecuteOne(const Op& op, StoreReader& reader, const Rules& rules, int64_t now_ms,
                       SequenceCounters& counters, std::optional<SeqPlan>& plan) {
  if constexpr (kNeedsCounters<Op>) {
    auto begun = counters.Begin();
    if (!begun) return Outcome<Op>{std::unexpected(begun.error())};
    plan = std::move(*begun);
    SequenceState seq{counters, *plan};
    Outcome<Op> o = Execute(op, reader, rules, now_ms, seq);
    // I5: the raised maxima are written with the other effects, durable before any value above
    // the old ones leaves.
    if (o.result) o.effects.sections = plan->Raises();
    return o;
  } else {
    return Execute(op, reader, rules, now_ms);
  }
}

}  // namespace

LocalAllocator::LocalAllocator(state::Store& store, Clock& clock, LocalAllocatorOptions options)
    : store_(store),
      clock_(clock),
      rules_(RulesOf(options)),
      pool_(options.threads, "kleaf-alloc") {}

LocalAllocator::~LocalAllocator() { pool_.Stop(); }

template <typename Op>
Result<typename Op::Result> LocalAllocator::RunNow(const Op& op) {
  MutexLock lock(mu_);
  StoreReader reader(store_);
  std::optional<SeqPlan> plan;
  Outcome<Op> outcome = ExecuteOne(op, reader, rules_, clock_.NowMs(), counters_, plan);
  if (!outcome.result) return std::move(outcome.result);  // a plan is dropped: nothing handed out
  if (!outcome.effects.empty()) {
    state::Store::Batch batch;
    batch.Append(std::move(outcome.effects));
    if (auto put = store_.Write(batch, /*sync=*/true); !put) return std::unexpected(put.error());
  }
  // Only once the raises are durable do the counters take the values. A failed write dropped the
  // plan above: nothing was handed out.
  if (plan) {
    if (auto c = counters_.Commit(std::move(*plan)); !c) return std::unexpected(c.error());
  }
  if constexpr (std::is_same_v<Op, op::DeleteSpace>) {
    // Reloading at the persisted maximum is always safe; a deleted space's counters are memory
    // no one needs.
    counters_.Forget(op.space);
  }
  return std::move(outcome.result);
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
