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

template <typename T>
[[nodiscard]] Result<T> Pick(Reply reply, std::optional<T> Reply::*field) {
  if (reply.error) return std::unexpected(std::move(*reply.error));
  if (!(reply.*field)) return Fail(Code::kInternal, "allocator reply without a result");
  return std::move(*(reply.*field));
}

}  // namespace

LocalAllocator::LocalAllocator(state::Store& store, Clock& clock, LocalAllocatorOptions options)
    : store_(store), clock_(clock), options_(options), pool_(options.threads, "kleaf-alloc") {}

LocalAllocator::~LocalAllocator() { pool_.Stop(); }

Reply LocalAllocator::ExecuteNow(const Request& request) {
  std::lock_guard lock(mu_);
  StoreReader reader(store_);
  Outcome outcome = Execute(request, reader,
                            {options_.max_step, options_.default_step, options_.auto_create,
                             options_.workers, options_.default_id_mode},
                            clock_.NowMs());
  if (!outcome.writes.empty() || !outcome.worker_writes.empty()) {
    if (auto put = store_.Write({outcome.writes, outcome.worker_writes, {}}, /*sync=*/true); !put) {
      Reply failed;
      failed.error = put.error();
      return failed;
    }
  }
  return std::move(outcome.reply);
}

Result<Segment> LocalAllocator::AllocateSegmentNow(const std::string& tag, int64_t step) {
  return Pick(ExecuteNow(MakeRequest(Request::Op::kAllocate, tag, step)), &Reply::segment);
}

Result<state::TagRecord> LocalAllocator::PutTagNow(const std::string& tag, const TagUpdate& update) {
  return Pick(ExecuteNow(MakeRequest(Request::Op::kPutTag, tag, 0, update)), &Reply::tag);
}

void LocalAllocator::AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) {
  pool_.Post([this, tag = std::move(tag), step, done = std::move(done)] {
    done(AllocateSegmentNow(tag, step));
  });
}

void LocalAllocator::ListTags(Callback<std::vector<state::TagRecord>> done) {
  pool_.Post([this, done = std::move(done)] {
    Reply reply = ExecuteNow(MakeRequest(Request::Op::kListTags));
    if (reply.error) return done(std::unexpected(std::move(*reply.error)));
    done(std::move(reply.tags));
  });
}

void LocalAllocator::GetTag(std::string tag, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), done = std::move(done)] {
    done(Pick(ExecuteNow(MakeRequest(Request::Op::kGetTag, tag)), &Reply::tag));
  });
}

void LocalAllocator::PutTag(std::string tag, TagUpdate update, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), update = std::move(update), done = std::move(done)] {
    done(PutTagNow(tag, update));
  });
}

void LocalAllocator::DeleteTag(std::string tag, Callback<state::TagRecord> done) {
  pool_.Post([this, tag = std::move(tag), done = std::move(done)] {
    done(Pick(ExecuteNow(MakeRequest(Request::Op::kDeleteTag, tag)), &Reply::tag));
  });
}

void LocalAllocator::ClaimWorker(WorkerClaim claim, Callback<WorkerLeaseInfo> done) {
  pool_.Post([this, claim = std::move(claim), done = std::move(done)] {
    done(Pick(ExecuteNow(ClaimRequest(claim)), &Reply::lease));
  });
}

void LocalAllocator::RenewWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  pool_.Post([this, report = std::move(report), done = std::move(done)] {
    done(Pick(ExecuteNow(ReportRequest(Request::Op::kRenewWorker, report)), &Reply::lease));
  });
}

void LocalAllocator::ReleaseWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  pool_.Post([this, report = std::move(report), done = std::move(done)] {
    done(Pick(ExecuteNow(ReportRequest(Request::Op::kReleaseWorker, report)), &Reply::lease));
  });
}

void LocalAllocator::WorkerStatus(Callback<WorkerCounts> done) {
  pool_.Post([this, done = std::move(done)] {
    done(Pick(ExecuteNow(MakeWorkerRequest(Request::Op::kWorkerStatus, Claimant{})),
              &Reply::workers));
  });
}

}  // namespace kleaf::allocator
