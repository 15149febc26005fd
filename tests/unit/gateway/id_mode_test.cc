// A tag's id_mode seen from a gateway: segments carry their tag's format, so a switch from plain
// to obfuscated on a live tag never hands out one ID twice.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <unordered_set>
#include <vector>

#include "allocator/local_allocator.h"
#include "base/clock.h"
#include "gateway/segment_cache.h"
#include "state/store.h"
#include "tests/unit/testing/temp_dir.h"

namespace kleaf::gateway {
namespace {

constexpr int64_t kNow = 1772366400000;  // 2026-03-01T12:00:00Z

class IdModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = state::Store::Open(dir_.Sub("state"));
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
    allocator_ = std::make_unique<allocator::LocalAllocator>(*store_, clock_,
                                                             allocator::LocalAllocatorOptions{});
    cache_ = std::make_unique<SegmentCache>(*allocator_, clock_, SegmentBuffer::Options{});
  }

  void Put(std::optional<int64_t> step, std::optional<state::IdMode> mode) {
    allocator::TagUpdate u;
    u.step = step;
    u.id_mode = mode;
    auto r = allocator_->PutTagNow("order", u);
    ASSERT_TRUE(r) << r.error().message;
  }

  // Draws `n` IDs of "order" as the Api does: ranges, then their IDs.
  std::vector<int64_t> Draw(int64_t n) {
    auto buffer = cache_->Get("order");
    auto ranges = buffer->Take(n, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    EXPECT_TRUE(ranges) << ranges.error().message;
    std::vector<int64_t> ids;
    if (!ranges) return ids;
    auto r = buffer->AppendIds(*ranges, ids);
    EXPECT_TRUE(r) << r.error().message;
    return ids;
  }

  testing::TempDir dir_;
  ManualClock clock_{kNow};
  std::unique_ptr<state::Store> store_;
  std::unique_ptr<allocator::LocalAllocator> allocator_;
  std::unique_ptr<SegmentCache> cache_;
};

TEST_F(IdModeTest, SwitchingALiveTagToObfuscatedNeverRepeatsAnId) {
  Put(100, std::nullopt);
  std::vector<int64_t> plain = Draw(150);  // the buffer now holds a plain segment's rest
  Put(std::nullopt, state::IdMode::kObfuscated);
  auto record = store_->GetTag("order");
  ASSERT_TRUE(record && record->has_value());
  const int64_t base = (*record)->id_base;
  std::vector<int64_t> after;
  for (int i = 0; i < 50; ++i) {
    auto ids = Draw(97);
    after.insert(after.end(), ids.begin(), ids.end());
  }
  std::unordered_set<int64_t> seen;
  int permuted = 0;
  for (int64_t id : plain) {
    EXPECT_LT(id, base);
    EXPECT_TRUE(seen.insert(id).second) << id;
  }
  for (int64_t id : after) {
    EXPECT_GT(id, 0);
    EXPECT_TRUE(seen.insert(id).second) << id << " twice";
    if (id > base) {
      ++permuted;
    } else {
      EXPECT_LT(id, base);  // the rest of a segment reserved while the tag was plain
    }
  }
  // Every ID below the base was reserved while the tag was plain; those not drawn before the
  // switch (the buffered rests: how many depends on the preloads' timing) may still come out,
  // nothing more. The rest of what was drawn after the switch is permuted.
  const auto plain_left = static_cast<int64_t>(base - 1 - static_cast<int64_t>(plain.size()));
  EXPECT_GE(permuted, static_cast<int64_t>(after.size()) - plain_left);
  EXPECT_GT(permuted, 0);
  // A graceful stop keeps only plain rests: an obfuscated segment's rest is a gap.
  for (const auto& [tag, ranges] : cache_->Drain()) {
    for (const auto& r : ranges) EXPECT_EQ(r.format, nullptr);
  }
}

// The first obfuscated segment a buffer receives replaces a plain rest at once, rather than
// waiting behind it: after a switch, plain IDs come out only until the next fetch completes.
TEST_F(IdModeTest, AnObfuscatedSegmentReplacesThePlainRestAtOnce) {
  Put(100, std::nullopt);
  ASSERT_EQ(Draw(5).size(), 5U);  // plain [1, 101) active; its preload (at 10 %) not started
  Put(std::nullopt, state::IdMode::kObfuscated);
  auto record = store_->GetTag("order");
  ASSERT_TRUE(record && record->has_value());
  const int64_t base = (*record)->id_base;
  for (int64_t id : Draw(6)) EXPECT_LT(id, base);  // passes the preload point: a fetch starts
  // The fetch runs on the allocator's thread; wait (bounded) until its segment has arrived.
  auto buffer = cache_->Get("order");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const SegmentBuffer::Snapshot s = buffer->snapshot();
    if (!s.fetching && s.active && s.active->start > 1) break;  // the next segment is installed
    if (!s.fetching && s.standby) break;                        // ... or waits behind the rest
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the preload fetch never completed";
    std::this_thread::yield();
  }
  // 89 plain counters were left; the obfuscated segment replaced them: only permuted IDs now.
  for (int64_t id : Draw(40)) EXPECT_GT(id, base) << "a plain ID after the obfuscated segment came";
}

TEST_F(IdModeTest, ChangingAnObfuscatedTagsModeIsRefused) {
  Put(100, state::IdMode::kObfuscatedTime);
  auto ids = Draw(10);
  for (int64_t id : ids)
    EXPECT_EQ(id >> allocator::kTimeCounterBits, (kNow - allocator::kTimePrefixEpochMs) / 3600000);
  allocator::TagUpdate u;
  u.id_mode = state::IdMode::kObfuscated;
  auto r = allocator_->PutTagNow("order", u);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
}

}  // namespace
}  // namespace kleaf::gateway
