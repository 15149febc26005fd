// SnowflakeLayout::FirstIdAt and ComposeToJson: the smallest ID of a time, checked against Decode
// and against IDs a generator issues at that time.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/clock.h"
#include "snowflake/snowflake.h"

namespace kleaf::snowflake {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;  // 2023-11-14T22:13:20Z

int64_t FirstId(const SnowflakeLayout& layout, int64_t ms) {
  auto id = layout.FirstIdAt(ms);
  EXPECT_TRUE(id) << ms << ": " << id.error().message;
  return id ? *id : -1;
}

TEST(FirstIdAtTest, DecodesBackToItsTimeWithWorkerAndSequenceZero) {
  const SnowflakeLayout layout = SnowflakeLayout::Default();
  for (int64_t ms : {layout.epoch_ms(), kNow, kNow + 1, int64_t{1795514400000}, layout.last_ms()}) {
    SCOPED_TRACE(ms);
    auto parts = layout.Decode(FirstId(layout, ms));
    ASSERT_TRUE(parts);
    EXPECT_EQ(parts->timestamp_ms, ms);
    EXPECT_EQ(parts->worker_id, 0);
    EXPECT_EQ(parts->sequence, 0);
  }
  EXPECT_EQ(FirstId(layout, layout.epoch_ms()), 0);
  // The second test vector (docs/architecture.md, "Test vectors") has sequence 0 but worker 378:
  // its time's first ID is below it.
  EXPECT_EQ(FirstId(layout, 1656432460105), 1541815603606036480 - (int64_t{378} << 12));
}

// Issues every ID a worker can in one millisecond (the clock stands still until the sequence runs
// out) and checks the bounds of that millisecond and the next around all of them.
TEST(FirstIdAtTest, BoundsEveryIdIssuedInItsMillisecond) {
  for (int64_t worker : {int64_t{0}, int64_t{1}, int64_t{1023}}) {
    SCOPED_TRACE(worker);
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(),
                                 {.worker_id = worker, .random_sequence_start = true}, clock);
    std::vector<int64_t> ids;
    // Up to 4096 IDs fit in kNow; the rest wait for kNow + 1, kNow + 2.
    ASSERT_TRUE(generator.NextBatch(10000, ids));
    const SnowflakeLayout& layout = generator.layout();
    for (int64_t id : ids) {
      const int64_t ms = layout.Decode(id)->timestamp_ms;
      ASSERT_LE(FirstId(layout, ms), id);
      ASSERT_GT(FirstId(layout, ms + 1), id);
      ASSERT_GT(id, FirstId(layout, ms - 1));
    }
    // The range [first(kNow), first(kNow + 1)) selects exactly the IDs issued at kNow.
    const auto at_now = std::count_if(ids.begin(), ids.end(), [&](int64_t id) {
      return id >= FirstId(layout, kNow) && id < FirstId(layout, kNow + 1);
    });
    const auto issued_at_now = std::count_if(ids.begin(), ids.end(), [&](int64_t id) {
      return layout.Decode(id)->timestamp_ms == kNow;
    });
    EXPECT_EQ(at_now, issued_at_now);
    EXPECT_GT(at_now, 3000);
  }
}

TEST(FirstIdAtTest, CoarseTimeUnitsRoundDownToTheirTick) {
  auto layout = SnowflakeLayout::Make(39, 13, 11, 1262304000000, 10, kNow);
  ASSERT_TRUE(layout);
  EXPECT_EQ(FirstId(*layout, kNow), FirstId(*layout, kNow + 9));
  EXPECT_LT(FirstId(*layout, kNow + 9), FirstId(*layout, kNow + 10));
  auto parts = layout->Decode(FirstId(*layout, kNow + 7));
  EXPECT_EQ(parts->timestamp_ms, kNow);
  EXPECT_EQ(parts->worker_id, 0);
  EXPECT_EQ(parts->sequence, 0);
}

TEST(FirstIdAtTest, TimesOutsideTheLayoutAreRefusedNamingTheRange) {
  const SnowflakeLayout layout = SnowflakeLayout::Default();
  for (int64_t ms :
       {layout.epoch_ms() - 1, int64_t{0}, int64_t{-5}, layout.last_ms() + 1, INT64_MAX}) {
    SCOPED_TRACE(ms);
    auto id = layout.FirstIdAt(ms);
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, Code::kInvalidArgument);
    EXPECT_NE(id.error().message.find(FormatUtcMs(layout.epoch_ms())), std::string::npos)
        << id.error().message;
    EXPECT_NE(id.error().message.find(FormatUtcMs(layout.last_ms())), std::string::npos)
        << id.error().message;
  }
  // The last millisecond of the last tick of a coarse layout is still inside.
  auto coarse = SnowflakeLayout::Make(39, 13, 11, 1262304000000, 10, kNow);
  ASSERT_TRUE(coarse);
  EXPECT_TRUE(coarse->FirstIdAt(coarse->last_ms() + 9));
  EXPECT_FALSE(coarse->FirstIdAt(coarse->last_ms() + 10));
  // A layout whose range outruns int64 milliseconds does not overflow.
  auto wide = SnowflakeLayout::Make(61, 1, 1, 0, 1000, kNow);
  ASSERT_TRUE(wide);
  EXPECT_TRUE(wide->FirstIdAt(INT64_MAX));
}

TEST(ComposeToJsonTest, AnswersTheIdAsAStringForRfc3339AndEpochMs) {
  const SnowflakeLayout layout = SnowflakeLayout::Default();
  const std::string want = "{\"id\":\"" + std::to_string(FirstId(layout, 1795485600123)) + "\"}";
  for (const char* time :
       {"2026-11-24T10:00:00.123+08:00", "2026-11-24T02:00:00.123Z", "1795485600123"}) {
    SCOPED_TRACE(time);
    auto json = ComposeToJson(layout, time);
    ASSERT_TRUE(json) << json.error().message;
    EXPECT_EQ(*json, want);
    EXPECT_TRUE(nlohmann::json::parse(*json)["id"].is_string());
  }
  for (const char* bad : {"tomorrow", "2026-11-24T10:00:00", "", "1000"}) {
    SCOPED_TRACE(bad);
    auto json = ComposeToJson(layout, bad);
    ASSERT_FALSE(json);
    EXPECT_EQ(json.error().code, Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kleaf::snowflake
