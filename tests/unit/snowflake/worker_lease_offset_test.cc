// The clock offset to the allocator that lease replies let a node report
// (kleaf_worker_clock_offset_seconds).
#include <gtest/gtest.h>

#include "allocator/service.h"
#include "base/clock.h"
#include "snowflake/worker_lease.h"

namespace kleaf::snowflake {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

TEST(LeaseReplyTest, ClaimAndRenewRepliesCarryTheAllocatorsClock) {
  struct NoState final : allocator::StateReader {
    Result<std::optional<state::TagRecord>> Get(const std::string&) override {
      return std::nullopt;
    }
    Result<std::vector<state::TagRecord>> List() override {
      return std::vector<state::TagRecord>{};
    }
    Result<std::vector<state::WorkerRecord>> ListWorkers() override { return workers; }
    std::vector<state::WorkerRecord> workers;
  } reader;
  allocator::Rules rules;
  auto claim = allocator::Execute(
      allocator::MakeWorkerRequest(allocator::Request::Op::kClaimWorker, allocator::Claimant{"n1"}, -1, kNow), reader,
      rules, kNow + 40);
  ASSERT_TRUE(claim.reply.lease.has_value());
  EXPECT_EQ(claim.reply.lease->allocator_now_ms, kNow + 40);
  reader.workers = claim.worker_writes;
  auto renew = allocator::Execute(
      allocator::MakeWorkerRequest(allocator::Request::Op::kRenewWorker, allocator::Claimant{"n1"},
                                   claim.reply.lease->worker_id, kNow + 500, kNow + 400),
      reader, rules, kNow + 1000);
  ASSERT_TRUE(renew.reply.lease.has_value())
      << (renew.reply.error ? renew.reply.error->message : "");
  EXPECT_EQ(renew.reply.lease->allocator_now_ms, kNow + 1000);

  auto decoded = allocator::DecodeReply(allocator::EncodeReply(claim.reply));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->lease->allocator_now_ms, kNow + 40);
  // A reply from an allocator that does not send its clock yet.
  auto old = allocator::DecodeReply(R"({"lease":{"worker_id":3,"lease_until":1,"not_before":0}})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->lease->allocator_now_ms, 0);
}

// Answers claims and renewals inline with the allocator's clock `skew_ms` ahead of the node's.
class SkewedRegistry final : public allocator::Allocator {
 public:
  SkewedRegistry(Clock& clock, int64_t skew_ms) : clock_(clock), skew_ms_(skew_ms) {}
  void Registry(allocator::Request request, allocator::Callback<allocator::Reply> done) override {
    allocator::Reply reply;
    const int64_t allocator_now = clock_.NowMs() + skew_ms_;
    reply.lease =
        allocator::WorkerLeaseInfo{4, allocator_now + 30000, 0, send_clock_ ? allocator_now : 0};
    (void)request;
    done(std::move(reply));
  }
  void AllocateSegment(std::string, int64_t,
                       allocator::Callback<allocator::Segment> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  void ListTags(allocator::Callback<std::vector<state::TagRecord>> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  void GetTag(std::string, allocator::Callback<state::TagRecord> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  void PutTag(std::string, allocator::TagUpdate,
              allocator::Callback<state::TagRecord> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  void DeleteTag(std::string, allocator::Callback<state::TagRecord> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  bool send_clock_ = true;

 private:
  Clock& clock_;
  int64_t skew_ms_;
};

TEST(WorkerLeaseOffsetTest, StatusReportsTheAllocatorsClockMinusOurs) {
  ManualClock clock(kNow);
  SkewedRegistry registry(clock, -250);
  WorkerLease lease(
      registry, clock, {"n1"}, [] { return std::nullopt; }, [](const auto&) {});
  EXPECT_FALSE(lease.status().clock_offset_ms.has_value());
  ASSERT_TRUE(lease.Acquire().has_value());
  auto s = lease.status();
  ASSERT_TRUE(s.clock_offset_ms.has_value());
  EXPECT_EQ(*s.clock_offset_ms, -250);
  EXPECT_EQ(s.worker_id, 4);
}

TEST(WorkerLeaseOffsetTest, NoOffsetFromRepliesWithoutTheAllocatorsClock) {
  ManualClock clock(kNow);
  SkewedRegistry registry(clock, 100);
  registry.send_clock_ = false;
  WorkerLease lease(
      registry, clock, {"n1"}, [] { return std::nullopt; }, [](const auto&) {});
  ASSERT_TRUE(lease.Acquire().has_value());
  EXPECT_FALSE(lease.status().clock_offset_ms.has_value());
}

}  // namespace
}  // namespace kleaf::snowflake
