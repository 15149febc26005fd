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

 private:
  state::Store& store_;
};

Rules RulesOf(const LocalAllocatorOptions& o) {
  return Rules{o.max_step, o.default_step, o.auto_create, o.workers, o.default_id_mode};
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
  Outcome<Op> outcome = Execute(op, reader, rules_, clock_.NowMs());
  if (!outcome.effects.empty()) {
    if (auto put = store_.Write({outcome.effects.writes, outcome.effects.worker_writes, {}},
                                /*sync=*/true);
        !put) {
      return std::unexpected(put.error());
    }
  }
  return std::move(outcome.result);
}

template Result<Segment> LocalAllocator::Run(const op::Allocate&);
template Result<state::TagRecord> LocalAllocator::Run(const op::PutTag&);

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

}  // namespace kleaf::allocator
