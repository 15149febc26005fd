// TopUpLedger: what counts as ahead of the consumer group, and the deficit a round publishes.
#include "producer/top_up.h"

#include <gtest/gtest.h>

namespace kleaf::producer {
namespace {

TEST(TopUpLedgerTest, EmptyLedgerWantsEverything) {
  TopUpLedger ledger(2);
  EXPECT_EQ(ledger.Ahead(0), 0);
  EXPECT_EQ(ledger.Deficit(0, 4), 4);
  EXPECT_EQ(ledger.Deficit(1, 1), 1);
}

TEST(TopUpLedgerTest, BatchesBelowTheCommittedOffsetAreConsumed) {
  TopUpLedger ledger(2);
  ledger.Observe(0, 10, 0, "a");
  ledger.Observe(0, 11, 1, "b");
  ledger.Observe(0, 12, 0, "c");
  ledger.Observe(3, 5, 0, "d");
  EXPECT_EQ(ledger.Ahead(0), 3);
  EXPECT_EQ(ledger.Ahead(1), 1);
  ledger.SetCommitted(0, -1001);  // no commit yet: everything counts
  EXPECT_EQ(ledger.Ahead(0), 3);
  ledger.SetCommitted(0, 12);  // 10 and 11 consumed; partition 3 untouched
  EXPECT_EQ(ledger.Ahead(0), 2);
  EXPECT_EQ(ledger.Ahead(1), 0);
  EXPECT_EQ(ledger.Deficit(0, 4), 2);
  EXPECT_EQ(ledger.Deficit(1, 4), 4);
  ledger.SetCommitted(3, 6);
  EXPECT_EQ(ledger.Ahead(0), 1);
  ledger.SetCommitted(0, 12);  // the same offset again changes nothing
  EXPECT_EQ(ledger.Ahead(0), 1);
}

TEST(TopUpLedgerTest, PendingBatchCountsOnceBeforeAndAfterItIsReadBack) {
  TopUpLedger ledger(1);
  ledger.AddPending(2, 0, "x", 1000);
  ledger.AddPending(2, 0, "y", 1000);
  EXPECT_EQ(ledger.Ahead(0), 2);
  ledger.Observe(2, 7, 0, "x");  // read back: no longer pending, still ahead
  EXPECT_EQ(ledger.Ahead(0), 2);
  ledger.Observe(2, 8, 0, "z");  // another node's batch of the same stream
  EXPECT_EQ(ledger.Ahead(0), 3);
  ledger.SetCommitted(2, 8);  // x consumed
  EXPECT_EQ(ledger.Ahead(0), 2);
  EXPECT_EQ(ledger.Deficit(0, 2), 0);
}

// Consumers claimed (and moved the log start past) batches this node committed before it read them
// back: they will never be read back, and count as consumed once the consumed offset is past the
// highest offset the round delivered to the partition, not before.
TEST(TopUpLedgerTest, PendingBatchBelowTheConsumedOffsetIsConsumed) {
  TopUpLedger ledger(2);
  ledger.AddPending(0, 0, "a", 1000, 4);
  ledger.AddPending(0, 0, "b", 1000, 4);
  ledger.AddPending(1, 1, "c", 1000, 4);  // another partition: not touched
  ledger.AddPending(0, 0, "d", 1000);     // offset unknown: only read-back or expiry
  EXPECT_EQ(ledger.Ahead(0), 3);
  ledger.SetCommitted(0, 4);  // a batch at 4 may still be ahead
  EXPECT_EQ(ledger.Ahead(0), 3);
  ledger.SetCommitted(0, 5);
  EXPECT_EQ(ledger.Ahead(0), 1);
  EXPECT_EQ(ledger.Ahead(1), 1);
}

TEST(TopUpLedgerTest, PendingBatchThatNeverShowsUpExpires) {
  TopUpLedger ledger(1);
  ledger.AddPending(0, 0, "old", 1000);
  ledger.AddPending(0, 0, "new", 5000);
  ledger.ExpirePending(2000);
  EXPECT_EQ(ledger.Ahead(0), 1);
  ledger.Observe(0, 1, 0, "old");  // a late read-back of the expired one counts again, once
  EXPECT_EQ(ledger.Ahead(0), 2);
  ledger.Observe(0, 2, 0, "new");
  EXPECT_EQ(ledger.Ahead(0), 2);
}

}  // namespace
}  // namespace kleaf::producer
