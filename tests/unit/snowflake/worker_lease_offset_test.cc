// The clock offset to the allocator that lease replies let a node report
// (kleaf_worker_clock_offset_seconds), and what a lease does when its local cache cannot be
// written. That lease replies carry the allocator's clock is tested in
// tests/unit/allocator/operations_test.cc.
#include <gtest/gtest.h>

#include <vector>

#include "base/clock.h"
#include "snowflake/snowflake.h"
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
    ++releases_;
    done(Lease());
  }
  void WorkerStatus(allocator::Callback<allocator::WorkerCounts> done) override {
    done(Fail(Code::kInternal, "unused"));
  }
  bool send_clock_ = true;
  int releases_ = 0;

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
      registry, clock, {"n1"}, [] { return std::nullopt; },
      [](const auto&) -> Result<void> { return {}; });
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
      registry, clock, {"n1"}, [] { return std::nullopt; },
      [](const auto&) -> Result<void> { return {}; });
  ASSERT_TRUE(lease.Acquire().has_value());
  EXPECT_FALSE(lease.status().clock_offset_ms.has_value());
}

// Stop forgets the lease in the local cache before releasing it. When the cache cannot forget it
// (the store's write failed), a restart while Kafka is unreachable could reuse that cached lease:
// the id is then kept until the lease expires instead of being released to another node.
void StopWithCacheWrites(bool writes_fail, int expected_releases) {
  ManualClock clock(kNow);
  SkewedRegistry registry(clock, 0);
  bool fail = false;
  std::vector<int64_t> saved_until;
  WorkerLease lease(
      registry, clock, {"n1"}, [] { return std::nullopt; },
      [&](const WorkerLease::Cached& cached) -> Result<void> {
        if (fail) return Fail(Code::kUnavailable, "injected store failure");
        saved_until.push_back(cached.lease_until_ms);
        return {};
      });
  ASSERT_TRUE(lease.Acquire().has_value());
  auto layout = SnowflakeLayout::Make(41, 10, 12, 0, 1, kNow);
  ASSERT_TRUE(layout.has_value());
  SnowflakeGenerator generator(*layout, {.worker_id = 4}, clock);
  lease.Start(generator);
  fail = writes_fail;
  lease.Stop();
  EXPECT_EQ(registry.releases_, expected_releases);
  ASSERT_FALSE(saved_until.empty());
  EXPECT_EQ(saved_until.back() == 0, !writes_fail) << "the cache forgets the lease on a release";
}

TEST(WorkerLeaseCacheTest, StopForgetsTheCachedLeaseThenReleases) {
  StopWithCacheWrites(/*writes_fail=*/false, /*expected_releases=*/1);
}

TEST(WorkerLeaseCacheTest, StopKeepsTheIdWhenTheCacheCannotForgetIt) {
  StopWithCacheWrites(/*writes_fail=*/true, /*expected_releases=*/0);
}

}  // namespace
}  // namespace kleaf::snowflake
