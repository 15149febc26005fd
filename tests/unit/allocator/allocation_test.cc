#include "allocator/allocation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace kleaf::allocator {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kMaxStep = 1'000'000;

state::TagRecord Tag(int64_t max_id, int64_t step) {
  state::TagRecord r;
  r.tag = "order";
  r.max_id = max_id;
  r.step = step;
  return r;
}

// A TagUpdate with the given fields set (designated initializers would trip
// -Wmissing-field-initializers).
TagUpdate Update(std::optional<int64_t> step, std::optional<int64_t> max_id = std::nullopt,
                 std::optional<std::string> description = std::nullopt) {
  TagUpdate u;
  u.step = step;
  u.max_id = max_id;
  u.description = std::move(description);
  return u;
}

// ---------------------------------------------------------------------------------------------
// ReserveSegment

TEST(ReserveSegmentTest, TagStepGivesMaxIdToMaxIdPlusStep) {
  auto r = Tag(1, 1000);
  auto s = ReserveSegment(r, 0, kMaxStep, kNow);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->tag, "order");
  EXPECT_EQ(s->start, 1);
  EXPECT_EQ(s->end, 1001);
  EXPECT_EQ(s->size(), 1000);
  EXPECT_EQ(s->min_step, 1000);
  EXPECT_EQ(r.max_id, 1001);
  EXPECT_EQ(r.update_time_ms, kNow);
}

TEST(ReserveSegmentTest, RequestedStepIsUsedWithinBounds) {
  auto r = Tag(5000, 1000);
  auto s = ReserveSegment(r, 4000, kMaxStep, kNow);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->start, 5000);
  EXPECT_EQ(s->end, 9000);
  EXPECT_EQ(r.max_id, 9000);
  EXPECT_EQ(s->min_step, 1000);
  EXPECT_EQ(r.step, 1000);  // the configured step is not changed by a dynamic one
}

TEST(ReserveSegmentTest, RequestedStepBelowTheTagStepIsRaisedToIt) {
  auto r = Tag(1, 1000);
  auto s = ReserveSegment(r, 10, kMaxStep, kNow);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), 1000);
  auto negative = ReserveSegment(r, -5, kMaxStep, kNow);
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->size(), 1000);
}

TEST(ReserveSegmentTest, RequestedStepAboveMaxStepIsCapped) {
  auto r = Tag(1, 1000);
  auto s = ReserveSegment(r, 5 * kMaxStep, kMaxStep, kNow);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), kMaxStep);
  EXPECT_EQ(r.max_id, 1 + kMaxStep);
}

TEST(ReserveSegmentTest, TagStepAboveMaxStepIsCapped) {
  auto r = Tag(1, 50);
  auto s = ReserveSegment(r, 0, 20, kNow);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), 20);
  EXPECT_EQ(r.max_id, 21);
}

TEST(ReserveSegmentTest, SegmentMayEndExactlyAtTheLimit) {
  auto r = Tag(kMaxSegmentId - 1000, 1000);
  auto s = ReserveSegment(r, 0, kMaxStep, kNow);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->end, kMaxSegmentId);
  EXPECT_EQ(r.max_id, kMaxSegmentId);
}

TEST(ReserveSegmentTest, NearTheLimitTheLastSegmentIsShorterAndEndsAtTheLimit) {
  for (int64_t max_id : {kMaxSegmentId - 999, kMaxSegmentId - 1}) {
    SCOPED_TRACE(max_id);
    auto r = Tag(max_id, 1000);
    auto s = ReserveSegment(r, 0, kMaxStep, kNow);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->start, max_id);
    EXPECT_EQ(s->end, kMaxSegmentId) << "the IDs left are handed out, never more";
    EXPECT_EQ(r.max_id, kMaxSegmentId);
  }
}

TEST(ReserveSegmentTest, AtTheLimitIsResourceExhaustedAndLeavesTheRecord) {
  auto r = Tag(kMaxSegmentId, 1000);
  const auto before = r;
  auto s = ReserveSegment(r, 0, kMaxStep, kNow);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Code::kResourceExhausted);
  EXPECT_EQ(r.max_id, before.max_id);
  EXPECT_EQ(r.update_time_ms, before.update_time_ms);
}

TEST(ReserveSegmentTest, HugeRequestedStepNearTheLimitNeverWraps) {
  auto r = Tag(kMaxSegmentId - 10, 1);
  auto s = ReserveSegment(r, INT64_MAX, INT64_MAX, kNow);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->end, kMaxSegmentId);
  EXPECT_EQ(r.max_id, kMaxSegmentId);
  EXPECT_FALSE(ReserveSegment(r, INT64_MAX, INT64_MAX, kNow)) << "then the space is used up";
}

TEST(ReserveSegmentTest, NegativeMaxIdIsRefused) {
  auto r = Tag(-1, 1000);
  auto s = ReserveSegment(r, 0, kMaxStep, kNow);
  ASSERT_FALSE(s);
  EXPECT_EQ(r.max_id, -1);
}

TEST(ReserveSegmentTest, DeletedTagIsNotFound) {
  auto r = Tag(500, 1000);
  r.deleted = true;
  auto s = ReserveSegment(r, 0, kMaxStep, kNow);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Code::kNotFound);
  EXPECT_EQ(r.max_id, 500);
}

TEST(ReserveSegmentTest, SuccessiveSegmentsAreAdjacentAndNeverOverlap) {
  auto r = Tag(1, 7);
  std::vector<Segment> segments;
  const int64_t requests[] = {0, 1, 7, 100, 3, 5000, 2 * kMaxStep, 0, 13, 999};
  for (int round = 0; round < 20; ++round) {
    for (int64_t step : requests) {
      auto s = ReserveSegment(r, step, kMaxStep, kNow + round);
      ASSERT_TRUE(s);
      ASSERT_GT(s->size(), 0);
      if (!segments.empty()) {
        EXPECT_EQ(s->start, segments.back().end);
      }
      segments.push_back(*s);
    }
  }
  EXPECT_EQ(r.max_id, segments.back().end);
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.start < b.start; });
  for (size_t i = 1; i < segments.size(); ++i) {
    EXPECT_LE(segments[i - 1].end, segments[i].start) << "segments " << i - 1 << " and " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// NextStep: Leaf's SegmentIDGenImpl.updateSegmentFromDb uses `duration < 15 min` -> double,
// `duration < 30 min` -> keep, otherwise halve. So exactly 15 minutes keeps and exactly 30 halves.

TEST(NextStepTest, ShortSegmentDoubles) {
  EXPECT_EQ(NextStep(1000, 1000, kMaxStep, milliseconds(0)), 2000);
  EXPECT_EQ(NextStep(1000, 1000, kMaxStep, minutes(1)), 2000);
  EXPECT_EQ(NextStep(2000, 1000, kMaxStep, minutes(14)), 4000);
}

TEST(NextStepTest, JustUnderFifteenMinutesDoubles) {
  EXPECT_EQ(NextStep(1000, 1000, kMaxStep, minutes(15) - milliseconds(1)), 2000);
}

TEST(NextStepTest, ExactlyFifteenMinutesKeeps) {
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, minutes(15)), 4000);
}

TEST(NextStepTest, BetweenFifteenAndThirtyMinutesKeeps) {
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, minutes(20)), 4000);
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, minutes(30) - milliseconds(1)), 4000);
}

TEST(NextStepTest, ExactlyThirtyMinutesHalves) {
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, minutes(30)), 2000);
}

TEST(NextStepTest, LongSegmentHalves) {
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, minutes(31)), 2000);
  EXPECT_EQ(NextStep(4000, 1000, kMaxStep, std::chrono::hours(24 * 365)), 2000);
}

TEST(NextStepTest, DoublingIsCappedAtMaxStep) {
  EXPECT_EQ(NextStep(600'000, 1000, kMaxStep, minutes(1)), kMaxStep);
  EXPECT_EQ(NextStep(500'000, 1000, kMaxStep, minutes(1)), kMaxStep);
  EXPECT_EQ(NextStep(kMaxStep, 1000, kMaxStep, minutes(1)), kMaxStep);
  EXPECT_EQ(NextStep(3, 1, 5, minutes(1)), 5);
  EXPECT_EQ(NextStep(2, 1, 5, minutes(1)), 4);
}

TEST(NextStepTest, DoublingAHugeStepNeverOverflows) {
  EXPECT_EQ(NextStep(INT64_MAX / 2 + 1, 1, INT64_MAX, minutes(1)), INT64_MAX);
  EXPECT_EQ(NextStep(INT64_MAX, 1, INT64_MAX, minutes(1)), INT64_MAX);
}

TEST(NextStepTest, HalvingNeverGoesBelowMinStep) {
  EXPECT_EQ(NextStep(1000, 1000, kMaxStep, minutes(45)), 1000);
  EXPECT_EQ(NextStep(1500, 1000, kMaxStep, minutes(45)), 1000);
  EXPECT_EQ(NextStep(1, 1, kMaxStep, minutes(45)), 1);
}

TEST(NextStepTest, CurrentStepBelowMinStepStartsFromMinStep) {
  // The admin raised the tag's step since the last segment.
  EXPECT_EQ(NextStep(100, 1000, kMaxStep, minutes(20)), 1000);
  EXPECT_EQ(NextStep(100, 1000, kMaxStep, minutes(1)), 2000);
  EXPECT_EQ(NextStep(100, 1000, kMaxStep, minutes(45)), 1000);
}

TEST(NextStepTest, CurrentStepAboveMaxStepIsBroughtDown) {
  // max_step lowered by a config change.
  EXPECT_EQ(NextStep(5000, 100, 1000, minutes(20)), 1000);
  EXPECT_EQ(NextStep(5000, 100, 1000, minutes(45)), 1000);
}

TEST(NextStepTest, ResultStaysWithinBoundsForAnyInput) {
  const int64_t steps[] = {1, 2, 7, 999, 1000, 1001, 499'999, 500'000, 500'001, kMaxStep};
  const minutes durations[] = {minutes(0), minutes(14), minutes(15), minutes(29), minutes(30),
                               minutes(31), minutes(600)};
  for (int64_t min_step : {int64_t{1}, int64_t{1000}, int64_t{999'999}}) {
    for (int64_t step : steps) {
      for (minutes d : durations) {
        int64_t next = NextStep(step, min_step, kMaxStep, d);
        EXPECT_GE(next, min_step) << step << " " << d.count();
        EXPECT_LE(next, kMaxStep) << step << " " << d.count();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ApplyTagUpdate

TEST(ApplyTagUpdateTest, CreatesWithDefaults) {
  auto r = ApplyTagUpdate(std::nullopt, "order", TagUpdate{}, 1000, kMaxStep, kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->tag, "order");
  EXPECT_EQ(r->max_id, 1);
  EXPECT_EQ(r->step, 1000);
  EXPECT_EQ(r->description, "");
  EXPECT_FALSE(r->deleted);
  EXPECT_EQ(r->update_time_ms, kNow);
}

TEST(ApplyTagUpdateTest, CreatesWithEveryField) {
  TagUpdate u = Update(50, 12345, "orders");
  auto r = ApplyTagUpdate(std::nullopt, "order", u, 1000, kMaxStep, kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->step, 50);
  EXPECT_EQ(r->max_id, 12345);
  EXPECT_EQ(r->description, "orders");
}

TEST(ApplyTagUpdateTest, UpdateKeepsWhatItDoesNotMention) {
  auto existing = Tag(777, 30);
  existing.description = "keep me";
  auto r = ApplyTagUpdate(existing, "order", Update(60), 1000, kMaxStep, kNow);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 60);
  EXPECT_EQ(r->max_id, 777);
  EXPECT_EQ(r->description, "keep me");
  EXPECT_EQ(r->update_time_ms, kNow);
}

TEST(ApplyTagUpdateTest, MaxIdCanNeverBeLowered) {
  auto existing = Tag(5000, 1000);
  auto r = ApplyTagUpdate(existing, "order", Update(std::nullopt, 4999), 1000, kMaxStep, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("max_id"), std::string::npos);

  auto zero = ApplyTagUpdate(existing, "order", Update(std::nullopt, 0), 1000, kMaxStep, kNow);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, Code::kFailedPrecondition);
}

TEST(ApplyTagUpdateTest, MaxIdMayStayOrGrow) {
  auto existing = Tag(5000, 1000);
  auto same = ApplyTagUpdate(existing, "order", Update(std::nullopt, 5000), 1000, kMaxStep, kNow);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->max_id, 5000);
  auto more = ApplyTagUpdate(existing, "order", Update(std::nullopt, 9000), 1000, kMaxStep, kNow);
  ASSERT_TRUE(more);
  EXPECT_EQ(more->max_id, 9000);
}

TEST(ApplyTagUpdateTest, MaxIdOutsideTheIdSpaceIsInvalid) {
  for (int64_t bad : {int64_t{-1}, kMaxSegmentId + 1, INT64_MAX, INT64_MIN}) {
    SCOPED_TRACE(bad);
    auto r = ApplyTagUpdate(std::nullopt, "order", Update(std::nullopt, bad), 1000, kMaxStep, kNow);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  }
}

TEST(ApplyTagUpdateTest, StepMustBeBetweenOneAndMaxStep) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, kMaxStep + 1}) {
    SCOPED_TRACE(bad);
    auto r = ApplyTagUpdate(std::nullopt, "order", Update(bad), 1000, kMaxStep, kNow);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_EQ(r.error().message.rfind("step", 0), 0u) << r.error().message;
  }
  for (int64_t good : {int64_t{1}, kMaxStep}) {
    auto r = ApplyTagUpdate(std::nullopt, "order", Update(good), 1000, kMaxStep, kNow);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->step, good);
  }
}

TEST(ApplyTagUpdateTest, LongDescriptionIsInvalid) {
  auto longest = Update(std::nullopt, std::nullopt, std::string(1024, 'd'));
  EXPECT_TRUE(ApplyTagUpdate(std::nullopt, "order", longest, 1000, kMaxStep, kNow));
  auto too_long = Update(std::nullopt, std::nullopt, std::string(1025, 'd'));
  auto bad = ApplyTagUpdate(std::nullopt, "order", too_long, 1000, kMaxStep, kNow);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
}

TEST(ApplyTagUpdateTest, RecreateAfterDeleteContinuesFromTheOldMaxId) {
  auto deleted = Tag(123456, 77);
  deleted.description = "old life";
  deleted.deleted = true;
  auto r = ApplyTagUpdate(deleted, "order", TagUpdate{}, 1000, kMaxStep, kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->deleted);
  EXPECT_EQ(r->max_id, 123456);
  EXPECT_EQ(r->step, 1000);  // the old life's settings are gone
  EXPECT_EQ(r->description, "");

  auto s = ReserveSegment(*r, 0, kMaxStep, kNow);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->start, 123456);
}

TEST(ApplyTagUpdateTest, RecreateAfterDeleteCannotLowerMaxId) {
  auto deleted = Tag(123456, 77);
  deleted.deleted = true;
  auto r = ApplyTagUpdate(deleted, "order", Update(std::nullopt, 1), 1000, kMaxStep, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
}

TEST(ApplyTagUpdateTest, RecreateAfterDeleteTakesTheNewSettings) {
  auto deleted = Tag(500, 77);
  deleted.deleted = true;
  TagUpdate u = Update(10, 600, "new life");
  auto r = ApplyTagUpdate(deleted, "order", u, 1000, kMaxStep, kNow);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 10);
  EXPECT_EQ(r->max_id, 600);
  EXPECT_EQ(r->description, "new life");
  EXPECT_FALSE(r->deleted);
}

TEST(ApplyTagUpdateTest, FailedUpdateDoesNotTouchTheExistingRecord) {
  const auto existing = Tag(5000, 1000);
  auto copy = existing;
  auto r = ApplyTagUpdate(copy, "order", Update(0, 1), 1000, kMaxStep, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(copy.max_id, existing.max_id);
  EXPECT_EQ(copy.step, existing.step);
}

}  // namespace
}  // namespace kleaf::allocator
