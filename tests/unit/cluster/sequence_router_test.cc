// The gateway's sequence router (cluster/sequence_router.h) over a fake PartitionCaller whose
// requests each test answers by hand, in the order it chooses: a call's keys split by partition and
// their values put back in its order, the keys of a busy lane coalesced into its next request,
// failures kept to the calls whose keys they concern, and space records read once and kept.
#include "cluster/sequence_router.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "allocator/sequences.h"

namespace kleaf::cluster {
namespace {

namespace op = allocator::op;
using allocator::Callback;
using allocator::SectionRouteKey;
using Values = std::vector<uint64_t>;

constexpr int64_t kNow = 1'800'000'000'000;
// Where the fake puts a space's record, and over how many partitions it spreads sections.
constexpr int32_t kSpacePartition = 3;
constexpr int32_t kSectionPartitions = 3;

// Space "s": keys 0-9 are section 0, 10-19 section 1, ...; section n is on partition n % 3.
state::SpaceRecord Space(int64_t step = 5) {
  state::SpaceRecord r;
  r.space = "s";
  r.section_size = 10;
  r.step = step;
  return r;
}

template <typename Op>
struct Sent {
  int32_t partition;
  std::string route_key;
  Op op;
  Callback<typename Op::Result> done;
};

// Keeps every request until the test answers it (Answer). A route key without '#' (a space's
// name) is on kSpacePartition, section n of any space ("<space>#<n>") on n % kSectionPartitions.
class FakeCaller final : public PartitionCaller {
 public:
  int32_t PartitionOf(std::string_view route_key) const override {
    const size_t hash = route_key.find('#');
    if (hash == std::string_view::npos) return kSpacePartition;
    return static_cast<int32_t>(std::stoull(std::string(route_key.substr(hash + 1))) %
                                kSectionPartitions);
  }
  void Call(int32_t partition, std::string route_key, op::GetSpace get,
            Callback<state::SpaceRecord> done) override {
    gets.push_back({partition, std::move(route_key), std::move(get), std::move(done)});
  }
  void Call(int32_t partition, std::string route_key, op::NextSeq next,
            Callback<Values> done) override {
    nexts.push_back({partition, std::move(route_key), std::move(next), std::move(done)});
  }
  void Call(int32_t partition, std::string route_key, op::CurrentSeq current,
            Callback<uint64_t> done) override {
    currents.push_back({partition, std::move(route_key), std::move(current), std::move(done)});
  }

  std::vector<Sent<op::GetSpace>> gets;
  std::vector<Sent<op::NextSeq>> nexts;
  std::vector<Sent<op::CurrentSeq>> currents;
};

// Answers request `i` of `sent`. Its callback may send more requests, growing `sent`, so the
// callback is moved out of it first.
template <typename Op>
void Answer(std::vector<Sent<Op>>& sent, size_t i, Result<typename Op::Result> r) {
  ASSERT_LT(i, sent.size());
  ASSERT_TRUE(sent[i].done) << "request " << i << " answered twice";
  auto done = std::move(sent[i].done);
  sent[i].done = nullptr;
  done(std::move(r));
}

// What a caller of the router got, if anything yet.
template <typename T>
struct Answered {
  std::optional<Result<T>> result;
  Callback<T> Done() {
    return [this](Result<T> r) {
      EXPECT_FALSE(result.has_value()) << "answered twice";
      result = std::move(r);
    };
  }
  // The values, or an empty T when there is none (the failed expectation says why).
  T Value() const {
    if (!result) {
      ADD_FAILURE() << "not answered";
      return T{};
    }
    if (!*result) {
      ADD_FAILURE() << "failed: " << result->error().message;
      return T{};
    }
    return **result;
  }
};

class SequenceRouterTest : public ::testing::Test {
 protected:
  FakeCaller caller_;
  ManualClock clock_{kNow};
  SequenceRouter router_{caller_, clock_};
};

TEST_F(SequenceRouterTest, AFanOutGoesToEachPartitionOnceAndComesBackInTheCallersOrder) {
  Answered<Values> got;
  // Sections 1, 0, 2, 1, 0, 3: partitions 1, 0, 2, 1, 0, 0. The caller's shape is not the space's.
  router_.Route(op::NextSeq{"s", {15, 3, 27, 11, 4, 33}, op::SpaceShape{999, 1}}, got.Done());
  ASSERT_EQ(caller_.gets.size(), 1u);
  EXPECT_TRUE(caller_.nexts.empty()) << "sent before the space's record was read";
  Answer(caller_.gets, 0, Space());

  ASSERT_EQ(caller_.nexts.size(), 3u);
  struct Want {
    int32_t partition;
    std::string route_key;  // of the request's first key's section
    Values keys;            // in the caller's order
  };
  const Want want[] = {{0, SectionRouteKey("s", 0), {3, 4, 33}},
                       {1, SectionRouteKey("s", 1), {15, 11}},
                       {2, SectionRouteKey("s", 2), {27}}};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const auto& sent = caller_.nexts[i];
    EXPECT_EQ(sent.partition, want[i].partition);
    EXPECT_EQ(sent.route_key, want[i].route_key);
    EXPECT_EQ(sent.op.space, "s");
    EXPECT_EQ(sent.op.keys, want[i].keys);
    ASSERT_TRUE(sent.op.shape.has_value());
    EXPECT_EQ(sent.op.shape->section_size, 10);
    EXPECT_EQ(sent.op.shape->step, 5);
  }

  // Answered in another order than sent: the call completes with the last of them.
  Answer(caller_.nexts, 1, Values{150, 110});
  Answer(caller_.nexts, 2, Values{270});
  EXPECT_FALSE(got.result.has_value());
  Answer(caller_.nexts, 0, Values{30, 40, 330});
  EXPECT_EQ(got.Value(), (Values{150, 30, 270, 110, 40, 330}));
}

TEST_F(SequenceRouterTest, KeysArrivingWhileALaneIsBusyTravelTogetherInItsNextRequest) {
  static_assert(SequenceRouter::kSeqInFlight == 2, "the lane below fills with two requests");
  router_.KeepSpace("s", Space());
  Answered<Values> a, b, c, d, e, f;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  router_.Route(op::NextSeq{"s", {2}}, b.Done());
  ASSERT_EQ(caller_.nexts.size(), 2u);
  // Lane (s, 0) is full: these wait.
  router_.Route(op::NextSeq{"s", {3, 4, 3}}, c.Done());
  router_.Route(op::NextSeq{"s", {5}}, d.Done());
  EXPECT_EQ(caller_.nexts.size(), 2u);
  // Another partition is another lane.
  router_.Route(op::NextSeq{"s", {12}}, e.Done());
  ASSERT_EQ(caller_.nexts.size(), 3u);
  EXPECT_EQ(caller_.nexts[2].partition, 1);
  EXPECT_TRUE(caller_.gets.empty()) << "the kept record was read again";

  Answer(caller_.nexts, 1, Values{20});
  EXPECT_EQ(b.Value(), Values{20});
  ASSERT_EQ(caller_.nexts.size(), 4u);
  const auto& batch = caller_.nexts[3];
  EXPECT_EQ(batch.partition, 0);
  EXPECT_EQ(batch.route_key, SectionRouteKey("s", 0));
  EXPECT_EQ(batch.op.keys, (Values{3, 4, 3, 5}));
  Answer(caller_.nexts, 3, Values{30, 40, 31, 50});
  EXPECT_EQ(c.Value(), (Values{30, 40, 31}));
  EXPECT_EQ(d.Value(), Values{50});

  Answer(caller_.nexts, 0, Values{10});
  EXPECT_EQ(a.Value(), Values{10});
  Answer(caller_.nexts, 2, Values{120});
  EXPECT_EQ(e.Value(), Values{120});
  // Nothing in flight: the next call goes at once, alone.
  router_.Route(op::NextSeq{"s", {6}}, f.Done());
  ASSERT_EQ(caller_.nexts.size(), 5u);
  EXPECT_EQ(caller_.nexts[4].op.keys, Values{6});
}

TEST_F(SequenceRouterTest, WaitingKeysBeyondOneRequestsLimitGoInTheRequestsAfter) {
  router_.KeepSpace("s", Space());
  Answered<Values> a, b, c, d;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  router_.Route(op::NextSeq{"s", {2}}, b.Done());
  const size_t n = allocator::kMaxSeqKeys / 2 + 1;
  router_.Route(op::NextSeq{"s", Values(n, 3)}, c.Done());
  router_.Route(op::NextSeq{"s", Values(n, 4)}, d.Done());
  ASSERT_EQ(caller_.nexts.size(), 2u);
  Answer(caller_.nexts, 0, Values{10});
  ASSERT_EQ(caller_.nexts.size(), 3u);
  EXPECT_EQ(caller_.nexts[2].op.keys, Values(n, 3));
  Answer(caller_.nexts, 1, Values{20});
  ASSERT_EQ(caller_.nexts.size(), 4u);
  EXPECT_EQ(caller_.nexts[3].op.keys, Values(n, 4));
}

TEST_F(SequenceRouterTest, AFailedRequestFailsTheCallsWithKeysInItAndNoOther) {
  router_.KeepSpace("s", Space());
  Answered<Values> both, on1, waiting1, waiting2, on0;
  router_.Route(op::NextSeq{"s", {1, 11}}, both.Done());  // [0] on 0, [1] on 1
  router_.Route(op::NextSeq{"s", {12}}, on1.Done());      // [2] on 1: lane (s, 1) is full
  router_.Route(op::NextSeq{"s", {13}}, waiting1.Done());
  router_.Route(op::NextSeq{"s", {14, 15}}, waiting2.Done());
  router_.Route(op::NextSeq{"s", {2}}, on0.Done());  // [3] on 0
  ASSERT_EQ(caller_.nexts.size(), 4u);

  const std::string down = "no answer from the allocators (Kafka down or partition moving); retry";
  Answer(caller_.nexts, 1, Fail(Code::kUnavailable, down));
  EXPECT_FALSE(both.result.has_value()) << "answered before its other partition";
  ASSERT_EQ(caller_.nexts.size(), 5u);  // [4]: the waiting keys
  EXPECT_EQ(caller_.nexts[4].op.keys, (Values{13, 14, 15}));
  Answer(caller_.nexts, 0, Values{10});
  ASSERT_TRUE(both.result.has_value());
  ASSERT_FALSE(both.result->has_value());
  EXPECT_EQ(both.result->error().code, Code::kUnavailable);
  EXPECT_EQ(both.result->error().message, down);

  Answer(caller_.nexts, 2, Values{120});
  EXPECT_EQ(on1.Value(), Values{120});

  const std::string refused = "space 's': section 1 was written with another section_size";
  Answer(caller_.nexts, 4, Fail(Code::kFailedPrecondition, refused));
  for (const auto* w : {&waiting1, &waiting2}) {
    ASSERT_TRUE(w->result.has_value());
    ASSERT_FALSE(w->result->has_value());
    EXPECT_EQ(w->result->error().code, Code::kFailedPrecondition);
    EXPECT_EQ(w->result->error().message, refused);
  }

  Answer(caller_.nexts, 3, Values{20});
  EXPECT_EQ(on0.Value(), Values{20});
}

TEST_F(SequenceRouterTest, AnAnswerWithTooFewValuesFailsEveryCallInTheRequest) {
  router_.KeepSpace("s", Space());
  Answered<Values> a, b, c, d;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  router_.Route(op::NextSeq{"s", {2}}, b.Done());
  router_.Route(op::NextSeq{"s", {3}}, c.Done());
  router_.Route(op::NextSeq{"s", {4}}, d.Done());
  Answer(caller_.nexts, 0, Values{10});
  ASSERT_EQ(caller_.nexts.size(), 3u);
  Answer(caller_.nexts, 2, Values{30});
  for (const auto* w : {&c, &d}) {
    ASSERT_TRUE(w->result.has_value());
    ASSERT_FALSE(w->result->has_value());
    EXPECT_EQ(w->result->error().code, Code::kInternal);
    EXPECT_EQ(w->result->error().message, "the allocator answered 1 values for 2 keys");
  }
  EXPECT_EQ(a.Value(), Values{10});
}

TEST_F(SequenceRouterTest, ASpaceIsReadOnceForConcurrentCallsAndKeptForAWhile) {
  Answered<Values> a, b, d, e, f, g;
  Answered<uint64_t> c;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  router_.Route(op::NextSeq{"s", {11}}, b.Done());
  router_.Route(op::CurrentSeq{"s", 21}, c.Done());
  ASSERT_EQ(caller_.gets.size(), 1u);
  EXPECT_EQ(caller_.gets[0].partition, kSpacePartition);
  EXPECT_EQ(caller_.gets[0].route_key, "s");
  EXPECT_EQ(caller_.gets[0].op.space, "s");
  EXPECT_TRUE(caller_.nexts.empty());
  EXPECT_TRUE(caller_.currents.empty());

  Answer(caller_.gets, 0, Space());
  EXPECT_EQ(caller_.nexts.size(), 2u);
  ASSERT_EQ(caller_.currents.size(), 1u);
  const auto& current = caller_.currents[0];
  EXPECT_EQ(current.partition, 2);
  EXPECT_EQ(current.route_key, SectionRouteKey("s", 2));
  EXPECT_EQ(current.op.space, "s");
  EXPECT_EQ(current.op.key, 21u);
  EXPECT_EQ(current.op.section_size, 10);
  Answer(caller_.currents, 0, uint64_t{7});
  EXPECT_EQ(c.Value(), 7u);

  // Kept for kSpaceFreshNs.
  clock_.Advance(std::chrono::nanoseconds(SequenceRouter::kSpaceFreshNs - 1));
  router_.Route(op::NextSeq{"s", {2}}, d.Done());
  EXPECT_EQ(caller_.gets.size(), 1u);
  EXPECT_EQ(caller_.nexts.size(), 3u);

  // Then read again once, while the kept record serves.
  clock_.Advance(std::chrono::nanoseconds(1));
  router_.Route(op::NextSeq{"s", {21}}, e.Done());
  router_.Route(op::NextSeq{"s", {22}}, f.Done());
  EXPECT_EQ(caller_.gets.size(), 2u);
  ASSERT_EQ(caller_.nexts.size(), 5u);
  EXPECT_EQ(caller_.nexts[4].op.shape->step, 5);

  // What it read is what the next request carries.
  Answer(caller_.gets, 1, Space(/*step=*/7));
  router_.Route(op::NextSeq{"s", {12}}, g.Done());
  EXPECT_EQ(caller_.gets.size(), 2u);
  ASSERT_EQ(caller_.nexts.size(), 6u);
  EXPECT_EQ(caller_.nexts[5].op.shape->step, 7);
}

TEST_F(SequenceRouterTest, AFailedReadIsAnsweredAndNotKept) {
  Answered<Values> a, b;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  Answer(caller_.gets, 0, Fail(Code::kUnavailable, "no answer"));
  ASSERT_TRUE(a.result.has_value());
  ASSERT_FALSE(a.result->has_value());
  EXPECT_EQ(a.result->error().code, Code::kUnavailable);
  EXPECT_TRUE(caller_.nexts.empty());
  router_.Route(op::NextSeq{"s", {1}}, b.Done());
  EXPECT_EQ(caller_.gets.size(), 2u);
}

TEST_F(SequenceRouterTest, ASpaceNotFoundIsAnsweredAndForgotten) {
  const std::string missing = "space 's' not found";
  Answered<Values> a, c, d, e, f, g;
  Answered<uint64_t> b;
  router_.Route(op::NextSeq{"s", {1}}, a.Done());
  router_.Route(op::CurrentSeq{"s", 1}, b.Done());
  ASSERT_EQ(caller_.gets.size(), 1u);
  Answer(caller_.gets, 0, Fail(Code::kNotFound, missing));
  ASSERT_TRUE(a.result.has_value() && b.result.has_value());
  ASSERT_FALSE(a.result->has_value());
  EXPECT_EQ(a.result->error().code, Code::kNotFound);
  EXPECT_EQ(a.result->error().message, missing);
  ASSERT_FALSE(b.result->has_value());
  EXPECT_EQ(b.result->error().code, Code::kNotFound);
  EXPECT_TRUE(caller_.nexts.empty());
  EXPECT_TRUE(caller_.currents.empty());

  // Nothing kept of it: the next call reads it again (and this time it exists).
  router_.Route(op::NextSeq{"s", {1}}, c.Done());
  ASSERT_EQ(caller_.gets.size(), 2u);
  Answer(caller_.gets, 1, Space());
  EXPECT_EQ(caller_.nexts.size(), 1u);

  // A kept record read again and not found is dropped: the call after reads it again.
  clock_.Advance(std::chrono::nanoseconds(SequenceRouter::kSpaceFreshNs));
  router_.Route(op::NextSeq{"s", {11}}, d.Done());
  EXPECT_EQ(caller_.nexts.size(), 2u);
  ASSERT_EQ(caller_.gets.size(), 3u);
  Answer(caller_.gets, 2, Fail(Code::kNotFound, missing));
  router_.Route(op::NextSeq{"s", {21}}, e.Done());
  ASSERT_EQ(caller_.gets.size(), 4u);
  EXPECT_EQ(caller_.nexts.size(), 2u);
  Answer(caller_.gets, 3, Fail(Code::kNotFound, missing));
  ASSERT_TRUE(e.result.has_value());
  ASSERT_FALSE(e.result->has_value());
  EXPECT_EQ(e.result->error().code, Code::kNotFound);

  // What a DeleteSpace answered here does: KeepSpace(nullopt).
  router_.KeepSpace("s", Space());
  router_.Route(op::NextSeq{"s", {31}}, f.Done());
  EXPECT_EQ(caller_.gets.size(), 4u);
  router_.KeepSpace("s", std::nullopt);
  router_.Route(op::NextSeq{"s", {31}}, g.Done());
  EXPECT_EQ(caller_.gets.size(), 5u);
}

TEST_F(SequenceRouterTest, AWrongNumberOfKeysIsRefusedBeforeAnythingIsSent) {
  Answered<Values> none, many;
  router_.Route(op::NextSeq{"s", {}}, none.Done());
  router_.Route(op::NextSeq{"s", Values(allocator::kMaxSeqKeys + 1, 1)}, many.Done());
  for (const auto* w : {&none, &many}) {
    ASSERT_TRUE(w->result.has_value());
    ASSERT_FALSE(w->result->has_value());
    EXPECT_EQ(w->result->error().code, Code::kInvalidArgument);
  }
  EXPECT_TRUE(caller_.gets.empty());
  EXPECT_TRUE(caller_.nexts.empty());
}

}  // namespace
}  // namespace kleaf::cluster
