// The worker-id registry's rules (docs/architecture.md, "Worker-id registry (I3 in the cluster)"):
// one holder per id, ids come back to their node, recycled ids start after everything their
// previous holder could have issued.
#include "allocator/workers.h"

#include <gtest/gtest.h>

namespace kleaf::allocator {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
const WorkerRules kRules{.max_worker_id = 3, .lease_ttl_ms = 30000, .max_clock_skew_ms = 1000};

TEST(WorkersTest, FirstClaimsGetTheLowestUnusedIds) {
  std::vector<WorkerRecord> records;
  for (int i = 0; i < 4; ++i) {
    auto g = ClaimWorker(records, Claimant{"n" + std::to_string(i)}, kNow, kNow, kRules);
    ASSERT_TRUE(g.has_value()) << g.error().message;
    EXPECT_EQ(g->record.worker_id, i);
    EXPECT_EQ(g->record.lease_until_ms, kNow + 30000);
    EXPECT_EQ(g->not_before_ms, 0);
    records.push_back(g->record);
  }
}

TEST(WorkersTest, ExhaustedSpaceIsAClearError) {
  std::vector<WorkerRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back({i, "n" + std::to_string(i), kNow + 1000, kNow});
  auto g = ClaimWorker(records, Claimant{"late"}, kNow, kNow, kRules);
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code, Code::kResourceExhausted);
  EXPECT_NE(g.error().message.find("all 4 snowflake worker ids are leased"), std::string::npos);
  auto counts = CountWorkers(records, kNow, kRules);
  EXPECT_EQ(counts.leased, 4);
  EXPECT_EQ(counts.free, 0);
}

TEST(WorkersTest, SameNodeGetsItsIdBackEvenWhileItsLeaseRuns) {
  std::vector<WorkerRecord> records = {{0, "a", kNow + 20000, kNow - 5}, {1, "b", kNow + 20000, kNow}};
  auto g = ClaimWorker(records, Claimant{"b"}, kNow, kNow, kRules);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->record.worker_id, 1);
  // Its earlier life may have crashed (local mark lost) after issuing past its last report, with
  // a clock up to max_clock_skew ahead of ours: the new life starts after that.
  EXPECT_EQ(g->not_before_ms, kNow + 1000);
  // Released (lease ended at its last timestamp): no wait beyond that timestamp.
  records[1].lease_until_ms = kNow - 50;
  records[1].last_timestamp_ms = kNow - 50;
  EXPECT_EQ(ClaimWorker(records, Claimant{"b"}, kNow, kNow, kRules)->not_before_ms, kNow - 50);
}

TEST(WorkersTest, RecycledIdStartsAfterThePreviousHoldersTimestampAndLease) {
  // Every id used; id 2's lease expired 1 s ago, and its holder reported a timestamp before that.
  std::vector<WorkerRecord> records = {{0, "a", kNow + 5000, 0},
                                       {1, "b", kNow + 5000, 0},
                                       {2, "dead", kNow - 1000, kNow - 4000},
                                       {3, "c", kNow + 5000, 0}};
  auto g = ClaimWorker(records, Claimant{"new"}, kNow, kNow, kRules);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->record.worker_id, 2);
  EXPECT_EQ(g->not_before_ms, kNow - 1000) << "the later of lease end and last timestamp";
  EXPECT_EQ(g->record.node_id, "new");
  // A holder whose reported timestamp is after its lease end (clock ahead) pushes not_before too.
  records[2].last_timestamp_ms = kNow - 10;
  EXPECT_EQ(ClaimWorker(records, Claimant{"new"}, kNow, kNow, kRules)->not_before_ms, kNow - 10);
}

TEST(WorkersTest, NeverUsedIdsComeBeforeExpiredOnes) {
  std::vector<WorkerRecord> records = {{0, "dead", kNow - 1000, kNow - 2000}};
  auto g = ClaimWorker(records, Claimant{"new"}, kNow, kNow, kRules);
  EXPECT_EQ(g->record.worker_id, 1);
}

TEST(WorkersTest, ClaimFromAClockTooFarOffIsRefusedSayingSo) {
  auto ahead = ClaimWorker({}, Claimant{"n"}, kNow + 1500, kNow, kRules);
  ASSERT_FALSE(ahead.has_value());
  EXPECT_EQ(ahead.error().code, Code::kFailedPrecondition);
  EXPECT_NE(ahead.error().message.find("clock differs"), std::string::npos);
  EXPECT_FALSE(ClaimWorker({}, Claimant{"n"}, kNow - 1500, kNow, kRules).has_value());
  EXPECT_TRUE(ClaimWorker({}, Claimant{"n"}, kNow + 900, kNow, kRules).has_value());
}

TEST(WorkersTest, RenewExtendsAndKeepsTheNewestTimestamp) {
  WorkerRecord r{1, "n", kNow + 1000, kNow - 100};
  auto renewed = RenewWorker(r, 1, Claimant{"n"}, kNow, kNow + 10, kRules);
  ASSERT_TRUE(renewed.has_value());
  EXPECT_EQ(renewed->lease_until_ms, kNow + 10 + 30000);
  EXPECT_EQ(renewed->last_timestamp_ms, kNow);
  auto stale = RenewWorker(*renewed, 1, Claimant{"n"}, kNow - 500, kNow + 20, kRules);
  EXPECT_EQ(stale->last_timestamp_ms, kNow) << "a timestamp never goes back";
}

TEST(WorkersTest, RenewByAnotherNodeFails) {
  WorkerRecord r{1, "taker", kNow + 1000, kNow};
  auto renewed = RenewWorker(r, 1, Claimant{"old"}, kNow, kNow, kRules);
  ASSERT_FALSE(renewed.has_value());
  EXPECT_EQ(renewed.error().code, Code::kFailedPrecondition);
  EXPECT_FALSE(RenewWorker(std::nullopt, 1, Claimant{"old"}, kNow, kNow, kRules).has_value());
}

TEST(WorkersTest, ReleaseEndsTheLeaseButNotBeforeTheLastTimestamp) {
  WorkerRecord r{1, "n", kNow + 20000, kNow - 100};
  auto released = ReleaseWorker(r, 1, Claimant{"n"}, kNow + 50, kNow);
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(released->last_timestamp_ms, kNow + 50);
  EXPECT_EQ(released->lease_until_ms, kNow + 50);
  // A new holder of a released id starts after the released holder's last timestamp.
  auto g = ClaimWorker({*released, {0, "x", kNow + 9000, 0}, {2, "y", kNow + 9000, 0}, {3, "z", kNow + 9000, 0}}, Claimant{"other"}, kNow + 100, kNow + 100, kRules);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->record.worker_id, 1);
  EXPECT_GE(g->not_before_ms, kNow + 50);
}

// Two processes with one node id (two gateways on a host, a gateway and a producer, a VM that kept
// its host name): a live lease is never handed to the other process, whose token differs.
TEST(WorkersTest, ALiveLeaseIsNeverHandedToAnotherProcessWithTheSameNodeId) {
  const Claimant first{"gw-same", "p1", ""};
  const Claimant second{"gw-same", "p2", ""};
  auto a = ClaimWorker({}, first, kNow, kNow, kRules);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->notice.empty());
  auto b = ClaimWorker({a->record}, second, kNow + 10, kNow + 10, kRules);
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(b->record.worker_id, a->record.worker_id);
  EXPECT_EQ(b->record.holder, "p2");
  EXPECT_NE(b->notice.find("another live process uses this node.id"), std::string::npos) << b->notice;
  // Each renews only its own lease; the other's renewal and release are refused.
  EXPECT_TRUE(RenewWorker(a->record, a->record.worker_id, first, kNow, kNow + 20, kRules).has_value());
  auto stolen = RenewWorker(a->record, a->record.worker_id, second, kNow, kNow + 20, kRules);
  ASSERT_FALSE(stolen.has_value());
  EXPECT_EQ(stolen.error().code, Code::kFailedPrecondition);
  EXPECT_FALSE(ReleaseWorker(a->record, a->record.worker_id, second, kNow, kNow + 20).has_value());
  // Both leased: a third process with the name gets a third id.
  auto c = ClaimWorker({a->record, b->record}, Claimant{"gw-same", "p3", ""}, kNow, kNow, kRules);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(c->record.worker_id, a->record.worker_id);
  EXPECT_NE(c->record.worker_id, b->record.worker_id);
}

TEST(WorkersTest, ARestartThatProvesThePreviousProcessGoneGetsItsIdBackAtOnce) {
  WorkerRecord held{2, "gw-1", kNow + 20000, kNow - 5, "p1"};
  // The new process on the same state directory names p1 as its predecessor (it holds the lock).
  auto g = ClaimWorker({held}, Claimant{"gw-1", "p2", "p1"}, kNow, kNow, kRules);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->record.worker_id, 2);
  EXPECT_EQ(g->record.holder, "p2");
  EXPECT_EQ(g->not_before_ms, kNow + 1000) << "after all the crashed life may have issued";
  // A process that cannot vouch for p1 (another state directory) does not get it.
  auto other = ClaimWorker({held}, Claimant{"gw-1", "q1", "q0"}, kNow, kNow, kRules);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->record.worker_id, 2);
  // Once the lease ran out, the id may come back to the node id (recycled, after its lease end).
  held.lease_until_ms = kNow - 1;
  auto later = ClaimWorker({held}, Claimant{"gw-1", "q1", "q0"}, kNow, kNow, kRules);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->record.worker_id, 2);
  EXPECT_GE(later->not_before_ms, kNow - 1);
}

TEST(WorkersTest, ARenewalFromTheNextProcessOnTheStateDirectoryTakesTheLeaseOver) {
  // A restart while Kafka was down went on with the cached id; its first renewal names the
  // previous process, and from then on only the new one may renew.
  WorkerRecord held{1, "gw-1", kNow + 20000, kNow - 5, "p1"};
  auto renewed = RenewWorker(held, 1, Claimant{"gw-1", "p2", "p1"}, kNow, kNow, kRules);
  ASSERT_TRUE(renewed.has_value());
  EXPECT_EQ(renewed->holder, "p2");
  EXPECT_FALSE(RenewWorker(*renewed, 1, Claimant{"gw-1", "p1", ""}, kNow, kNow, kRules).has_value())
      << "the old process cannot renew any more";
}

}  // namespace
}  // namespace kleaf::allocator
