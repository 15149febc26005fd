// TagHistory: the monitoring page's per-tag rings of IDs/s and fetch latency, sampled at explicit
// times.
#include "gateway/tag_history.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kleaf::gateway {
namespace {

constexpr int64_t kInterval = 5000;
constexpr int64_t kT0 = 1'700'000'000'000;

TagCounters Counters(const std::string& tag, uint64_t issued, uint64_t fetches = 0,
                     int64_t fetch_ns = 0) {
  return {tag, issued, fetches, fetch_ns};
}

TEST(TagHistoryTest, RateIsTheCounterDeltaOverTheTimeBetweenSamples) {
  TagHistory h(kInterval);
  // First sample of a tag: counted from zero over one interval (its buffer started within it).
  h.Sample(kT0, {Counters("a", 500)});
  h.Sample(kT0 + 5000, {Counters("a", 1500)});
  h.Sample(kT0 + 15000, {Counters("a", 2500)});  // a late sample: 1000 IDs over 10 s
  h.Sample(kT0 + 20000, {Counters("a", 2500)});  // nothing issued
  auto s = h.Series("a");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].time_ms, kT0);
  EXPECT_DOUBLE_EQ((*s)[0].ids_per_s, 100);
  EXPECT_DOUBLE_EQ((*s)[1].ids_per_s, 200);
  EXPECT_EQ((*s)[2].time_ms, kT0 + 15000);
  EXPECT_DOUBLE_EQ((*s)[2].ids_per_s, 100);
  EXPECT_DOUBLE_EQ((*s)[3].ids_per_s, 0);
}

TEST(TagHistoryTest, ACounterThatWentBackWasResetAndCountsFromZero) {
  TagHistory h(kInterval);
  h.Sample(kT0, {Counters("a", 10000, 4, 40'000'000)});
  // The buffer was dropped and created again: its counters start over.
  h.Sample(kT0 + 5000, {Counters("a", 250, 1, 3'000'000)});
  auto s = h.Series("a");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 2u);
  EXPECT_DOUBLE_EQ((*s)[1].ids_per_s, 50);  // 250 over 5 s, not a negative rate or a huge one
  ASSERT_TRUE((*s)[1].fetch_ms);
  EXPECT_DOUBLE_EQ(*(*s)[1].fetch_ms, 3);
}

TEST(TagHistoryTest, AWallClockThatWentBackDividesByTheInterval) {
  TagHistory h(kInterval);
  h.Sample(kT0, {Counters("a", 0)});
  h.Sample(kT0 - 60000, {Counters("a", 1000)});
  auto s = h.Series("a");
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->back().ids_per_s, 200);
}

TEST(TagHistoryTest, LatencyIsTheMeanOfTheFetchesCompletedInTheInterval) {
  TagHistory h(kInterval);
  h.Sample(kT0, {Counters("a", 0, 1, 2'000'000)});                      // one fetch of 2 ms
  h.Sample(kT0 + 5000, {Counters("a", 0, 4, 2'000'000 + 30'000'000)});  // three: 30 ms in all
  h.Sample(kT0 + 10000, {Counters("a", 0, 4, 32'000'000)});             // none
  auto s = h.Series("a");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 3u);
  ASSERT_TRUE((*s)[0].fetch_ms);
  EXPECT_DOUBLE_EQ(*(*s)[0].fetch_ms, 2);
  ASSERT_TRUE((*s)[1].fetch_ms);
  EXPECT_DOUBLE_EQ(*(*s)[1].fetch_ms, 10);
  EXPECT_FALSE((*s)[2].fetch_ms) << "no fetch completed: no latency, not 0";
}

TEST(TagHistoryTest, TheRingKeepsTheLastSixtyPointsOldestFirst) {
  TagHistory h(kInterval);
  const int samples = TagHistory::kPoints + 25;
  for (int i = 0; i < samples; ++i) {
    // i IDs/s in sample i: the counter grows by 5 * i.
    h.Sample(kT0 + i * kInterval, {Counters("a", static_cast<uint64_t>(5 * i * (i + 1) / 2))});
  }
  auto s = h.Series("a");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), TagHistory::kPoints);
  for (size_t k = 0; k < s->size(); ++k) {
    const int i = samples - static_cast<int>(TagHistory::kPoints) + static_cast<int>(k);
    EXPECT_EQ((*s)[k].time_ms, kT0 + i * kInterval) << k;
    EXPECT_DOUBLE_EQ((*s)[k].ids_per_s, i) << k;
  }
}

TEST(TagHistoryTest, AtMostThirtyTwoTagsHaveARingTheFirstSampled) {
  TagHistory h(kInterval);
  std::vector<TagCounters> tags;
  for (int i = 0; i < 40; ++i) {
    tags.push_back(Counters("t" + std::to_string(100 + i), static_cast<uint64_t>(i)));
  }
  h.Sample(kT0, tags);
  EXPECT_EQ(h.untracked(), 8u);
  EXPECT_TRUE(h.Series("t100"));
  EXPECT_TRUE(h.Series("t131"));
  EXPECT_FALSE(h.Series("t132"));
  EXPECT_FALSE(h.Series("t139"));
  EXPECT_FALSE(h.Series("t999")) << "no ring is free for a tag not sampled yet";

  // t100's buffer is gone: its slot goes to the next tag, whose rate counts from its counters at
  // the previous sample (not from zero: it was seen then).
  tags.erase(tags.begin());
  for (auto& t : tags) t.issued += 5000;
  h.Sample(kT0 + 5000, tags);
  EXPECT_FALSE(h.Series("t100"));
  EXPECT_EQ(h.untracked(), 7u);
  auto s = h.Series("t132");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 1u);
  EXPECT_DOUBLE_EQ((*s)[0].ids_per_s, 1000);
  EXPECT_EQ(h.Series("t101")->size(), 2u);
}

TEST(TagHistoryTest, ATagNotSampledYetHasAnEmptySeriesWhileRingsAreFree) {
  TagHistory h(kInterval);
  auto s = h.Series("new");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->empty());
  EXPECT_EQ(h.untracked(), 0u);
}

}  // namespace
}  // namespace kleaf::gateway
