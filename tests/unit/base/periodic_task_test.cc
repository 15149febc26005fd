#include "base/periodic_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace kleaf {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kHour{3'600'000};
// How long a test waits for something that should happen at once; only reached on failure.
constexpr auto kPatience = std::chrono::seconds(10);

TEST(PeriodicTaskTest, RunsAgainAfterEachInterval) {
  std::atomic<int> runs{0};
  std::promise<void> third;
  PeriodicTask task;
  task.Start(milliseconds(1), PeriodicTask::FirstRun::kAfterInterval, [&] {
    if (++runs == 3) third.set_value();
  });
  ASSERT_EQ(third.get_future().wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(task.Stop());
  EXPECT_GE(runs.load(), 3);
}

TEST(PeriodicTaskTest, FirstRunAtOnceDoesNotWaitForTheInterval) {
  std::promise<void> ran;
  PeriodicTask task;
  task.Start(kHour, PeriodicTask::FirstRun::kAtOnce, [&] { ran.set_value(); });
  ASSERT_EQ(ran.get_future().wait_for(kPatience), std::future_status::ready);
  task.Stop();
}

TEST(PeriodicTaskTest, StopWakesAWaitingThreadAtOnce) {
  std::atomic<int> runs{0};
  PeriodicTask task;
  task.Start(kHour, PeriodicTask::FirstRun::kAfterInterval, [&] { ++runs; });
  const auto start = steady_clock::now();
  EXPECT_TRUE(task.Stop());
  EXPECT_LT(steady_clock::now() - start, kPatience);
  EXPECT_EQ(runs.load(), 0);
}

TEST(PeriodicTaskTest, StopLetsTheRunInProgressFinishAndNoneStartsAfter) {
  std::atomic<int> runs{0};
  std::atomic<bool> finished{false};
  std::atomic<bool> stop_returned{false};
  std::atomic<bool> ran_after_stop{false};
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  PeriodicTask task;
  task.Start(milliseconds(0), PeriodicTask::FirstRun::kAtOnce, [&] {
    if (stop_returned.load()) ran_after_stop = true;
    if (++runs == 1) {
      entered.set_value();
      released.wait();
      finished = true;
    }
  });
  ASSERT_EQ(entered.get_future().wait_for(kPatience), std::future_status::ready);
  auto stopped = std::async(std::launch::async, [&] { return task.Stop(); });
  // Stop must wait for the run it interrupted.
  EXPECT_EQ(stopped.wait_for(milliseconds(50)), std::future_status::timeout);
  release.set_value();
  ASSERT_EQ(stopped.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(stopped.get());
  stop_returned = true;
  EXPECT_TRUE(finished.load());
  const int at_stop = runs.load();
  EXPECT_FALSE(task.Stop());  // stopped already
  EXPECT_EQ(runs.load(), at_stop);
  EXPECT_FALSE(ran_after_stop.load());
}

TEST(PeriodicTaskTest, StopRepeatingFromTheTaskEndsTheLoop) {
  std::atomic<int> runs{0};
  std::promise<void> last;
  PeriodicTask task;
  task.Start(milliseconds(0), PeriodicTask::FirstRun::kAtOnce, [&] {
    if (++runs == 2) {
      task.StopRepeating();
      last.set_value();
    }
  });
  ASSERT_EQ(last.get_future().wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(task.Stop());  // still joins the thread that ended by itself
  EXPECT_EQ(runs.load(), 2);
}

// A run that asks for it is followed at once by the next, not an hour later; the one after that
// waits for the interval again.
TEST(PeriodicTaskTest, RunAgainNowSkipsTheWaitOnce) {
  std::atomic<int> runs{0};
  std::promise<void> third;
  PeriodicTask task;
  task.Start(kHour, PeriodicTask::FirstRun::kAtOnce, [&] {
    const int n = ++runs;
    if (n < 3) task.RunAgainNow();
    if (n == 3) third.set_value();
  });
  ASSERT_EQ(third.get_future().wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(task.Stop());  // wakes the hour's wait at once
  EXPECT_EQ(runs.load(), 3);
}

TEST(PeriodicTaskTest, StopWithoutStartDoesNothingAndStartWorksAfterStop) {
  PeriodicTask task;
  EXPECT_FALSE(task.Stop());
  for (int i = 0; i < 2; ++i) {
    std::promise<void> ran;
    task.Start(kHour, PeriodicTask::FirstRun::kAtOnce, [&] { ran.set_value(); });
    ASSERT_EQ(ran.get_future().wait_for(kPatience), std::future_status::ready);
    EXPECT_TRUE(task.Stop());
  }
}

TEST(PeriodicTaskTest, DestructorStops) {
  std::atomic<int> runs{0};
  {
    PeriodicTask task;
    task.Start(kHour, PeriodicTask::FirstRun::kAfterInterval, [&] { ++runs; });
  }
  EXPECT_EQ(runs.load(), 0);
}

}  // namespace
}  // namespace kleaf
