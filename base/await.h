// Blocking on an asynchronous call that answers through a callback (the allocator's interface),
// with a deadline: the one bridge for a thread that needs the answer before it can go on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "base/mutex.h"

namespace kleaf {

using Deadline = std::chrono::steady_clock::time_point;
// For a call whose implementation always answers by its own deadline (no second one here).
inline constexpr Deadline kNoDeadline = Deadline::max();

// The answer of one asynchronous call, waited for by one thread. The callback shares the state
// with the waiter, so an answer arriving after the waiter gave up lands in it harmlessly and is
// dropped with it (a late segment is a gap, never used twice). Only the first answer counts.
template <typename T>
class PendingCall {
 public:
  PendingCall() : state_(std::make_shared<State>()) {}

  // To hand to the asynchronous call; may run on any thread, before or after the wait ended.
  std::function<void(Result<T>)> Callback() const {
    return [state = state_](Result<T> answer) {
      MutexLock lock(state->mu);
      if (state->answer) return;
      state->answer.emplace(std::move(answer));
      state->answered.NotifyAll();
    };
  }

  // The answer, or kUnavailable `timeout_message` when none came by `deadline`. Call it once.
  [[nodiscard]] Result<T> Wait(Deadline deadline, std::string_view timeout_message) {
    MutexLock lock(state_->mu);
    auto answered = [this]() KLEAF_REQUIRES(state_->mu) { return state_->answer.has_value(); };
    if (deadline == kNoDeadline) {
      state_->answered.Wait(lock, answered);
    } else if (!state_->answered.WaitUntil(lock, deadline, answered)) {
      return Fail(Code::kUnavailable, std::string(timeout_message));
    }
    return std::move(*state_->answer);
  }
  // The answer, or kUnavailable "no answer within <timeout> ms".
  [[nodiscard]] Result<T> WaitFor(std::chrono::milliseconds timeout) {
    return Wait(std::chrono::steady_clock::now() + timeout,
                "no answer within " + std::to_string(timeout.count()) + " ms");
  }

 private:
  struct State {
    Mutex mu;
    CondVar answered;
    std::optional<Result<T>> answer KLEAF_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

// Starts a call with `start(callback)` and waits for its answer until `deadline` (kUnavailable
// `timeout_message` after it). E.g.
//   Await<Segment>(deadline, "no segment", [&](auto done) { a.AllocateSegment(tag, 0, done); });
template <typename T, typename Start>
[[nodiscard]] Result<T> Await(Deadline deadline, std::string_view timeout_message, Start&& start) {
  PendingCall<T> call;
  std::forward<Start>(start)(call.Callback());
  return call.Wait(deadline, timeout_message);
}

// The same with `timeout` counted from when the call was started.
template <typename T, typename Start>
[[nodiscard]] Result<T> Await(std::chrono::milliseconds timeout, std::string_view timeout_message,
                              Start&& start) {
  PendingCall<T> call;
  std::forward<Start>(start)(call.Callback());
  return call.Wait(std::chrono::steady_clock::now() + timeout, timeout_message);
}

}  // namespace kleaf
