// Await / PendingCall: blocking on a callback API with a deadline, and answers that come late.
#include "base/await.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace kleaf {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(AwaitTest, AnAnswerFromTheCallItselfIsReturned) {
  auto r = Await<int>(seconds(10), "no answer", [](auto done) { done(7); });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 7);
}

TEST(AwaitTest, AnAnswerFromAnotherThreadIsReturned) {
  std::thread answerer;
  auto r = Await<int>(seconds(10), "no answer", [&](auto done) {
    answerer = std::thread([done] { done(Fail(Code::kNotFound, "unknown tag")); });
  });
  answerer.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
  EXPECT_EQ(r.error().message, "unknown tag");
}

TEST(AwaitTest, NoAnswerByTheDeadlineIsUnavailable) {
  std::function<void(Result<int>)> never_called;
  const auto started = std::chrono::steady_clock::now();
  auto r = Await<int>(milliseconds(50), "no segment of t within 50 ms",
                      [&](auto done) { never_called = done; });
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(50));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  EXPECT_EQ(r.error().message, "no segment of t within 50 ms");
}

// The callback keeps the state alive: answering after the waiter returned touches nothing of the
// waiter's, and the answer is freed with the last copy of the callback.
TEST(AwaitTest, AnAnswerAfterTheDeadlineIsDroppedHarmlessly) {
  std::function<void(Result<std::shared_ptr<int>>)> late;
  auto r =
      Await<std::shared_ptr<int>>(milliseconds(10), "no answer", [&](auto done) { late = done; });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);

  auto answer = std::make_shared<int>(7);
  std::thread([&late, answer] { late(answer); }).join();
  EXPECT_EQ(answer.use_count(), 2) << "the late answer is held by the call's own state";
  late = nullptr;
  EXPECT_EQ(answer.use_count(), 1) << "and freed with it";
}

TEST(AwaitTest, OnlyTheFirstAnswerCounts) {
  auto r = Await<int>(seconds(10), "no answer", [](auto done) {
    done(1);
    done(2);
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 1);
}

TEST(AwaitTest, WithoutADeadlineItWaitsForTheAnswer) {
  std::thread answerer;
  auto r = Await<int>(kNoDeadline, "", [&](auto done) {
    answerer = std::thread([done] {
      std::this_thread::sleep_for(milliseconds(20));  // answers after the wait began
      done(3);
    });
  });
  answerer.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 3);
}

// Many calls started at once and waited for against one deadline (gateway/segment_rests.cc).
TEST(PendingCallTest, CallsStartedTogetherShareOneDeadline) {
  std::vector<PendingCall<int>> calls(3);
  std::vector<std::thread> answerers;
  answerers.emplace_back([done = calls[0].Callback()] { done(10); });
  answerers.emplace_back([done = calls[2].Callback()] { done(12); });
  // calls[1] is never answered.
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(50);
  auto first = calls[0].Wait(deadline, "no answer");
  auto second = calls[1].Wait(deadline, "no answer");
  auto third = calls[2].Wait(deadline, "no answer");
  for (auto& t : answerers) t.join();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 10);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, Code::kUnavailable);
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, 12);
}

TEST(PendingCallTest, WaitForNamesItsTimeout) {
  PendingCall<int> call;
  auto r = call.WaitFor(milliseconds(20));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  EXPECT_EQ(r.error().message, "no answer within 20 ms");
}

}  // namespace
}  // namespace kleaf
