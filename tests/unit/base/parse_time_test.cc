#include <gtest/gtest.h>

#include <random>
#include <string>

#include "base/clock.h"

namespace kleaf {
namespace {

int64_t Parsed(const std::string& text) {
  auto ms = ParseTimeMs(text);
  EXPECT_TRUE(ms) << text << ": " << ms.error().message;
  return ms ? *ms : -1;
}

TEST(ParseTimeMsTest, ReadsRfc3339WithOffsetsAndFractions) {
  EXPECT_EQ(Parsed("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(Parsed("2026-11-24T10:00:00Z"), 1795514400000);
  // +08:00 is eight hours ahead of UTC: the same instant is 02:00:00.123Z.
  EXPECT_EQ(Parsed("2026-11-24T10:00:00.123+08:00"), 1795485600123);
  EXPECT_EQ(Parsed("2026-11-24T02:00:00.123Z"), 1795485600123);
  EXPECT_EQ(Parsed("2026-11-23T20:30:00.123-05:30"), 1795485600123);
  EXPECT_EQ(Parsed("2026-11-24t02:00:00.123z"), 1795485600123);
  EXPECT_EQ(Parsed("2026-11-24 02:00:00.123+00:00"), 1795485600123);
  EXPECT_EQ(Parsed("2026-11-24T02:00:00.1Z"), 1795485600100);
  EXPECT_EQ(Parsed("2026-11-24T02:00:00.12Z"), 1795485600120);
  // Digits past the millisecond round down: the time is inside that millisecond.
  EXPECT_EQ(Parsed("2026-11-24T02:00:00.123999999Z"), 1795485600123);
  EXPECT_EQ(Parsed("2024-02-29T00:00:00Z"), 1709164800000);
  EXPECT_EQ(Parsed("2000-02-29T00:00:00Z"), 951782400000);
  EXPECT_EQ(Parsed("1969-12-31T23:59:59.999Z"), -1);
}

TEST(ParseTimeMsTest, ReadsEpochMilliseconds) {
  EXPECT_EQ(Parsed("1795514400000"), 1795514400000);
  EXPECT_EQ(Parsed("0"), 0);
  EXPECT_EQ(Parsed("-5"), -5);
}

TEST(ParseTimeMsTest, ReadsBackWhatFormatUtcMsWrites) {
  std::mt19937_64 rng(17);
  for (int i = 0; i < 10000; ++i) {
    const int64_t ms = static_cast<int64_t>(rng() % (int64_t{1} << 45));  // to the year 3085
    ASSERT_EQ(Parsed(FormatUtcMs(ms)), ms) << FormatUtcMs(ms);
  }
}

TEST(ParseTimeMsTest, RefusesAnythingElse) {
  for (const std::string bad : {"",
                                "-",
                                "abc",
                                "12a",
                                "1.5",
                                "99999999999999999999",
                                "2026-11-24",
                                "2026-11-24T10:00Z",
                                "2026-11-24T10:00:00",
                                "2026-11-24T10:00:00.Z",
                                "2026-11-24T10:00:00+0800",
                                "2026-11-24T10:00:00+08",
                                "2026-11-24T10:00:00 Z",
                                "2026-11-24X10:00:00Z",
                                "2026-13-01T00:00:00Z",
                                "2026-00-01T00:00:00Z",
                                "2026-11-31T00:00:00Z",
                                "2023-02-29T00:00:00Z",
                                "1900-02-29T00:00:00Z",
                                "2026-11-24T24:00:00Z",
                                "2026-11-24T10:60:00Z",
                                "2026-11-24T10:00:60Z",
                                "2026-11-24T10:00:00+24:00",
                                "2026-11-24T10:00:00Z ",
                                " 2026-11-24T10:00:00Z",
                                "+2026-11-24T10:00:00Z"}) {
    auto ms = ParseTimeMs(bad);
    EXPECT_FALSE(ms) << "'" << bad << "' read as " << *ms;
    if (!ms) {
      EXPECT_EQ(ms.error().code, Code::kInvalidArgument);
      EXPECT_NE(ms.error().message.find("time"), std::string::npos) << ms.error().message;
    }
  }
}

}  // namespace
}  // namespace kleaf
