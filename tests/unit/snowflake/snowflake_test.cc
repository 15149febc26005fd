#include "snowflake/snowflake.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "base/metrics.h"
#include "snowflake/snowflake_node.h"

namespace kleaf::snowflake {
namespace {

metrics::Counter& ClockBackward(const std::string& outcome) {
  return metrics::Registry::Default().GetCounter("kleaf_snowflake_clock_backward_total", "",
                                                 {{"outcome", outcome}});
}

constexpr int64_t kLeafEpoch = 1288834974657;
// 2023-11-14T22:13:20Z: a wall-clock time well inside the default layout.
constexpr int64_t kNow = 1'700'000'000'000;

struct Vector {
  int64_t id;
  const char* time;
  int64_t worker;
  int64_t sequence;
};

// docs/architecture.md, "Test vectors" (Leaf/Twitter layout: epoch 1288834974657, 41/10/12).
constexpr Vector kVectors[] = {
    {1256557484213448722, "2020-05-02T12:13:44.602Z", 619, 18},
    {1541815603606036480, "2022-06-28T16:07:40.105Z", 378, 0},
    {1233161576649121792, "2020-02-27T22:46:45.564Z", 334, 0},
};

SnowflakeGenerator::Options Opts(int64_t worker_id, bool random_start = false,
                                 int64_t max_backward_ms = 5) {
  SnowflakeGenerator::Options o;
  o.worker_id = worker_id;
  o.random_sequence_start = random_start;
  o.max_backward_ms = max_backward_ms;
  return o;
}

SnowflakeLayout MakeLayout(int t, int w, int s, int64_t epoch, int64_t unit = 1) {
  auto l = SnowflakeLayout::Make(t, w, s, epoch, unit, kNow);
  EXPECT_TRUE(l) << l.error().message;
  return l ? *l : SnowflakeLayout::Default();
}

SnowflakeLayout::Parts Parts(const SnowflakeLayout& layout, int64_t id) {
  auto p = layout.Decode(id);
  EXPECT_TRUE(p) << p.error().message;
  return p ? *p : SnowflakeLayout::Parts{};
}

// ---------------------------------------------------------------------------------------------
// SnowflakeLayout

TEST(SnowflakeLayoutTest, DecodesTheDesignTestVectorsExactly) {
  const SnowflakeLayout layout = SnowflakeLayout::Default();
  for (const auto& v : kVectors) {
    SCOPED_TRACE(v.id);
    auto p = layout.Decode(v.id);
    ASSERT_TRUE(p);
    EXPECT_EQ(FormatUtcMs(p->timestamp_ms), v.time);
    EXPECT_EQ(p->worker_id, v.worker);
    EXPECT_EQ(p->sequence, v.sequence);
  }
  // One timestamp checked by hand: 2020-05-02T12:13:44.602Z = 1588421624602 ms.
  EXPECT_EQ(Parts(layout, kVectors[0].id).timestamp_ms, 1588421624602);
}

TEST(SnowflakeLayoutTest, ComposesTheDesignTestVectorsBack) {
  const SnowflakeLayout layout = SnowflakeLayout::Default();
  for (const auto& v : kVectors) {
    SCOPED_TRACE(v.id);
    auto p = Parts(layout, v.id);
    EXPECT_EQ(layout.Compose(layout.TicksOf(p.timestamp_ms), v.worker, v.sequence), v.id);
  }
}

TEST(SnowflakeLayoutTest, DefaultIsTheLeafLayout) {
  const SnowflakeLayout d = SnowflakeLayout::Default();
  EXPECT_EQ(d.epoch_ms(), kLeafEpoch);
  EXPECT_EQ(d.time_unit_ms(), 1);
  EXPECT_EQ(d.max_ticks(), (int64_t{1} << 41) - 1);
  EXPECT_EQ(d.max_worker_id(), 1023);
  EXPECT_EQ(d.max_sequence(), 4095);
  // The Twitter epoch plus 2^41 - 1 ms.
  EXPECT_EQ(d.last_ms(), kLeafEpoch + (int64_t{1} << 41) - 1);
  EXPECT_EQ(FormatUtcMs(d.last_ms()), "2080-07-10T17:30:30.208Z");

  auto made = SnowflakeLayout::Make(41, 10, 12, kLeafEpoch, 1, kNow);
  ASSERT_TRUE(made);
  for (const auto& v : kVectors) EXPECT_EQ(Parts(*made, v.id).worker_id, v.worker);
}

TEST(SnowflakeLayoutTest, LargestComposedIdIsStillPositive) {
  const SnowflakeLayout d = SnowflakeLayout::Default();
  const int64_t id = d.Compose(d.max_ticks(), d.max_worker_id(), d.max_sequence());
  EXPECT_EQ(id, INT64_MAX);
  auto p = Parts(d, id);
  EXPECT_EQ(p.worker_id, 1023);
  EXPECT_EQ(p.sequence, 4095);
  EXPECT_EQ(p.timestamp_ms, d.last_ms());
}

TEST(SnowflakeLayoutTest, MakeRejectsBitsThatDoNotAddUpTo63) {
  for (auto [t, w, s] : {std::tuple{41, 10, 13}, std::tuple{40, 10, 12}, std::tuple{0, 51, 12},
                         std::tuple{41, 0, 22}, std::tuple{41, 22, 0}, std::tuple{64, -1, 0},
                         std::tuple{-1, 32, 32}}) {
    SCOPED_TRACE(::testing::Message() << t << "/" << w << "/" << s);
    auto l = SnowflakeLayout::Make(t, w, s, kLeafEpoch, 1, kNow);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, Code::kInvalidArgument);
  }
}

TEST(SnowflakeLayoutTest, MakeRejectsAnEpochInTheFutureOrNegative) {
  auto future = SnowflakeLayout::Make(41, 10, 12, kNow + 1, 1, kNow);
  ASSERT_FALSE(future);
  EXPECT_EQ(future.error().code, Code::kInvalidArgument);
  EXPECT_FALSE(SnowflakeLayout::Make(41, 10, 12, -1, 1, kNow));
  EXPECT_TRUE(SnowflakeLayout::Make(41, 10, 12, kNow, 1, kNow));
  EXPECT_TRUE(SnowflakeLayout::Make(41, 10, 12, 0, 1, kNow));
}

TEST(SnowflakeLayoutTest, MakeRejectsATimeUnitBelowOneMs) {
  EXPECT_FALSE(SnowflakeLayout::Make(41, 10, 12, kLeafEpoch, 0, kNow));
  EXPECT_FALSE(SnowflakeLayout::Make(41, 10, 12, kLeafEpoch, -10, kNow));
  EXPECT_TRUE(SnowflakeLayout::Make(41, 10, 12, kLeafEpoch, 10, kNow));
}

// 61 timestamp bits of minutes reach past 2^63 milliseconds: the end saturates ("never"), it does
// not wrap to a past date that refused the layout with "ran out at 2010-11-04" (and was undefined
// behaviour, seen under UBSan).
TEST(SnowflakeLayoutTest, AWideLayoutOfLongTicksEndsAtTheLastInt64Millisecond) {
  for (auto [bits, unit] : {std::pair{61, int64_t{60000}}, std::pair{61, int64_t{1000}},
                            std::pair{55, int64_t{3'600'000}}}) {
    SCOPED_TRACE(::testing::Message() << bits << " bits of " << unit << " ms");
    const int worker_bits = (63 - bits) / 2;
    auto l =
        SnowflakeLayout::Make(bits, worker_bits, 63 - bits - worker_bits, kLeafEpoch, unit, kNow);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->last_ms(), INT64_MAX);
    EXPECT_TRUE(CheckLayoutAt({bits, worker_bits, 63 - bits - worker_bits, kLeafEpoch, unit}, kNow))
        << "a layout that lasts past 2^63 ms is refused";
    auto first = l->FirstIdAt(kNow);
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_EQ(Parts(*l, *first).timestamp_ms, kLeafEpoch + (kNow - kLeafEpoch) / unit * unit);
    EXPECT_EQ(Parts(*l, INT64_MAX).timestamp_ms, INT64_MAX);
  }
  // One that really ran out is still refused, with its true end.
  auto narrow = CheckLayoutAt({20, 21, 22, kLeafEpoch, 1}, kNow);
  ASSERT_FALSE(narrow);
  EXPECT_NE(narrow.error().message.find("ran out at 2010-11-04"), std::string::npos)
      << narrow.error().message;
}

TEST(SnowflakeLayoutTest, DecodeRefusesANegativeId) {
  auto p = SnowflakeLayout::Default().Decode(-1);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, Code::kInvalidArgument);
}

TEST(SnowflakeLayoutTest, NonDefaultLayoutRoundTrips) {
  // 39/12/12 with 10 ms ticks and a recent epoch.
  const int64_t epoch = 1'600'000'000'000;
  SnowflakeLayout l = MakeLayout(39, 12, 12, epoch, 10);
  EXPECT_EQ(l.max_worker_id(), 4095);
  EXPECT_EQ(l.TicksOf(epoch + 25), 2);
  EXPECT_EQ(l.MsOf(2), epoch + 20);
  const int64_t id = l.Compose(l.TicksOf(kNow), 4095, 7);
  auto p = Parts(l, id);
  EXPECT_EQ(p.timestamp_ms, kNow);  // kNow is a multiple of 10 ms past the epoch
  EXPECT_EQ(p.worker_id, 4095);
  EXPECT_EQ(p.sequence, 7);
  EXPECT_EQ(id >> 24, l.TicksOf(kNow));
}

TEST(DecodeToJsonTest, DescribesAnId) {
  auto text = DecodeToJson(SnowflakeLayout::Default(), "1256557484213448722");
  ASSERT_TRUE(text) << text.error().message;
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j.at("id"), "1256557484213448722");  // a string: JavaScript loses precision
  EXPECT_EQ(j.at("timestamp_ms"), 1588421624602);
  EXPECT_EQ(j.at("time"), "2020-05-02T12:13:44.602Z");
  EXPECT_EQ(j.at("worker_id"), 619);
  EXPECT_EQ(j.at("sequence"), 18);
  EXPECT_EQ(j.size(), 5u);
}

TEST(DecodeToJsonTest, DecodesEveryVector) {
  for (const auto& v : kVectors) {
    auto text = DecodeToJson(SnowflakeLayout::Default(), std::to_string(v.id));
    ASSERT_TRUE(text);
    auto j = nlohmann::json::parse(*text);
    EXPECT_EQ(j.at("time"), v.time);
    EXPECT_EQ(j.at("worker_id"), v.worker);
    EXPECT_EQ(j.at("sequence"), v.sequence);
  }
}

TEST(DecodeToJsonTest, RejectsAnythingButANonNegativeDecimalInt64) {
  for (const char* bad : {"", "abc", "-1", "12x", "1.5", " 1", "1 ", "+1", "0x10",
                          "9223372036854775808", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    auto r = DecodeToJson(SnowflakeLayout::Default(), bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  }
  EXPECT_TRUE(DecodeToJson(SnowflakeLayout::Default(), "0"));
  EXPECT_TRUE(DecodeToJson(SnowflakeLayout::Default(), "9223372036854775807"));
}

// Leaf's own example of its /decodeSnowflakeId answer (LeafMonitorController's comment):
// {"timestamp":"1567733700834(2019-09-06 09:35:00.834)","sequenceId":"3448","workerId":"39"},
// written in its JVM's zone (UTC+8); kleaf writes UTC.
TEST(DecodeToLeafJsonTest, AnswersLeafsFieldsAsStrings) {
  const SnowflakeLayout d = SnowflakeLayout::Default();
  const int64_t id = d.Compose(d.TicksOf(1567733700834), 39, 3448);
  auto text = DecodeToLeafJson(d, std::to_string(id));
  ASSERT_TRUE(text) << text.error().message;
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j, nlohmann::json::parse(R"j({"timestamp":"1567733700834(2019-09-06 01:35:00.834)",
                                         "sequenceId":"3448","workerId":"39"})j"));
}

TEST(DecodeToLeafJsonTest, UsesTheGivenLayout) {
  const int64_t epoch = 1'600'000'000'000;
  SnowflakeLayout l = MakeLayout(39, 12, 12, epoch, 10);
  auto text = DecodeToLeafJson(l, std::to_string(l.Compose(l.TicksOf(kNow), 4095, 7)));
  ASSERT_TRUE(text) << text.error().message;
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j.at("timestamp"), std::to_string(kNow) + "(2023-11-14 22:13:20.000)");
  EXPECT_EQ(j.at("workerId"), "4095");
  EXPECT_EQ(j.at("sequenceId"), "7");
}

TEST(DecodeToLeafJsonTest, RejectsWhatDecodeToJsonRejectsNamingSnowflakeId) {
  for (const char* bad : {"", "abc", "-1", "12x", " 1", "+1", "9223372036854775808"}) {
    SCOPED_TRACE(bad);
    auto r = DecodeToLeafJson(SnowflakeLayout::Default(), bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_TRUE(r.error().message.starts_with("snowflakeId: ")) << r.error().message;
  }
}

// ---------------------------------------------------------------------------------------------
// SnowflakeGenerator

TEST(SnowflakeGeneratorTest, IdsStrictlyIncreaseAndCarryTheClockAndWorker) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(619), clock);
  int64_t previous = -1;
  for (int i = 0; i < 20'000; ++i) {
    if (i % 1000 == 999) clock.Advance(std::chrono::milliseconds(1));
    auto id = gen.Next();
    ASSERT_TRUE(id) << id.error().message;
    ASSERT_GT(*id, previous);
    previous = *id;
  }
  auto p = Parts(gen.layout(), previous);
  EXPECT_EQ(p.worker_id, 619);
  EXPECT_GE(p.timestamp_ms, kNow);
  EXPECT_LE(p.timestamp_ms, clock.NowMs());
}

TEST(SnowflakeGeneratorTest, FirstIdCarriesTheCurrentMillisecond) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(5), clock);
  auto id = gen.Next();
  ASSERT_TRUE(id);
  auto p = Parts(gen.layout(), *id);
  EXPECT_EQ(p.timestamp_ms, kNow);
  EXPECT_EQ(p.worker_id, 5);
  EXPECT_EQ(p.sequence, 0);
  EXPECT_EQ(gen.last_ms(), kNow);
}

TEST(SnowflakeGeneratorTest, IdsAreUniqueAcrossThreads) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(1, /*random_start=*/true), clock);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;  // several ticks' worth: forces sequence exhaustion waits
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ids[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) {
        if (i % 2 == 0) {
          auto id = gen.Next();
          if (id) ids[t].push_back(*id);
        } else {
          std::vector<int64_t> batch;
          if (gen.NextBatch(1, batch)) ids[t].push_back(batch[0]);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& v : ids) {
    ASSERT_EQ(v.size(), size_t{kPerThread});
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));  // each thread sees increasing IDs
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate ID";
  EXPECT_GT(all.front(), 0);
}

TEST(SnowflakeGeneratorTest, RandomSequenceStartIsBelow100EachNewTick) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(0, /*random_start=*/true), clock);
  std::set<int64_t> starts;
  for (int tick = 0; tick < 200; ++tick) {
    clock.Advance(std::chrono::milliseconds(1));
    auto first = gen.Next();
    ASSERT_TRUE(first);
    auto p = Parts(gen.layout(), *first);
    EXPECT_EQ(p.timestamp_ms, clock.NowMs());
    EXPECT_GE(p.sequence, 0);
    EXPECT_LT(p.sequence, 100);
    starts.insert(p.sequence);
    auto second = gen.Next();  // same tick: the sequence continues
    ASSERT_TRUE(second);
    EXPECT_EQ(Parts(gen.layout(), *second).sequence, p.sequence + 1);
  }
  // 200 draws from [0,100) that hit fewer than 10 distinct values are not random.
  EXPECT_GE(starts.size(), 10u);
}

TEST(SnowflakeGeneratorTest, SequenceStartsAtZeroWhenRandomStartIsOff) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(0, /*random_start=*/false), clock);
  for (int tick = 0; tick < 50; ++tick) {
    clock.Advance(std::chrono::milliseconds(1));
    auto id = gen.Next();
    ASSERT_TRUE(id);
    EXPECT_EQ(Parts(gen.layout(), *id).sequence, 0);
  }
}

TEST(SnowflakeGeneratorTest, SequenceExhaustionWaitsForTheNextMillisecond) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  std::vector<int64_t> ids;
  ASSERT_TRUE(gen.NextBatch(4096, ids));
  EXPECT_EQ(clock.sleeps(), 0);
  EXPECT_EQ(Parts(gen.layout(), ids.back()).sequence, 4095);
  EXPECT_EQ(Parts(gen.layout(), ids.back()).timestamp_ms, kNow);

  auto next = gen.Next();  // tick kNow is used up
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_GE(clock.sleeps(), 1);
  EXPECT_GT(*next, ids.back());
  auto p = Parts(gen.layout(), *next);
  EXPECT_EQ(p.timestamp_ms, kNow + 1);
  EXPECT_EQ(p.sequence, 0);
}

TEST(SnowflakeGeneratorTest, BatchLargerThanATickSpansTicks) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  std::vector<int64_t> ids = {42};  // existing content is kept
  ASSERT_TRUE(gen.NextBatch(10'000, ids));
  ASSERT_EQ(ids.size(), 10'001u);
  EXPECT_EQ(ids[0], 42);
  EXPECT_TRUE(std::is_sorted(ids.begin() + 1, ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin() + 1, ids.end()), ids.end());
  EXPECT_EQ(Parts(gen.layout(), ids.back()).timestamp_ms, kNow + 2);
}

TEST(SnowflakeGeneratorTest, ClockBackWithinToleranceWaitsAndIssuesALargerId) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3, false, /*max_backward_ms=*/5), clock);
  clock.Advance(std::chrono::milliseconds(10));
  auto before = gen.Next();
  ASSERT_TRUE(before);
  const uint64_t waited = ClockBackward("waited").value();
  const uint64_t refused = ClockBackward("refused").value();
  for (int back : {1, 3, 5}) {
    SCOPED_TRACE(back);
    const int64_t sleeps = clock.sleeps();
    const int64_t last = gen.last_ms();
    clock.SetWallMs(last - back);
    auto id = gen.Next();
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_GT(clock.sleeps(), sleeps) << "did not wait out the clock";
    EXPECT_GT(*id, *before);
    EXPECT_GE(Parts(gen.layout(), *id).timestamp_ms, last);
    before = id;
  }
  EXPECT_EQ(ClockBackward("waited").value() - waited, 3u);
  EXPECT_EQ(ClockBackward("refused").value(), refused);
}

TEST(SnowflakeGeneratorTest, ClockBackBeyondToleranceIsUnavailableAndNeverRepeats) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3, false, 5), clock);
  std::vector<int64_t> issued;
  ASSERT_TRUE(gen.NextBatch(100, issued));
  clock.Advance(std::chrono::milliseconds(3));
  ASSERT_TRUE(gen.NextBatch(100, issued));

  clock.SetWallMs(kNow - 100);
  const int64_t sleeps = clock.sleeps();
  const uint64_t refusals = ClockBackward("refused").value();
  auto refused = gen.Next();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
  EXPECT_EQ(clock.sleeps(), sleeps) << "must refuse at once, not sleep";
  std::vector<int64_t> batch;
  auto refused_batch = gen.NextBatch(5, batch);
  ASSERT_FALSE(refused_batch);
  EXPECT_TRUE(batch.empty());

  // Just past the tolerance.
  clock.SetWallMs(kNow + 3 - 6);
  EXPECT_FALSE(gen.Next());
  EXPECT_EQ(ClockBackward("refused").value() - refusals, 3u) << "every refusal counted";

  // The clock recovers to the last tick used: issuing resumes without repeating anything.
  clock.SetWallMs(kNow + 3);
  ASSERT_TRUE(gen.NextBatch(5000, issued));
  std::vector<int64_t> sorted = issued;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate ID";
  EXPECT_TRUE(std::is_sorted(issued.begin(), issued.end()));
}

TEST(SnowflakeGeneratorTest, ClockBeforeTheEpochIsUnavailable) {
  ManualClock clock(kLeafEpoch - 1);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  auto r = gen.Next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
}

// A layout with 40 timestamp bits whose epoch puts kNow near the end of its range.
class ExhaustionTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxTicks = (int64_t{1} << 40) - 1;
  const SnowflakeLayout layout_ = MakeLayout(40, 21, 2, kNow - kMaxTicks + 10);
};

TEST_F(ExhaustionTest, LastTickStillWorksWithPositiveIds) {
  ManualClock clock(layout_.last_ms());
  SnowflakeGenerator gen(layout_, Opts(layout_.max_worker_id()), clock);
  std::vector<int64_t> ids;
  ASSERT_TRUE(gen.NextBatch(4, ids));  // 2 sequence bits: 4 IDs per tick
  for (int64_t id : ids) {
    EXPECT_GT(id, 0);
    EXPECT_EQ(Parts(layout_, id).timestamp_ms, layout_.last_ms());
  }
  EXPECT_EQ(ids.back(), INT64_MAX);
}

TEST_F(ExhaustionTest, UsedUpTimestampBitsAreResourceExhaustedNeverNegative) {
  ManualClock clock(layout_.last_ms());
  SnowflakeGenerator gen(layout_, Opts(7), clock);
  std::vector<int64_t> ids;
  ASSERT_TRUE(gen.NextBatch(4, ids));
  // The last tick's sequence is used up; the next tick does not fit in 40 bits.
  auto r = gen.Next();
  ASSERT_FALSE(r) << "issued " << *r;
  EXPECT_EQ(r.error().code, Code::kResourceExhausted);
  for (int i = 0; i < 5; ++i) {
    clock.Advance(std::chrono::milliseconds(1000));
    auto again = gen.Next();
    ASSERT_FALSE(again) << "issued " << *again;
    EXPECT_EQ(again.error().code, Code::kResourceExhausted);
  }
}

TEST_F(ExhaustionTest, ClockPastTheLayoutIsResourceExhaustedFromTheStart) {
  ManualClock clock(layout_.last_ms() + 1);
  SnowflakeGenerator gen(layout_, Opts(7), clock);
  auto r = gen.Next();
  ASSERT_FALSE(r) << "issued " << *r;
  EXPECT_EQ(r.error().code, Code::kResourceExhausted);
  std::vector<int64_t> out;
  auto batch = gen.NextBatch(3, out);
  ASSERT_FALSE(batch);
  EXPECT_TRUE(out.empty());
}

TEST(SnowflakeGeneratorTest, FloorMakesTheNextIdLaterThanIt) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  gen.SetFloorMs(kNow);  // the previous run issued up to this very millisecond
  EXPECT_EQ(gen.last_ms(), kNow);
  auto id = gen.Next();
  ASSERT_TRUE(id);
  EXPECT_GT(Parts(gen.layout(), *id).timestamp_ms, kNow);
}

TEST(SnowflakeGeneratorTest, FloorSlightlyAheadIsWaitedOut) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3, false, 5), clock);
  gen.SetFloorMs(kNow + 4);
  auto id = gen.Next();
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_GT(Parts(gen.layout(), *id).timestamp_ms, kNow + 4);
  EXPECT_GE(clock.sleeps(), 1);
}

TEST(SnowflakeGeneratorTest, FloorFarAheadIsUnavailableUntilTheClockPassesIt) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3, false, 5), clock);
  gen.SetFloorMs(kNow + 1000);
  auto r = gen.Next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  clock.SetWallMs(kNow + 1001);
  auto id = gen.Next();
  ASSERT_TRUE(id);
  EXPECT_GT(Parts(gen.layout(), *id).timestamp_ms, kNow + 1000);
}

TEST(SnowflakeGeneratorTest, FloorBelowWhatWasIssuedChangesNothing) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  auto a = gen.Next();
  ASSERT_TRUE(a);
  gen.SetFloorMs(kNow - 50);
  auto b = gen.Next();
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, *a + 1);  // same tick, next sequence
}

TEST(SnowflakeGeneratorTest, LimitRefusesTimestampsBeyondIt) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  gen.SetLimitMs(kNow);  // the limit itself may be used
  auto a = gen.Next();
  ASSERT_TRUE(a);
  clock.Advance(std::chrono::milliseconds(1));
  auto refused = gen.Next();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
  EXPECT_EQ(gen.last_ms(), kNow);  // a refused call changes nothing

  gen.SetLimitMs(kNow + 1);
  auto b = gen.Next();
  ASSERT_TRUE(b);
  EXPECT_GT(*b, *a);
  EXPECT_EQ(Parts(gen.layout(), *b).timestamp_ms, kNow + 1);
}

TEST(SnowflakeGeneratorTest, BatchThatWouldCrossTheLimitIsAllOrNothing) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  gen.SetLimitMs(kNow);
  std::vector<int64_t> out = {1, 2, 3};
  auto r = gen.NextBatch(5000, out);  // needs a second tick, beyond the limit
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 3}));
  gen.SetLimitMs(kNow + 10);
  ASSERT_TRUE(gen.NextBatch(5000, out));
  EXPECT_EQ(out.size(), 5003u);
}

TEST(SnowflakeGeneratorTest, LimitBelowTheFloorRefusesEverything) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  gen.SetLimitMs(0);  // what TimestampGuard::Stop does
  auto r = gen.Next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kUnavailable);
}

TEST(SnowflakeGeneratorTest, LastMsIsZeroBeforeAnyIdAndTracksTheNewestTick) {
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  EXPECT_EQ(gen.last_ms(), 0);
  ASSERT_TRUE(gen.Next());
  clock.Advance(std::chrono::milliseconds(7));
  ASSERT_TRUE(gen.Next());
  EXPECT_EQ(gen.last_ms(), kNow + 7);
}

TEST(SnowflakeGeneratorTest, LastMsCoversTheWholeTickForCoarseUnits) {
  const int64_t epoch = 1'600'000'000'000;
  ManualClock clock(kNow + 3);
  SnowflakeGenerator gen(MakeLayout(39, 12, 12, epoch, 10), Opts(3), clock);
  ASSERT_TRUE(gen.Next());
  EXPECT_EQ(gen.last_ms(), kNow + 9);  // the tick [kNow, kNow + 10)
}

TEST(SnowflakeGeneratorTest, LastTickMsIsTheStartOfTheNewestTick) {
  // What a renewal reports: with a unit of a second, the tick's end would read as a clock up to
  // 999 ms ahead of the allocator's (issue 11: every lease revoked with time_unit_ms 1000).
  const int64_t epoch = 1'600'000'000'000;
  ManualClock clock(kNow + 3);
  SnowflakeGenerator gen(MakeLayout(39, 12, 12, epoch, 1000), Opts(3), clock);
  EXPECT_EQ(gen.last_tick_ms(), 0);
  ASSERT_TRUE(gen.Next());
  EXPECT_EQ(gen.last_tick_ms(), kNow);
  EXPECT_EQ(gen.last_ms(), kNow + 999);
}

TEST(SnowflakeGeneratorTest, NoTimestampPastTheLeaseEndWhateverTheClockSays) {
  // A wall clock jumped forward (while the registry was unreachable) must not issue timestamps a
  // later holder of the recycled id could repeat: the lease end is a hard cap.
  ManualClock clock(kNow);
  SnowflakeGenerator gen(SnowflakeLayout::Default(), Opts(3), clock);
  gen.SetLeaseEndMs(kNow + 30000);
  auto a = gen.Next();
  ASSERT_TRUE(a);
  clock.Advance(std::chrono::seconds(60));
  auto refused = gen.Next();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
  EXPECT_NE(refused.error().message.find("past the end of its worker id lease"), std::string::npos);
  std::vector<int64_t> out;
  EXPECT_FALSE(gen.NextBatch(10, out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(gen.last_ms(), kNow) << "a refused call changes nothing";
  // A renewal that reaches the allocator extends the lease end again.
  gen.SetLeaseEndMs(kNow + 90000);
  auto b = gen.Next();
  ASSERT_TRUE(b);
  EXPECT_GT(*b, *a);
}

TEST(SnowflakeGeneratorTest, WorkerIdLandsInItsBitsForNonDefaultLayouts) {
  struct Case {
    int t, w, s;
    int64_t worker;
  };
  for (const Case c : {Case{41, 10, 12, 1023}, Case{39, 12, 12, 4095}, Case{45, 5, 13, 17},
                       Case{40, 22, 1, (1 << 22) - 1}, Case{41, 1, 21, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.t << "/" << c.w << "/" << c.s << " worker " << c.worker);
    ManualClock clock(kNow);
    SnowflakeLayout layout = MakeLayout(c.t, c.w, c.s, kLeafEpoch);
    SnowflakeGenerator gen(layout, Opts(c.worker), clock);
    EXPECT_EQ(gen.worker_id(), c.worker);
    std::vector<int64_t> ids;
    // Stay within one tick: a 1-bit sequence holds two IDs.
    ASSERT_TRUE(gen.NextBatch(std::min<int64_t>(3, layout.max_sequence() + 1), ids));
    for (int64_t id : ids) {
      EXPECT_GT(id, 0);
      auto p = Parts(layout, id);
      EXPECT_EQ(p.worker_id, c.worker);
      EXPECT_EQ(p.timestamp_ms, kNow);
      EXPECT_EQ((id >> c.s) & ((int64_t{1} << c.w) - 1), c.worker);
      EXPECT_EQ(id >> (c.s + c.w), layout.TicksOf(kNow));
    }
  }
}

TEST(SnowflakeGeneratorTest, CoarseTimeUnitWaitsForTheNextTick) {
  const int64_t epoch = 1'600'000'000'000;
  ManualClock clock(kNow);
  // 1 sequence bit: two IDs per 10 ms tick.
  SnowflakeGenerator gen(MakeLayout(50, 12, 1, epoch, 10), Opts(3), clock);
  std::vector<int64_t> ids;
  ASSERT_TRUE(gen.NextBatch(6, ids));
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_EQ(Parts(gen.layout(), ids[0]).timestamp_ms, kNow);
  EXPECT_EQ(Parts(gen.layout(), ids[2]).timestamp_ms, kNow + 10);
  EXPECT_EQ(Parts(gen.layout(), ids[4]).timestamp_ms, kNow + 20);
}

}  // namespace
}  // namespace kleaf::snowflake
