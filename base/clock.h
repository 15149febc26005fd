// Time as kleaf sees it: wall-clock milliseconds for IDs, a monotonic clock for deadlines, and
// sleeping. Injected everywhere so tests can move time (and move it backwards) deterministically.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace kleaf {

// "2020-05-02T12:13:44.602Z" for a Unix time in milliseconds.
std::string FormatUtcMs(int64_t ms);

// The Unix time in milliseconds of an RFC 3339 date-time ("2026-11-24T10:00:00Z",
// "2026-11-24T10:00:00.123+08:00"; 't' or ' ' for 'T' and 'z' for 'Z' too; digits past the
// millisecond are dropped, so a time rounds down to its millisecond) or of a decimal count of
// milliseconds since the Unix epoch ("1795514400000", "-5"). kInvalidArgument for anything else,
// a leap second (":60") included: Unix time has none.
[[nodiscard]] Result<int64_t> ParseTimeMs(std::string_view text);

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (CLOCK_REALTIME); may jump backwards.
  virtual int64_t NowMs() = 0;
  // Monotonic nanoseconds, for measuring durations.
  virtual int64_t MonotonicNs() = 0;
  // Sleeps for `d`; a zero duration yields the processor once.
  virtual void SleepFor(std::chrono::nanoseconds d) = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override;
  int64_t MonotonicNs() override;
  void SleepFor(std::chrono::nanoseconds d) override;
  static SystemClock& Instance();
};

// A clock that moves only when told to. SleepFor advances both clocks by the duration slept (by
// `yield_step` for a zero duration) so code that waits for time to pass terminates. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms, std::chrono::nanoseconds yield_step = std::chrono::milliseconds(1))
      : now_ns_(now_ms * 1'000'000), mono_ns_(0), yield_step_(yield_step) {}
  int64_t NowMs() override { return now_ns_.load() / 1'000'000; }
  int64_t MonotonicNs() override { return mono_ns_.load(); }
  void SleepFor(std::chrono::nanoseconds d) override;
  // Moves the wall clock (forwards or backwards) without touching the monotonic clock.
  void SetWallMs(int64_t ms) { now_ns_.store(ms * 1'000'000); }
  void Advance(std::chrono::nanoseconds d);
  int64_t sleeps() const { return sleeps_.load(); }

 private:
  std::atomic<int64_t> now_ns_;
  std::atomic<int64_t> mono_ns_;
  std::chrono::nanoseconds yield_step_;
  std::atomic<int64_t> sleeps_{0};
};

}  // namespace kleaf
