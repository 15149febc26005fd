// The clock offset to the allocator that lease replies let a node report
// (kleaf_worker_clock_offset_seconds). That lease replies carry the allocator's clock is
// tested in tests/unit/allocator/operations_test.cc.
#include <gtest/gtest.h>

#include "base/clock.h"
#include "snowflake/worker_lease.h"

namespace kleaf::snowflake {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

// Answers claims and renewals inline with the allocator's clock `skew_ms` ahead of the node's.
class SkewedRegistry final : public allocator::WorkerRegistry {
 public:
  SkewedRegistry(Clock& clock, int64_t skew_ms) : clock_(clock), skew_ms_(skew_ms) {}
  void ClaimWorker(allocator::WorkerClaim,
                   allocator::Callback<allocator::WorkerLeaseInfo> done) override {
    done(Lease());
  }
  void RenewWorker(allocator::WorkerReport,
                   allocator::Callback<allocator::WorkerLeaseInfo> done) override {
    done(Lease());
  }
  void ReleaseWorker(allocator::WorkerReport,
                     allocator::Callback<allocator::WorkerLeaseInfo> done) override {
    done(Lease());
  }
  void WorkerStatus(allocator::Callback<allocator::WorkerCounts> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  bool send_clock_ = true;

 private:
  allocator::WorkerLeaseInfo Lease() const {
    const int64_t allocator_now = clock_.NowMs() + skew_ms_;
    return {.worker_id = 4,
            .lease_until_ms = allocator_now + 30000,
            .not_before_ms = 0,
            .allocator_now_ms = send_clock_ ? allocator_now : 0};
  }
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
