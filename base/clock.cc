#include "base/clock.h"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <thread>

namespace kleaf {
namespace {

// The value of exactly `digits` decimal digits at text[at...], or -1.
int DigitsAt(std::string_view text, size_t at, size_t digits) {
  if (at + digits > text.size()) return -1;
  int value = 0;
  for (size_t i = at; i < at + digits; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool IsLeapYear(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeapYear(year) ? 29 : kDays[month - 1];
}

std::unexpected<Error> MalformedTime() {
  return Fail(Code::kInvalidArgument,
              "time: expected RFC 3339 (2026-11-24T10:00:00Z, 2026-11-24T10:00:00.123+08:00) or "
              "milliseconds since the Unix epoch");
}

// The full-date "T" partial-time of RFC 3339 without its fraction: text[0, 19).
[[nodiscard]] Result<std::tm> ParseDateTime(std::string_view text) {
  const int year = DigitsAt(text, 0, 4);
  const int month = DigitsAt(text, 5, 2);
  const int day = DigitsAt(text, 8, 2);
  const int hour = DigitsAt(text, 11, 2);
  const int minute = DigitsAt(text, 14, 2);
  const int second = DigitsAt(text, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || text[4] != '-' ||
      text[7] != '-' || text.substr(10, 1).find_first_of("Tt ") != 0 || text[13] != ':' ||
      text[16] != ':') {
    return MalformedTime();
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return Fail(Code::kInvalidArgument, "time: " + std::string(text) + " is not a valid date-time");
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return tm;
}

// The milliseconds of a time-secfrac at text[at] (0 without one); `at` moves past it. Digits past
// the third are read and dropped.
[[nodiscard]] Result<int> ParseFractionMs(std::string_view text, size_t& at) {
  int millis = 0;
  if (at >= text.size() || text[at] != '.') return millis;
  size_t digits = 0;
  for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++digits) {
    if (digits < 3) millis = millis * 10 + (text[at] - '0');
  }
  if (digits == 0) return MalformedTime();
  for (; digits < 3; ++digits) millis *= 10;
  return millis;
}

// The time-offset `zone` ("Z", "z" or "+hh:mm"/"-hh:mm") of `text`, in minutes east of UTC.
[[nodiscard]] Result<int64_t> ParseOffsetMinutes(std::string_view text, std::string_view zone) {
  if (zone == "Z" || zone == "z") return 0;
  const int offset_hours = DigitsAt(zone, 1, 2);
  const int offset_mins = DigitsAt(zone, 4, 2);
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':' ||
      offset_hours < 0 || offset_mins < 0) {
    return MalformedTime();
  }
  if (offset_hours > 23 || offset_mins > 59) {
    return Fail(Code::kInvalidArgument,
                "time: the offset of " + std::string(text) + " is out of range");
  }
  return (zone[0] == '-' ? -1 : 1) * (offset_hours * 60 + offset_mins);
}

// RFC 3339 section 5.6: full-date "T" partial-time time-offset.
[[nodiscard]] Result<int64_t> ParseRfc3339Ms(std::string_view text) {
  auto tm = ParseDateTime(text);
  if (!tm) return std::unexpected(tm.error());
  size_t at = 19;
  auto millis = ParseFractionMs(text, at);
  if (!millis) return std::unexpected(millis.error());
  auto offset_minutes = ParseOffsetMinutes(text, text.substr(at));
  if (!offset_minutes) return std::unexpected(offset_minutes.error());
  const int64_t local_secs = timegm(&*tm);  // the date-time read as UTC; the offset comes next
  return (local_secs - *offset_minutes * 60) * 1000 + *millis;
}

}  // namespace

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

Result<int64_t> ParseTimeMs(std::string_view text) {
  const std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    int64_t ms = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec == std::errc() && ptr == text.data() + text.size()) return ms;
    return Fail(Code::kInvalidArgument,
                "time: milliseconds since the Unix epoch must fit in 64 bits");
  }
  return ParseRfc3339Ms(text);
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
