#include "base/clock.h"

#include <cstdio>
#include <ctime>
#include <thread>

namespace kleaf {

std::string FormatUtcMs(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

int64_t SystemClock::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SystemClock::SleepFor(std::chrono::nanoseconds d) {
  if (d.count() <= 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(d);
  }
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

void ManualClock::SleepFor(std::chrono::nanoseconds d) {
  sleeps_.fetch_add(1);
  Advance(d.count() <= 0 ? yield_step_ : d);
}

void ManualClock::Advance(std::chrono::nanoseconds d) {
  now_ns_.fetch_add(d.count());
  mono_ns_.fetch_add(d.count());
}

}  // namespace kleaf
