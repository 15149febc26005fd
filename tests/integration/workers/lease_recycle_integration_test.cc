// A crashed gateway's worker id is recycled only after its lease ran out, and only for timestamps
// after everything the crashed holder issued (I3), in a space of 4 worker ids.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/integration/workers/worker_env.h"

namespace kleaf::integration::workers {
namespace {

constexpr char kLeasedMessage[] = "all 4 snowflake worker ids are leased";

TEST_F(WorkerRegistryTest, KilledGatewaysWorkerIdIsRecycledAfterTheTtlForLaterTimestamps) {
  const Layout layout = kTinyLayout;
  // A longer lease than the other tests: two gateway starts must fit into what is left of the
  // killed gateway's lease on a loaded machine (validation: 10000 >= 2 * 1000 + 2000).
  constexpr int64_t kTtlMs = 10000;
  auto keys = layout.Keys();
  keys["workers.lease_ttl_ms"] = std::to_string(kTtlMs);
  RegistryCluster cluster(broker_, "recycle", keys);
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();

  // One at a time, so the ids are known: fill-1 = 0, a = 1, fill-2 = 2; 3 is never used.
  Node& fill1 = cluster.AddGateway("fill-1");
  Node& a = cluster.AddGateway("a");
  Node& fill2 = cluster.AddGateway("fill-2");
  for (Node* g : {&fill1, &a, &fill2}) {
    auto r = StartNode(*g);
    ASSERT_TRUE(r) << r.error();
  }
  auto fill1_worker = WorkerIdOf(fill1.port);
  auto a_worker = WorkerIdOf(a.port);
  auto fill2_worker = WorkerIdOf(fill2.port);
  ASSERT_TRUE(fill1_worker && a_worker && fill2_worker) << cluster.Logs();
  const int64_t x = *a_worker;
  EXPECT_EQ(*fill1_worker, 0);
  EXPECT_EQ(x, 1);
  EXPECT_EQ(*fill2_worker, 2);

  // A issues IDs, then crashes.
  std::vector<int64_t> a_ids;
  for (int i = 0; i < 6; ++i) {
    auto ids = GetSnowflakes(a.port, "recycle", i % 2 == 0 ? 1000 : 1);
    ASSERT_TRUE(ids) << ids.error();
    a_ids.insert(a_ids.end(), ids->begin(), ids->end());
  }
  for (int64_t id : a_ids) ASSERT_EQ(Split(layout, id).worker_id, x) << id;
  int64_t a_last_ms = 0;
  for (int64_t id : a_ids) a_last_ms = std::max(a_last_ms, Split(layout, id).timestamp_ms);
  const auto last_issue = SteadyClock::now();
  a.process->KillAndWait();
  const auto killed = SteadyClock::now();

  // While A's lease is valid: a newcomer gets the never used id 3, not X...
  Node& b = cluster.AddGateway("b");
  {
    auto r = StartNode(b);
    ASSERT_TRUE(r) << r.error();
  }
  EXPECT_EQ(WorkerIdOf(b.port).value_or(-1), 3)
      << "a newcomer was given a worker id of a valid lease";
  // ...and one more is refused: X still counts as leased.
  Node& c = cluster.AddGateway("c");
  auto refused = StartExpectingExit(c);
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_FALSE(refused->was_ready) << "it served before it exited: " << refused->out;
  EXPECT_TRUE(refused->status.exited && refused->status.code != 0) << refused->status.ToString();
  EXPECT_NE(refused->err.find(kLeasedMessage), std::string::npos) << refused->err;
  // Leases only run out here (nobody renews X), so "still 4 leased" now means X's lease was valid
  // when b and c claimed: the checks above ran while it was.
  auto view = GetWorkers(fill1.port);
  ASSERT_TRUE(view) << view.error();
  ASSERT_EQ(view->leased, 4) << "A's lease ran out before b and c were started ("
                             << SecondsSince(killed) << " s after the kill): this run tested "
                             << "nothing; " << view->body;
  const double valid_checked_s = SecondsSince(killed);

  // The registry frees X once A's lease has run out.
  std::string last_body;
  bool freed = WaitUntil(
      [&] {
        auto v = GetWorkers(fill1.port);
        if (!v) return false;
        last_body = v->body;
        return v->leased == 3;
      },
      milliseconds(kTtlMs + 20000));
  const double freed_after_kill_s = SecondsSince(killed);
  const double freed_after_issue_s = SecondsSince(last_issue);
  ASSERT_TRUE(freed) << "X was not freed within TTL + 20 s: " << last_body;
  // A stopped issuing at most ttl - margin after its last renewal was sent; its lease lasts ttl
  // from when that renewal was handled: so X stays leased at least `margin` after A's last ID.
  EXPECT_GE(freed_after_issue_s * 1000, kSafetyMarginMs)
      << "X was freed while A could still have been issuing";
  EXPECT_LE(freed_after_kill_s * 1000, kTtlMs + 5000) << "X was freed late";

  // Now c gets X, for timestamps after everything A issued.
  {
    auto r = StartNode(c);
    ASSERT_TRUE(r) << r.error();
  }
  EXPECT_EQ(WorkerIdOf(c.port).value_or(-1), x) << "the expired id was not recycled";
  const auto not_before_ms = ClaimedNotBeforeMs(c);
  ASSERT_TRUE(not_before_ms) << c.Log();
  EXPECT_GT(*not_before_ms, a_last_ms) << "the recycled id's not_before is not above A's IDs";
  std::vector<int64_t> c_ids;
  for (int i = 0; i < 4; ++i) {
    auto ids = GetSnowflakes(c.port, "recycle", i % 2 == 0 ? 1000 : 1);
    ASSERT_TRUE(ids) << ids.error();
    c_ids.insert(c_ids.end(), ids->begin(), ids->end());
  }
  int64_t c_first_ms = INT64_MAX;
  for (int64_t id : c_ids) {
    ASSERT_EQ(Split(layout, id).worker_id, x) << id;
    c_first_ms = std::min(c_first_ms, Split(layout, id).timestamp_ms);
  }
  EXPECT_GT(c_first_ms, a_last_ms) << "the recycled id issued a timestamp A had used";
  EXPECT_GT(c_first_ms, *not_before_ms);
  std::vector<int64_t> both = a_ids;
  both.insert(both.end(), c_ids.begin(), c_ids.end());
  auto duplicate = FindDuplicate(both);
  EXPECT_FALSE(duplicate) << *duplicate;

  view = GetWorkers(c.port);
  ASSERT_TRUE(view) << view.error();
  EXPECT_EQ(view->leased, 4) << view->body;
  EXPECT_EQ(view->free, 0) << view->body;
  EXPECT_EQ(view->worker_id, x) << view->body;
  std::cout << "[ worker ] worker id " << x << ": still leased " << valid_checked_s
            << " s after kill -9 (b got 3, c refused); freed " << freed_after_kill_s
            << " s after the kill (" << freed_after_issue_s << " s after A's last ID, TTL "
            << kTtlMs / 1000.0 << " s); c's first timestamp " << (c_first_ms - a_last_ms)
            << " ms after A's last, not_before " << (*not_before_ms - a_last_ms)
            << " ms after it\n";
}

}  // namespace
}  // namespace kleaf::integration::workers
