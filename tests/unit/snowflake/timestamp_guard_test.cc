#include "snowflake/timestamp_guard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "snowflake/snowflake.h"

namespace kleaf::snowflake {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kReserveMs = 3000;
constexpr int64_t kMaxStartupWaitMs = 5000;

// The durable high-water mark, in memory. Thread-safe (the guard's thread may save).
class MarkStore {
 public:
  TimestampGuard::Load Load() {
    return [this]() -> Result<std::optional<int64_t>> {
      std::lock_guard lock(mu_);
      ++loads_;
      if (fail_load_) return Fail(Code::kInternal, "disk on fire");
      return mark_;
    };
  }
  TimestampGuard::Save Save() {
    return [this](int64_t ms) -> Result<void> {
      std::lock_guard lock(mu_);
      if (fail_save_) return Fail(Code::kInternal, "disk full");
      mark_ = ms;
      saves_.push_back(ms);
      return {};
    };
  }
  std::optional<int64_t> mark() {
    std::lock_guard lock(mu_);
    return mark_;
  }
  void set_mark(std::optional<int64_t> ms) {
    std::lock_guard lock(mu_);
    mark_ = ms;
  }
  std::vector<int64_t> saves() {
    std::lock_guard lock(mu_);
    return saves_;
  }
  void set_fail_load(bool f) {
    std::lock_guard lock(mu_);
    fail_load_ = f;
  }
  void set_fail_save(bool f) {
    std::lock_guard lock(mu_);
    fail_save_ = f;
  }

 private:
  std::mutex mu_;
  std::optional<int64_t> mark_;
  std::vector<int64_t> saves_;
  int loads_ = 0;
  bool fail_load_ = false;
  bool fail_save_ = false;
};

TimestampGuard::Options GuardOptions() {
  TimestampGuard::Options o;
  // The guard's own thread renews on a real-time timer; ten minutes means never during a test,
  // so every renewal below is one the test makes.
  o.persist_interval_ms = 600'000;
  o.reserve_ms = kReserveMs;
  o.max_startup_wait_ms = kMaxStartupWaitMs;
  return o;
}

SnowflakeGenerator::Options GenOptions() {
  SnowflakeGenerator::Options o;
  o.worker_id = 42;
  o.random_sequence_start = false;
  o.max_backward_ms = 5;
  return o;
}

int64_t TimestampOf(int64_t id) {
  auto p = SnowflakeLayout::Default().Decode(id);
  EXPECT_TRUE(p);
  return p ? p->timestamp_ms : -1;
}

// One run of a node: a generator and its guard over the shared MarkStore and clock.
struct NodeRun {
  NodeRun(ManualClock& clock, MarkStore& store)
      : generator(SnowflakeLayout::Default(), GenOptions(), clock),
        guard(generator, clock, store.Load(), store.Save(), GuardOptions()) {}
  SnowflakeGenerator generator;
  TimestampGuard guard;
};

TEST(TimestampGuardTest, FirstStartReservesNowPlusReserve) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  EXPECT_EQ(store.saves(), std::vector<int64_t>{kNow + kReserveMs});
  EXPECT_EQ(clock.sleeps(), 0);
  auto id = run.generator.Next();
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_EQ(TimestampOf(*id), kNow);
}

TEST(TimestampGuardTest, GeneratorRefusesTimestampsBeyondTheReservation) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  clock.SetWallMs(kNow + kReserveMs);
  auto last_ok = run.generator.Next();
  ASSERT_TRUE(last_ok) << last_ok.error().message;
  EXPECT_EQ(TimestampOf(*last_ok), kNow + kReserveMs);

  // No renewal while the clock moves on: nothing beyond the durable mark may be issued.
  clock.SetWallMs(kNow + kReserveMs + 1);
  auto refused = run.generator.Next();
  ASSERT_FALSE(refused) << "issued an ID at " << TimestampOf(*refused)
                        << " beyond the durable mark " << kNow + kReserveMs;
  EXPECT_EQ(refused.error().code, Code::kUnavailable);

  ASSERT_TRUE(run.guard.Renew());
  EXPECT_EQ(store.mark(), kNow + kReserveMs + 1 + kReserveMs);
  auto after = run.generator.Next();
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_GT(*after, *last_ok);
}

TEST(TimestampGuardTest, RenewNeverLowersTheMark) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  clock.SetWallMs(kNow - 60'000);  // the clock is set back a minute
  ASSERT_TRUE(run.guard.Renew());
  EXPECT_EQ(store.mark(), kNow + kReserveMs);
}

TEST(TimestampGuardTest, FailedRenewalKeepsTheOldLimit) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  store.set_fail_save(true);
  clock.SetWallMs(kNow + kReserveMs + 1);
  auto renewed = run.guard.Renew();
  ASSERT_FALSE(renewed);
  EXPECT_EQ(renewed.error().code, Code::kInternal);
  EXPECT_FALSE(run.generator.Next());
  EXPECT_EQ(store.mark(), kNow + kReserveMs);
}

TEST(TimestampGuardTest, RestartWithTheClockFarBehindTheMarkFails) {
  ManualClock clock(kNow);
  MarkStore store;
  store.set_mark(kNow + kMaxStartupWaitMs + 1);
  NodeRun run(clock, store);
  auto started = run.guard.Start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code, Code::kFailedPrecondition);
  EXPECT_NE(started.error().message.find("clock"), std::string::npos) << started.error().message;
  EXPECT_TRUE(store.saves().empty());
  EXPECT_EQ(clock.sleeps(), 0) << "must refuse at once, not wait";
  EXPECT_EQ(store.mark(), kNow + kMaxStartupWaitMs + 1);
}

TEST(TimestampGuardTest, RestartWithTheClockSlightlyBehindWaitsAndIssuesAboveTheMark) {
  for (int64_t behind : {int64_t{0}, int64_t{1}, int64_t{2000}, kMaxStartupWaitMs}) {
    SCOPED_TRACE(behind);
    ManualClock clock(kNow);
    MarkStore store;
    const int64_t mark = kNow + behind;
    store.set_mark(mark);
    NodeRun run(clock, store);
    ASSERT_TRUE(run.guard.Start());
    EXPECT_GE(clock.sleeps(), 1);
    EXPECT_GT(clock.NowMs(), mark);
    auto id = run.generator.Next();
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_GT(TimestampOf(*id), mark);
    ASSERT_FALSE(store.saves().empty());
    EXPECT_GE(store.saves().back(), clock.NowMs() + kReserveMs);
  }
}

TEST(TimestampGuardTest, RestartWithTheClockAheadOfTheMarkStartsAtOnce) {
  ManualClock clock(kNow);
  MarkStore store;
  store.set_mark(kNow - 10);
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  EXPECT_EQ(clock.sleeps(), 0);
  auto id = run.generator.Next();
  ASSERT_TRUE(id);
  EXPECT_GT(TimestampOf(*id), kNow - 10);
}

// Start passes the mark to the generator as a floor: a clock that steps back after Start must not
// lead to timestamps at or below what the previous run may have issued.
TEST(TimestampGuardTest, ClockSteppingBackAfterStartNeverIssuesAtOrBelowTheMark) {
  ManualClock clock(kNow + 1);
  MarkStore store;
  store.set_mark(kNow);
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  EXPECT_EQ(clock.sleeps(), 0);

  clock.SetWallMs(kNow - 2);  // back by less than max_backward_ms: waited out
  auto id = run.generator.Next();
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_GT(TimestampOf(*id), kNow);

  clock.SetWallMs(kNow - 1000);  // back by more: refused, never below the mark
  auto refused = run.generator.Next();
  ASSERT_FALSE(refused) << "issued at " << TimestampOf(*refused) << " below the mark " << kNow;
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
}

TEST(TimestampGuardTest, LoadFailureStopsStart) {
  ManualClock clock(kNow);
  MarkStore store;
  store.set_fail_load(true);
  NodeRun run(clock, store);
  auto started = run.guard.Start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code, Code::kInternal);
  run.guard.Stop();  // harmless after a failed start
  EXPECT_TRUE(store.saves().empty());
}

TEST(TimestampGuardTest, SaveFailureStopsStart) {
  ManualClock clock(kNow);
  MarkStore store;
  store.set_fail_save(true);
  NodeRun run(clock, store);
  ASSERT_FALSE(run.guard.Start());
}

TEST(TimestampGuardTest, StopRecordsTheLastIssuedTimestamp) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  clock.Advance(std::chrono::milliseconds(10));
  auto id = run.generator.Next();
  ASSERT_TRUE(id);
  clock.Advance(std::chrono::milliseconds(500));  // time passes with nothing issued
  run.guard.Stop();
  EXPECT_EQ(store.mark(), kNow + 10);
  // Issuing has ended with the guard.
  auto after = run.generator.Next();
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, Code::kUnavailable);
  run.guard.Stop();  // idempotent
  EXPECT_EQ(store.mark(), kNow + 10);
}

TEST(TimestampGuardTest, StopWithNothingIssuedKeepsAMarkAtOrBelowTheReservation) {
  ManualClock clock(kNow);
  MarkStore store;
  NodeRun run(clock, store);
  ASSERT_TRUE(run.guard.Start());
  run.guard.Stop();
  ASSERT_TRUE(store.mark());
  EXPECT_LE(*store.mark(), kNow + kReserveMs);
  EXPECT_GE(*store.mark(), kNow);
}

TEST(TimestampGuardTest, CleanRestartIssuesAboveTheFirstRun) {
  ManualClock clock(kNow);
  MarkStore store;
  std::vector<int64_t> first;
  {
    NodeRun run(clock, store);
    ASSERT_TRUE(run.guard.Start());
    ASSERT_TRUE(run.generator.NextBatch(10'000, first));  // spans three ticks
    run.guard.Stop();
  }
  EXPECT_EQ(store.mark(), TimestampOf(first.back()));
  NodeRun again(clock, store);
  ASSERT_TRUE(again.guard.Start());
  EXPECT_LE(clock.NowMs() - TimestampOf(first.back()), 1) << "a clean restart needs no long wait";
  auto id = again.generator.Next();
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_GT(*id, first.back());
}

// kill -9: the process dies without Stop, so the durable mark is still the reservation. The next
// run must not issue any timestamp the dead run may have used.
TEST(TimestampGuardTest, RestartAfterACrashIssuesAboveEverythingTheDeadRunIssued) {
  ManualClock clock(kNow);
  MarkStore store;
  std::vector<int64_t> issued;
  std::optional<int64_t> mark_at_crash;
  {
    NodeRun run(clock, store);
    ASSERT_TRUE(run.guard.Start());
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(run.generator.NextBatch(100, issued));
      clock.Advance(std::chrono::milliseconds(700));
      ASSERT_TRUE(run.guard.Renew());  // what the guard's thread does every persist interval
    }
    ASSERT_TRUE(run.generator.NextBatch(100, issued));
    mark_at_crash = store.mark();
    // The object's destructor runs a graceful Stop; a crash would not, so restore the disk.
  }
  store.set_mark(mark_at_crash);
  ASSERT_TRUE(mark_at_crash);
  EXPECT_GT(*mark_at_crash, TimestampOf(issued.back()));

  clock.Advance(std::chrono::milliseconds(1));  // the restart is quick
  NodeRun again(clock, store);
  ASSERT_TRUE(again.guard.Start());
  EXPECT_GT(clock.NowMs(), *mark_at_crash);
  std::vector<int64_t> after;
  ASSERT_TRUE(again.generator.NextBatch(5000, after));
  EXPECT_GT(after.front(), issued.back());
  EXPECT_GT(TimestampOf(after.front()), *mark_at_crash);
}

TEST(TimestampGuardTest, RestartAfterACrashWithTheClockSetBackRefuses) {
  ManualClock clock(kNow);
  MarkStore store;
  std::optional<int64_t> mark_at_crash;
  {
    NodeRun run(clock, store);
    ASSERT_TRUE(run.guard.Start());
    ASSERT_TRUE(run.generator.Next());
    mark_at_crash = store.mark();
  }
  store.set_mark(mark_at_crash);
  clock.SetWallMs(kNow - 3'600'000);  // NTP stepped the clock back an hour meanwhile
  NodeRun again(clock, store);
  auto started = again.guard.Start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("clock"), std::string::npos);
}

TEST(TimestampGuardTest, DestroyingAnUnstartedGuardIsHarmless) {
  ManualClock clock(kNow);
  MarkStore store;
  { NodeRun run(clock, store); }
  EXPECT_TRUE(store.saves().empty());
  EXPECT_FALSE(store.mark());
}

}  // namespace
}  // namespace kleaf::snowflake
