#include "allocator/id_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "allocator/allocation.h"

namespace kleaf::allocator {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
constexpr IdKey kKey{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
// 2026-03-01T12:00:00Z
constexpr int64_t kNow = 1772366400000;

state::TagRecord Obfuscated(state::IdMode mode, int64_t base,
                            std::string key = "00112233445566778899aabbccddeeff") {
  state::TagRecord r;
  r.tag = "order";
  r.id_mode = mode;
  r.id_key = std::move(key);
  r.id_base = base;
  r.max_id = base;
  return r;
}

std::shared_ptr<const IdFormat> FormatOf(const state::TagRecord& r) {
  auto f = IdFormat::Of(r);
  EXPECT_TRUE(f) << f.error().message;
  return f ? *f : nullptr;
}

// Spearman's rank correlation of two equally long samples without ties.
double RankCorrelation(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  auto ranks = [](const std::vector<int64_t>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> rank(v.size());
    for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<double>(i);
    return rank;
  };
  auto ra = ranks(a);
  auto rb = ranks(b);
  const double n = static_cast<double>(a.size());
  double d2 = 0;
  for (size_t i = 0; i < a.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  return 1 - 6 * d2 / (n * (n * n - 1));
}

double IncreasingPairs(const std::vector<int64_t>& ids) {
  size_t up = 0;
  for (size_t i = 1; i < ids.size(); ++i) up += ids[i] > ids[i - 1];
  return static_cast<double>(up) / static_cast<double>(ids.size() - 1);
}

TEST(SipHashTest, MatchesTheReferenceVectorOfEightBytes) {
  // SipHash-2-4 paper, appendix A: key 00..0f, message 00..07.
  const IdKey key{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
  EXPECT_EQ(SipHash64(key, 0x0706050403020100ULL), 0x93f5f5799a932462ULL);
}

TEST(FeistelPermutationTest, IsABijectionOnEverySmallWidth) {
  for (int width = 2; width <= 16; ++width) {
    FeistelPermutation p(kKey, width);
    const uint64_t n = uint64_t{1} << width;
    std::vector<bool> seen(n);
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t y = p.Forward(x);
      ASSERT_LT(y, n) << "width " << width;
      ASSERT_FALSE(seen[y]) << "width " << width << ": " << y << " twice";
      seen[y] = true;
      ASSERT_EQ(p.Backward(y), x) << "width " << width;
    }
  }
}

TEST(FeistelPermutationTest, RoundTripsOn63BitsAndDependsOnTheKey) {
  FeistelPermutation p(kKey, 63);
  FeistelPermutation other(IdKey{kKey.k0, kKey.k1 ^ 1}, 63);
  int same = 0;
  for (uint64_t x : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{1} << 40,
                     (uint64_t{1} << 63) - 1, (uint64_t{1} << 62) + 12345}) {
    const uint64_t y = p.Forward(x);
    EXPECT_LT(y, uint64_t{1} << 63);
    EXPECT_EQ(p.Backward(y), x);
    same += other.Forward(x) == y;
  }
  for (uint64_t x = 0; x < 100000; ++x) ASSERT_EQ(p.Backward(p.Forward(x)), x);
  EXPECT_EQ(same, 0);
}

TEST(BoundedPermutationTest, CycleWalkingIsABijectionOfTheSmallerRange) {
  for (uint64_t n : {uint64_t{1}, uint64_t{513}, uint64_t{700}, uint64_t{1023}, uint64_t{1024}}) {
    BoundedPermutation p(kKey, 10, n);
    std::vector<bool> seen(n);
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t y = p.Forward(x);
      ASSERT_LT(y, n);
      ASSERT_FALSE(seen[y]);
      seen[y] = true;
      ASSERT_EQ(p.Backward(y), x);
    }
  }
}

TEST(IdFormatTest, PlainTagsHaveNoFormatAndBadKeysAreRefused) {
  state::TagRecord plain;
  plain.tag = "order";
  auto f = IdFormat::Of(plain);
  ASSERT_TRUE(f);
  EXPECT_EQ(*f, nullptr);
  EXPECT_FALSE(IdFormat::Of(Obfuscated(state::IdMode::kObfuscated, 1, "short")));
  EXPECT_FALSE(IdFormat::Of(Obfuscated(state::IdMode::kObfuscated, 1, std::string(32, 'g'))));
}

TEST(IdFormatTest, ObfuscatedIdsArePositiveUniqueAboveTheBaseAndRoundTrip) {
  for (int64_t base : {int64_t{0}, int64_t{1}, int64_t{5000}, kMaxSegmentId - 100000}) {
    auto f = FormatOf(Obfuscated(state::IdMode::kObfuscated, base));
    ASSERT_NE(f, nullptr);
    std::unordered_set<int64_t> seen;
    for (int64_t c = base; c < base + 100000; ++c) {
      auto id = f->Map(c, kNow);
      ASSERT_TRUE(id) << id.error().message;
      ASSERT_GT(*id, base);
      ASSERT_LE(*id, kMaxId);
      ASSERT_TRUE(seen.insert(*id).second) << "base " << base << ": " << *id << " twice";
      auto back = f->Unmap(*id);
      ASSERT_TRUE(back);
      ASSERT_EQ(*back, c);
    }
  }
}

TEST(IdFormatTest, ObfuscatedRefusesCountersOutsideItsRange) {
  auto f = FormatOf(Obfuscated(state::IdMode::kObfuscated, 5000));
  EXPECT_EQ(f->Map(4999, kNow).error().code, Code::kResourceExhausted);  // a plain counter
  EXPECT_TRUE(f->Map(kMaxSegmentId - 1, kNow));
  EXPECT_FALSE(f->Unmap(5000));
  EXPECT_FALSE(f->Unmap(-3));
}

TEST(IdFormatTest, ConsecutiveObfuscatedIdsAreUncorrelated) {
  auto f = FormatOf(Obfuscated(state::IdMode::kObfuscated, 1));
  constexpr int64_t kN = 200000;
  std::vector<int64_t> counters;
  std::vector<int64_t> ids;
  for (int64_t c = 1; c <= kN; ++c) {
    counters.push_back(c);
    ids.push_back(*f->Map(c, kNow));
  }
  // For a random order both are 0.5 and 0 with a standard deviation of about 0.0011 and 0.0022.
  EXPECT_NEAR(IncreasingPairs(ids), 0.5, 0.01);
  EXPECT_NEAR(RankCorrelation(counters, ids), 0.0, 0.015);
  std::vector<int64_t> next(ids.begin() + 1, ids.end());
  std::vector<int64_t> prev(ids.begin(), ids.end() - 1);
  EXPECT_NEAR(RankCorrelation(prev, next), 0.0, 0.015);
  // And the IDs spread over the whole range: about half of them above 2^62.
  const auto high =
      std::count_if(ids.begin(), ids.end(), [](int64_t id) { return id >= kMaxSegmentId; });
  EXPECT_NEAR(static_cast<double>(high) / kN, 0.5, 0.01);
}

TEST(IdFormatTest, ObfuscatedTimeSortsByHourAndIsRandomWithinIt) {
  auto f = FormatOf(Obfuscated(state::IdMode::kObfuscatedTime, 1));
  const int64_t hour = (kNow - kTimePrefixEpochMs) / kTimePrefixPeriodMs;
  std::vector<int64_t> this_hour;
  std::unordered_set<int64_t> seen;
  for (int64_t c = 1; c <= 100000; ++c) {
    auto id = f->Map(c, kNow);
    ASSERT_TRUE(id) << id.error().message;
    ASSERT_EQ(*id >> kTimeCounterBits, hour);
    ASSERT_TRUE(seen.insert(*id).second);
    ASSERT_EQ(*f->Unmap(*id), c);
    this_hour.push_back(*id);
  }
  EXPECT_NEAR(IncreasingPairs(this_hour), 0.5, 0.01);
  const int64_t max_this_hour = *std::max_element(this_hour.begin(), this_hour.end());
  for (int64_t c = 100001; c <= 101000; ++c) {
    auto id = f->Map(c, kNow + kTimePrefixPeriodMs);
    ASSERT_TRUE(id);
    ASSERT_GT(*id, max_this_hour);  // a later hour sorts after every ID of an earlier one
    ASSERT_TRUE(seen.insert(*id).second);
  }
}

TEST(IdFormatTest, ObfuscatedTimeRefusesPastItsCapacityAndBadClocks) {
  const int64_t base = 1000;
  auto f = FormatOf(Obfuscated(state::IdMode::kObfuscatedTime, base));
  EXPECT_EQ(f->counter_limit(), base + kTimeCounterCapacity);
  EXPECT_TRUE(f->Map(base + kTimeCounterCapacity - 1, kNow));
  EXPECT_EQ(f->Map(base + kTimeCounterCapacity, kNow).error().code, Code::kResourceExhausted);
  EXPECT_EQ(f->Map(base, kTimePrefixEpochMs).error().code, Code::kUnavailable);  // hour 0
  EXPECT_EQ(f->Map(base, 0).error().code, Code::kUnavailable);
  // A tag switched from plain at max_id 2^62: an ID of 2026 would be below its plain IDs.
  auto high = FormatOf(Obfuscated(state::IdMode::kObfuscatedTime, kMaxSegmentId - 10));
  EXPECT_EQ(high->Map(kMaxSegmentId - 10, kNow).error().code, Code::kFailedPrecondition);
}

TEST(IdFormatTest, NewKeysParseAndDiffer) {
  const std::string a = NewIdKey();
  const std::string b = NewIdKey();
  EXPECT_TRUE(ParseIdKey(a));
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 32u);
}

// ---------------------------------------------------------------------------------------------
// The mode in the allocation rules

TagUpdate Mode(state::IdMode mode) {
  TagUpdate u;
  u.id_mode = mode;
  return u;
}

TagRules ModeRules(state::IdMode default_mode = state::IdMode::kPlain) {
  TagRules r;
  r.default_id_mode = default_mode;
  int n = 0;
  r.new_id_key = [n]() mutable { return std::string(31, 'a') + char('0' + n++); };
  return r;
}

TEST(IdModeRulesTest, CreatingWithAModeDrawsAKeyAndBasesAtMaxId) {
  TagUpdate u = Mode(state::IdMode::kObfuscated);
  u.max_id = 5000;
  auto r = ApplyTagUpdate(std::nullopt, "order", u, ModeRules(), kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id_mode, state::IdMode::kObfuscated);
  EXPECT_EQ(r->id_key.size(), 32u);
  EXPECT_EQ(r->id_base, 5000);
  auto plain = ApplyTagUpdate(std::nullopt, "order", TagUpdate{}, ModeRules(), kNow);
  EXPECT_EQ(plain->id_mode, state::IdMode::kPlain);
  EXPECT_TRUE(plain->id_key.empty());
  auto by_default = ApplyTagUpdate(std::nullopt, "order", TagUpdate{},
                                   ModeRules(state::IdMode::kObfuscatedTime), kNow);
  EXPECT_EQ(by_default->id_mode, state::IdMode::kObfuscatedTime);
}

TEST(IdModeRulesTest, PlainMayBecomeObfuscatedOnceAndTheKeyNeverChanges) {
  state::TagRecord live;
  live.tag = "order";
  live.max_id = 7000;
  auto r = ApplyTagUpdate(live, "order", Mode(state::IdMode::kObfuscated), ModeRules(), kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id_base, 7000);  // every plain ID is below, every permuted one above
  const std::string key = r->id_key;
  r->max_id = 9000;
  auto again = ApplyTagUpdate(*r, "order", Mode(state::IdMode::kObfuscated), ModeRules(), kNow);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id_key, key);
  EXPECT_EQ(again->id_base, 7000);
  for (auto other : {state::IdMode::kPlain, state::IdMode::kObfuscatedTime}) {
    auto changed = ApplyTagUpdate(*r, "order", Mode(other), ModeRules(), kNow);
    ASSERT_FALSE(changed);
    EXPECT_EQ(changed.error().code, Code::kFailedPrecondition);
  }
}

TEST(IdModeRulesTest, DeleteAndRecreateKeepTheModeAndKey) {
  auto r =
      ApplyTagUpdate(std::nullopt, "order", Mode(state::IdMode::kObfuscated), ModeRules(), kNow);
  r->deleted = true;
  auto again = ApplyTagUpdate(*r, "order", TagUpdate{}, ModeRules(), kNow);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->id_mode, state::IdMode::kObfuscated);
  EXPECT_EQ(again->id_key, r->id_key);
  auto to_plain = ApplyTagUpdate(*r, "order", Mode(state::IdMode::kPlain), ModeRules(), kNow);
  EXPECT_FALSE(to_plain);
}

TEST(IdModeRulesTest, ObfuscatedTimeIsRefusedAboveItsFirstIds) {
  state::TagRecord live;
  live.tag = "order";
  live.max_id = kMaxSegmentId - 1;
  auto r = ApplyTagUpdate(live, "order", Mode(state::IdMode::kObfuscatedTime), ModeRules(), kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_TRUE(ApplyTagUpdate(live, "order", Mode(state::IdMode::kObfuscated), ModeRules(), kNow));
}

TEST(IdModeRulesTest, RestoreKeepsTheExportedKeyOnlyWhereNoIdCanRepeat) {
  state::TagRecord exported = Obfuscated(state::IdMode::kObfuscated, 4000);
  exported.max_id = 9000;
  TagUpdate u;
  u.max_id = 9000;
  u.restore_id_format = exported;
  auto fresh = ApplyTagUpdate(std::nullopt, "order", u, ModeRules(), kNow);
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(fresh->id_key, exported.id_key);
  EXPECT_EQ(fresh->id_base, 4000);
  auto same = ApplyTagUpdate(*fresh, "order", u, ModeRules(), kNow);
  EXPECT_TRUE(same);
  state::TagRecord stub;  // a plain tag with no IDs above the exported base: restorable
  stub.tag = "order";
  stub.max_id = 1;
  EXPECT_TRUE(ApplyTagUpdate(stub, "order", u, ModeRules(), kNow));
  state::TagRecord plain_above;  // plain IDs up to 6000 > the exported base: could meet
  plain_above.tag = "order";
  plain_above.max_id = 6000;
  auto refused = ApplyTagUpdate(plain_above, "order", u, ModeRules(), kNow);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kAlreadyExists);
  state::TagRecord other_key = Obfuscated(state::IdMode::kObfuscated, 4000, std::string(32, 'b'));
  EXPECT_FALSE(ApplyTagUpdate(other_key, "order", u, ModeRules(), kNow));
}

TEST(IdModeRulesTest, ObfuscatedTimeSegmentsStopAtTheCounterCapacity) {
  state::TagRecord r = Obfuscated(state::IdMode::kObfuscatedTime, 100);
  r.step = 10;
  r.max_id = 100 + kTimeCounterCapacity - 4;
  auto last = ReserveSegment(r, 0, 1000000, kNow);
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_EQ(last->end, 100 + kTimeCounterCapacity);  // a short last segment
  ASSERT_NE(last->format, nullptr);
  EXPECT_TRUE(last->format->Map(last->end - 1, kNow));
  auto none = ReserveSegment(r, 0, 1000000, kNow);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Code::kResourceExhausted);
}

TEST(IdModeRecordTest, EncodesTheModeAndLeavesPlainRecordsAsBefore) {
  state::TagRecord plain;
  plain.tag = "order";
  EXPECT_EQ(state::EncodeTag(plain).find("id_"), std::string::npos);
  state::TagRecord r = Obfuscated(state::IdMode::kObfuscatedTime, 77);
  auto back = state::DecodeTag(state::EncodeTag(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id_mode, state::IdMode::kObfuscatedTime);
  EXPECT_EQ(back->id_key, r.id_key);
  EXPECT_EQ(back->id_base, 77);
  EXPECT_FALSE(state::DecodeTag(R"({"tag":"a","max_id":1,"step":1,"id_mode":"rot13"})"));
}

}  // namespace
}  // namespace kleaf::allocator
