// R3's order and merge of lease records and R4's table (docs/architecture.md, "I5 with a lease").
#include "allocator/lease.h"

#include <gtest/gtest.h>

namespace kleaf::allocator {
namespace {

using state::LeaseRecord;
using state::LeaseState;

FoundLease At(uint64_t generation, int64_t offset, int64_t lease_ms = 5000,
              LeaseState s = LeaseState::kHeld, std::string holder = "h-other",
              bool waited = true) {
  return FoundLease{LeaseRecord{generation, std::move(holder), "node-1", lease_ms, waited, s},
                    offset, 0};
}

TEST(LeaseRecordOrderTest, TheHigherGenerationIsNewerWhateverItsOffset) {
  // A fenced producer's append (generation 3) lands after the records of the owner that fenced
  // it (generation 4): offset alone would take it as the newest.
  EXPECT_TRUE(IsNewer(At(4, 10), At(3, 11)));
  EXPECT_FALSE(IsNewer(At(3, 11), At(4, 10)));
  EXPECT_TRUE(IsNewer(At(4, 11), At(4, 10)));
  EXPECT_FALSE(IsNewer(At(4, 10), At(4, 10)));
}

TEST(LeaseRecordOrderTest, AMergeKeepsTheNewestWithTheLargestLeaseOfItsGeneration) {
  std::optional<FoundLease> kept;
  kept = MergeLease(kept, At(2, 5, 60000));
  kept = MergeLease(kept, At(3, 6, 20000));  // a new generation: 2's 60 s no longer counts
  EXPECT_EQ(kept->record.generation, 3u);
  EXPECT_EQ(kept->generation_lease_ms, 20000);
  kept = MergeLease(kept, At(3, 7, 5000));  // the same generation, later, shorter
  EXPECT_EQ(kept->offset, 7);
  EXPECT_EQ(kept->record.lease_ms, 5000);
  EXPECT_EQ(kept->generation_lease_ms, 20000) << "a longer lease of the generation is carried";
  kept = MergeLease(kept, At(2, 8, 90000));  // an older generation appended later (A3)
  EXPECT_EQ(kept->record.generation, 3u);
  EXPECT_EQ(kept->offset, 7);
  EXPECT_EQ(kept->generation_lease_ms, 20000);
  // The store's copy (lower offset, same generation) still lends its carried maximum.
  FoundLease copy = At(3, 2, 5000);
  copy.generation_lease_ms = 45000;
  kept = MergeLease(kept, copy);
  EXPECT_EQ(kept->offset, 7);
  EXPECT_EQ(kept->generation_lease_ms, 45000);
  // And the other way round: the copy is kept, the log's record is older.
  auto from_copy = MergeLease(std::optional<FoundLease>(copy), At(2, 9, 90000));
  EXPECT_EQ(from_copy.offset, 2);
  EXPECT_EQ(from_copy.generation_lease_ms, 45000);
}

TEST(LeaseRecordOrderTest, ALowerGenerationAfterAHigherOneGoesBack) {
  const FoundLease kept = At(4, 10);
  EXPECT_TRUE(GoesBack(kept, At(3, 11).record));
  EXPECT_FALSE(GoesBack(kept, At(4, 11).record));
  EXPECT_FALSE(GoesBack(kept, At(5, 11).record));
}

// No lease record after a restore whose store copy is complete: none was ever committed, so no
// owner held a lease. The own L was only a margin for a recreated state topic, which CheckLayout
// refuses (its identity is recorded), and it would cost every takeover of a cluster whose nodes
// hold no lease L of unavailable sequences.
TEST(TakeoverWaitTest, NoRecordWaitsOnlyTheMargin) {
  const TakeoverWait w = PlanTakeoverWait(std::nullopt, "h-me", std::nullopt, 5000);
  EXPECT_EQ(w.row, WaitRow::kNone);
  EXPECT_EQ(w.lease_w_ms, 0);
  EXPECT_EQ(w.generation, 1u);
  EXPECT_STREQ(WaitRowName(w.row), "none");
}

TEST(TakeoverWaitTest, AReleasedRecordNeedsNoWait) {
  const TakeoverWait w =
      PlanTakeoverWait(At(7, 40, 60000, LeaseState::kReleased), "h-me", std::nullopt, 5000);
  EXPECT_EQ(w.row, WaitRow::kReleased);
  EXPECT_EQ(w.lease_w_ms, 0);
  EXPECT_EQ(w.generation, 8u);
}

TEST(TakeoverWaitTest, ARetakeSkipsOnlyItsOwnFinishedCommittedLease) {
  const FoundLease mine = At(7, 40, 5000, LeaseState::kHeld, "h-me");
  const HeldBefore done{7, true, true};
  TakeoverWait w = PlanTakeoverWait(mine, "h-me", done, 5000);
  EXPECT_EQ(w.row, WaitRow::kOwn);
  EXPECT_EQ(w.lease_w_ms, 0);
  EXPECT_EQ(w.generation, 8u);

  // Each condition of the third row missing sends it to the last row, with the full wait.
  const std::pair<const char*, TakeoverWait> others[] = {
      {"another process's record", PlanTakeoverWait(mine, "h-new", done, 5000)},
      {"a restarted process", PlanTakeoverWait(mine, "h-me", std::nullopt, 5000)},
      {"another generation", PlanTakeoverWait(mine, "h-me", HeldBefore{6, true, true}, 5000)},
      {"no held record committed",
       PlanTakeoverWait(mine, "h-me", HeldBefore{7, false, true}, 5000)},
      {"released during its own wait",
       PlanTakeoverWait(mine, "h-me", HeldBefore{7, true, false}, 5000)},
      {"no token", PlanTakeoverWait(At(7, 40, 5000, LeaseState::kHeld, ""), "", done, 5000)},
  };
  for (const auto& [what, other] : others) {
    EXPECT_EQ(other.row, WaitRow::kOther) << what;
    EXPECT_EQ(other.lease_w_ms, 5000) << what;
  }
}

TEST(TakeoverWaitTest, AnyOtherRecordWaitsTheLongestLeaseOfItsGeneration) {
  FoundLease held = At(3, 12, 20000);
  held.generation_lease_ms = 45000;  // a record of the generation, since compacted, had 45 s
  TakeoverWait w = PlanTakeoverWait(held, "h-me", std::nullopt, 5000);
  EXPECT_EQ(w.row, WaitRow::kOther);
  EXPECT_EQ(w.lease_w_ms, 45000);
  EXPECT_EQ(w.generation, 4u);
  // The own L when it is longer.
  EXPECT_EQ(PlanTakeoverWait(At(3, 12, 1000), "h-me", std::nullopt, 5000).lease_w_ms, 5000);
}

TEST(TakeoverWaitTest, RecordsWrittenDuringTheWaitCarryTheLeaseWaitedOut) {
  const TakeoverWait w{WaitRow::kOther, 45000, 4};
  EXPECT_EQ(RecordLeaseMs(5000, w, /*wait_over=*/false), 45000);
  EXPECT_EQ(RecordLeaseMs(5000, w, /*wait_over=*/true), 5000);
  EXPECT_EQ(RecordLeaseMs(60000, w, /*wait_over=*/false), 60000);
}

TEST(LeaseRecordCodecTest, ARecordSurvivesItsEncodingAndCorruptOnesAreRefused) {
  const LeaseRecord r{18'000'000'000'000'000'000u, "c0ffee", "alloc-2", 45000, false,
                      LeaseState::kReleased};
  auto back = state::DecodeLease(state::EncodeLease(r));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->generation, r.generation);
  EXPECT_EQ(back->holder, "c0ffee");
  EXPECT_EQ(back->node, "alloc-2");
  EXPECT_EQ(back->lease_ms, 45000);
  EXPECT_FALSE(back->waited);
  EXPECT_EQ(back->state, LeaseState::kReleased);
  EXPECT_EQ(state::LeaseKey(11), "lse/11");
  EXPECT_TRUE(state::IsLeaseKey("lse/11"));
  EXPECT_FALSE(state::IsLeaseKey("requests_offset/11"));

  for (const char* bad : {
           "",
           "[]",
           R"({"generation":0,"holder":"h","lease_ms":5,"waited":true,"state":"held"})",
           R"({"generation":-1,"holder":"h","lease_ms":5,"waited":true,"state":"held"})",
           R"({"generation":1.5,"holder":"h","lease_ms":5,"waited":true,"state":"held"})",
           R"({"generation":1,"holder":"h","lease_ms":-5,"waited":true,"state":"held"})",
           R"({"generation":1,"holder":"h","lease_ms":5,"waited":true,"state":"gone"})",
           R"({"generation":1,"lease_ms":5,"waited":true,"state":"held"})",
       }) {
    auto refused = state::DecodeLease(bad);
    ASSERT_FALSE(refused.has_value()) << bad;
    EXPECT_EQ(refused.error().code, Code::kInternal) << bad;
  }
}

// Readings built by hand: every clock at `ms`, the wall clock `wall_off_ms` apart, `suspended_ms`
// added to the boot clock.
LeaseReading ReadingAt(int64_t ms, int64_t wall_off_ms = 0, int64_t suspended_ms = 0) {
  constexpr int64_t kMs = 1'000'000;
  return LeaseReading{ms * kMs, (ms + suspended_ms) * kMs, ms * kMs,
                      (ms + suspended_ms + wall_off_ms) * kMs, 0};
}

const LeaseTiming kTiming{3000, 1000, 100};  // the hold limit: 3000·0.999 − 100 = 2897 ms

TEST(PartitionLeaseTest, OnlyACommittedHeldRecordThatReachedTheCoordinatorBeginsALease) {
  PartitionLease lease(4);
  EXPECT_EQ(lease.Check(ReadingAt(0), kTiming), PartitionLease::Verdict::kNoLease);
  // A batch without a `held` record renews nothing and begins nothing.
  uint64_t n = lease.NoteBegin();
  EXPECT_EQ(lease.OnCommitEnded(n, ReadingAt(10), true, true, false),
            PartitionLease::Effect::kNone);
  // Aborted, or never sent to the coordinator (no record of its own delivered), or no reading.
  EXPECT_EQ(lease.OnCommitEnded(n, ReadingAt(10), false, true, true),
            PartitionLease::Effect::kNone);
  EXPECT_EQ(lease.OnCommitEnded(n, ReadingAt(10), true, false, true),
            PartitionLease::Effect::kNone);
  EXPECT_FALSE(lease.HeldCommitted());
  EXPECT_EQ(lease.OnCommitEnded(n, std::nullopt, true, true, true), PartitionLease::Effect::kNone);
  EXPECT_TRUE(lease.HeldCommitted()) << "the record is in the log: the next owner waits for it";
  EXPECT_FALSE(lease.Held());
  EXPECT_EQ(lease.OnCommitEnded(n, ReadingAt(20), true, true, true),
            PartitionLease::Effect::kBegan);
  EXPECT_EQ(lease.Check(ReadingAt(20 + 2896), kTiming), PartitionLease::Verdict::kHeld);
  EXPECT_EQ(lease.Check(ReadingAt(20 + 2897), kTiming), PartitionLease::Verdict::kExpired);
  EXPECT_EQ(*lease.AgeNs(ReadingAt(520)), 500'000'000);
}

TEST(PartitionLeaseTest, AnyCommittedTransactionRenewsFromTheReadingBeforeItsCommit) {
  PartitionLease lease(1);
  ASSERT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(0), true, true, true),
            PartitionLease::Effect::kBegan);
  // A batch of segment requests, without a lease record.
  EXPECT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(2000), true, true, false),
            PartitionLease::Effect::kRenewed);
  EXPECT_EQ(lease.Check(ReadingAt(4000), kTiming), PartitionLease::Verdict::kHeld);
  // A commit that returned late renews from its reading, not from its return: already old.
  EXPECT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(1000), true, true, false),
            PartitionLease::Effect::kRenewed);
  EXPECT_EQ(lease.Check(ReadingAt(2000 + 2897), kTiming), PartitionLease::Verdict::kExpired)
      << "an older reading moved the anchor back";
}

TEST(PartitionLeaseTest, ATransactionOpenAtAMarkBeginsAndRenewsNothing) {
  PartitionLease lease(2);
  ASSERT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(0), true, true, true),
            PartitionLease::Effect::kBegan);
  // Open when p was released (R5) or its lease dropped (R9); its reading comes after the mark.
  const uint64_t open = lease.NoteBegin();
  EXPECT_TRUE(lease.Mark());
  EXPECT_FALSE(lease.Held());
  EXPECT_EQ(lease.OnCommitEnded(open, ReadingAt(100), true, true, true),
            PartitionLease::Effect::kNone);
  EXPECT_EQ(lease.Check(ReadingAt(100), kTiming), PartitionLease::Verdict::kNoLease);
  // Begun after the mark but without a `held` record: there is nothing to renew.
  EXPECT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(200), true, true, false),
            PartitionLease::Effect::kNone);
  EXPECT_FALSE(lease.Mark()) << "no lease was held";
  // A `held` record in a transaction begun after the mark begins it again.
  EXPECT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(300), true, true, true),
            PartitionLease::Effect::kBegan);
}

TEST(PartitionLeaseTest, AForwardWallStepOrASuspendSinceTheAnchorEndsTheLease) {
  PartitionLease lease(3);
  ASSERT_EQ(lease.OnCommitEnded(lease.NoteBegin(), ReadingAt(0), true, true, true),
            PartitionLease::Effect::kBegan);
  EXPECT_EQ(lease.Check(ReadingAt(100, -50), kTiming), PartitionLease::Verdict::kHeld)
      << "a backward step ends nothing";
  EXPECT_EQ(lease.Check(ReadingAt(100, 11), kTiming), PartitionLease::Verdict::kClockEvent);
  EXPECT_EQ(lease.Check(ReadingAt(100, 0, 3), kTiming), PartitionLease::Verdict::kClockEvent);
  EXPECT_TRUE(lease.EventsSinceAnchor(ReadingAt(100, 0, 3)).suspend);
}

}  // namespace
}  // namespace kleaf::allocator
