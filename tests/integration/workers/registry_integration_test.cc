// The worker-id registry with real gateways and a real broker (I3): gateways hold distinct worker
// ids, a restarted gateway gets its own id back, and a full id space refuses one more gateway.
#include <gtest/gtest.h>

#include <latch>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/e2e/http_client.h"
#include "tests/integration/workers/worker_env.h"

namespace kleaf::integration::workers {
namespace {

// Every ID of `ids` carries worker id `worker`; else a message naming one that does not.
std::optional<std::string> FindForeignWorker(const Layout& layout, const std::vector<int64_t>& ids,
                                             int64_t worker) {
  for (int64_t id : ids) {
    if (Split(layout, id).worker_id != worker) {
      return "ID " + std::to_string(id) + " carries worker id " +
             std::to_string(Split(layout, id).worker_id) + ", not " + std::to_string(worker);
    }
  }
  return std::nullopt;
}

TEST_F(WorkerRegistryTest, GatewaysHoldDistinctWorkerIdsAndTheirIdsNeverCollide) {
  const Layout layout;  // 41/10/12: 1024 worker ids
  RegistryCluster cluster(broker_, "distinct");
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  std::vector<Node*> gateways = {&cluster.AddGateway("gw-a"), &cluster.AddGateway("gw-b"),
                                 &cluster.AddGateway("gw-c")};
  // All three start at once: their claims reach the registry together and must still differ.
  auto started = cluster.Start(gateways);
  ASSERT_TRUE(started) << started.error();

  std::map<Node*, int64_t> worker_of;
  std::set<int64_t> distinct;
  for (Node* g : gateways) {
    auto worker = WorkerIdOf(g->port);
    ASSERT_TRUE(worker) << g->name << ": " << worker.error();
    worker_of[g] = *worker;
    distinct.insert(*worker);
  }
  ASSERT_EQ(distinct.size(), gateways.size()) << "two gateways were granted the same worker id";
  for (Node* g : gateways) {
    auto view = GetWorkers(g->port);
    ASSERT_TRUE(view) << view.error();
    EXPECT_EQ(view->source, "registry") << view->body;
    EXPECT_EQ(view->leased, 3) << view->body;
    EXPECT_EQ(view->free, layout.workers() - 3) << view->body;
    EXPECT_EQ(view->worker_id, worker_of[g]) << g->name << ": " << view->body;
  }

  // Two clients per gateway, all at once, batches and single IDs mixed.
  constexpr int kClientsPerGateway = 2;
  constexpr int kRounds = 12;
  struct Stream {
    Node* gateway;
    std::vector<int64_t> ids;
    std::string error;
  };
  std::vector<Stream> streams;
  for (Node* g : gateways) {
    for (int i = 0; i < kClientsPerGateway; ++i) streams.push_back({g, {}, {}});
  }
  std::latch go(static_cast<std::ptrdiff_t>(streams.size()));
  std::vector<std::thread> threads;
  for (Stream& s : streams) {
    threads.emplace_back([&s, &go] {
      go.arrive_and_wait();
      for (int round = 0; round < kRounds && s.error.empty(); ++round) {
        auto ids = GetSnowflakes(s.gateway->port, "collide", round % 3 == 2 ? 1 : 1000);
        if (!ids) {
          s.error = s.gateway->name + ": " + ids.error();
          break;
        }
        s.ids.insert(s.ids.end(), ids->begin(), ids->end());
      }
    });
  }
  for (auto& t : threads) t.join();

  std::vector<int64_t> all;
  for (const Stream& s : streams) {
    ASSERT_TRUE(s.error.empty()) << s.error;
    // One client's IDs from one gateway come in issue order.
    auto order = FindNonIncreasing(s.ids);
    EXPECT_FALSE(order) << s.gateway->name << ": " << *order;
    auto foreign = FindForeignWorker(layout, s.ids, worker_of[s.gateway]);
    EXPECT_FALSE(foreign) << s.gateway->name << ": " << *foreign;
    all.insert(all.end(), s.ids.begin(), s.ids.end());
  }
  EXPECT_GE(all.size(), size_t{3 * kClientsPerGateway * 8 * 1000});
  auto duplicate = FindDuplicate(all);
  EXPECT_FALSE(duplicate) << *duplicate;
  std::cout << "[ worker ] " << all.size() << " IDs from 3 gateways (worker ids "
            << worker_of[gateways[0]] << ", " << worker_of[gateways[1]] << ", "
            << worker_of[gateways[2]] << "), no duplicate\n";

  // `kleaf decode` reads the same worker ids out of the IDs.
  for (const Stream& s : streams) {
    auto decoded = DecodeWorkerId(*s.gateway, s.ids.back());
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(*decoded, worker_of[s.gateway]) << s.gateway->name;
  }
}

// The UUIDv7s or ULIDs of one GET /api/v1/{kind}/{tag}?count=N.
std::expected<std::vector<std::string>, std::string> GetTextIds(uint16_t port,
                                                                const std::string& kind,
                                                                const std::string& tag, int count) {
  e2e::HttpClient client(port, std::chrono::seconds(20));
  auto reply = client.Get("/api/v1/" + kind + "/" + tag + "?count=" + std::to_string(count));
  if (!reply) return std::unexpected(reply.error());
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (reply->status != 200 || !j.is_object() || !j["ids"].is_array()) {
    return std::unexpected("status " + std::to_string(reply->status) + ": " + reply->body);
  }
  std::vector<std::string> ids;
  for (const auto& id : j["ids"]) ids.push_back(id.get<std::string>());
  return ids;
}

// The worker id bits of a UUIDv7 (the top 10 bits of rand_b) or a ULID (the 10 bits after the
// timestamp and the 12-bit counter), with the default layout; -1 for text that is neither.
int64_t WorkerBitsOf(const std::string& kind, const std::string& text) {
  __extension__ unsigned __int128 value = 0;
  if (kind == "uuid7") {
    for (char c : text) {
      if (c == '-') continue;
      const auto digit = std::string_view("0123456789abcdef").find(c);
      if (digit == std::string_view::npos) return -1;
      value = value << 4 | digit;
    }
    return static_cast<int64_t>((value >> 52) & 0x3FF);
  }
  for (char c : text) {
    const auto digit = std::string_view("0123456789ABCDEFGHJKMNPQRSTVWXYZ").find(c);
    if (digit == std::string_view::npos) return -1;
    value = value << 5 | digit;
  }
  return static_cast<int64_t>((value >> 58) & 0x3FF);
}

// UUIDv7s and ULIDs are snowflake draws in 128 bits: each gateway's carry the worker id it leased,
// so gateways drawing at once never issue the same one.
TEST_F(WorkerRegistryTest, Uuid7sAndUlidsCarryTheLeasedWorkerIdAndNeverCollide) {
  RegistryCluster cluster(broker_, "wide");
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  std::vector<Node*> gateways = {&cluster.AddGateway("gw-a"), &cluster.AddGateway("gw-b")};
  auto started = cluster.Start(gateways);
  ASSERT_TRUE(started) << started.error();
  std::map<Node*, int64_t> worker_of;
  for (Node* g : gateways) {
    auto worker = WorkerIdOf(g->port);
    ASSERT_TRUE(worker) << g->name << ": " << worker.error();
    worker_of[g] = *worker;
  }
  ASSERT_NE(worker_of[gateways[0]], worker_of[gateways[1]]);

  for (const std::string kind : {"uuid7", "ulid"}) {
    SCOPED_TRACE(kind);
    struct Stream {
      Node* gateway;
      std::vector<std::string> ids;
      std::string error;
    };
    std::vector<Stream> streams;
    for (Node* g : gateways) {
      for (int i = 0; i < 2; ++i) streams.push_back({g, {}, {}});
    }
    std::latch go(static_cast<std::ptrdiff_t>(streams.size()));
    std::vector<std::thread> threads;
    for (Stream& s : streams) {
      threads.emplace_back([&s, &go, &kind] {
        go.arrive_and_wait();
        for (int round = 0; round < 8 && s.error.empty(); ++round) {
          auto ids = GetTextIds(s.gateway->port, kind, "wide", round % 3 == 2 ? 1 : 1000);
          if (!ids) s.error = s.gateway->name + ": " + ids.error();
          if (ids) s.ids.insert(s.ids.end(), ids->begin(), ids->end());
        }
      });
    }
    for (auto& t : threads) t.join();
    std::set<std::string> all;
    size_t drawn = 0;
    for (const Stream& s : streams) {
      ASSERT_TRUE(s.error.empty()) << s.error;
      for (size_t i = 0; i < s.ids.size(); ++i) {
        ASSERT_EQ(WorkerBitsOf(kind, s.ids[i]), worker_of[s.gateway]) << s.ids[i];
        if (i > 0) {
          ASSERT_LT(s.ids[i - 1], s.ids[i]) << s.gateway->name << ": out of order";
        }
      }
      all.insert(s.ids.begin(), s.ids.end());
      drawn += s.ids.size();
    }
    EXPECT_EQ(all.size(), drawn) << "a " << kind << " was issued twice";
    EXPECT_GE(drawn, size_t{4 * 5 * 1000});
  }
}

TEST_F(WorkerRegistryTest, RestartedGatewayGetsItsWorkerIdBack) {
  const Layout layout;
  // A longer lease than the other tests: the kill -9 restart must come back within it on a loaded
  // machine (a gateway start takes about 0.2 s here, several seconds on a busy CI machine); nothing
  // here waits for the lease to run out.
  constexpr int64_t kTtlMs = 20000;
  auto keys = layout.Keys();
  keys["workers.lease_ttl_ms"] = std::to_string(kTtlMs);
  RegistryCluster cluster(broker_, "restart", keys);
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  Node& a = cluster.AddGateway("gw-a");
  Node& b = cluster.AddGateway("gw-b");
  {
    auto r = StartNode(a);
    ASSERT_TRUE(r) << r.error();
  }
  {
    auto r = StartNode(b);
    ASSERT_TRUE(r) << r.error();
  }
  auto a_worker = WorkerIdOf(a.port);
  auto b_worker = WorkerIdOf(b.port);
  ASSERT_TRUE(a_worker && b_worker) << cluster.Logs();
  const int64_t a_id = *a_worker;
  const int64_t b_id = *b_worker;
  ASSERT_NE(a_id, b_id);
  // b's id is not the lowest free one after b stops (that is a higher, never used id), so getting
  // it back takes the registry's same-node rule.

  auto before = GetSnowflakes(b.port, "restart", 500);
  ASSERT_TRUE(before) << before.error();

  // 1. SIGTERM: the lease is released, and the restart claims the same id.
  auto stopped = Stop(b);
  ASSERT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString() << "\n" << b.Log();
  auto view = GetWorkers(a.port);
  ASSERT_TRUE(view) << view.error();
  EXPECT_EQ(view->leased, 1) << "b's lease was not released at SIGTERM: " << view->body;

  {
    auto r = StartNode(b);
    ASSERT_TRUE(r) << r.error();
  }
  EXPECT_EQ(WorkerIdOf(b.port).value_or(-1), b_id) << "after SIGTERM and restart";
  view = GetWorkers(b.port);
  ASSERT_TRUE(view) << view.error();
  EXPECT_EQ(view->worker_id, b_id) << view->body;
  EXPECT_EQ(view->leased, 2) << view->body;
  auto after_term = GetSnowflakes(b.port, "restart", 500);
  ASSERT_TRUE(after_term) << after_term.error();
  EXPECT_GT(after_term->front(), before->back())
      << "IDs after the restart must be above those before";
  for (int64_t id : *after_term) ASSERT_EQ(Split(layout, id).worker_id, b_id) << id;

  // 2. kill -9: the lease is still valid when b comes back; the same node gets it again.
  b.process->KillAndWait();
  const auto killed = SteadyClock::now();
  {
    auto r = StartNode(b);
    ASSERT_TRUE(r) << r.error();
  }
  const double back_after_s = SecondsSince(killed);
  EXPECT_EQ(WorkerIdOf(b.port).value_or(-1), b_id) << "after kill -9 and restart";
  view = GetWorkers(b.port);
  ASSERT_TRUE(view) << view.error();
  EXPECT_EQ(view->worker_id, b_id) << view->body;
  // Still two leases: b did not take a second id beside its old, unexpired one.
  EXPECT_EQ(view->leased, 2) << view->body;
  EXPECT_LT(back_after_s * 1000, kTtlMs)
      << "the restart took longer than the lease TTL: this run did not test a restart within it";
  auto after_kill = GetSnowflakes(b.port, "restart", 500);
  ASSERT_TRUE(after_kill) << after_kill.error();
  EXPECT_GT(after_kill->front(), after_term->back());
  for (int64_t id : *after_kill) ASSERT_EQ(Split(layout, id).worker_id, b_id) << id;
  std::cout << "[ worker ] gw-b (worker id " << b_id << ") serving again " << back_after_s
            << " s after kill -9\n";

  auto done = Stop(b);
  EXPECT_TRUE(done.exited && done.code == 0) << done.ToString();
}

TEST_F(WorkerRegistryTest, FullWorkerIdSpaceRefusesOneMoreGateway) {
  const Layout layout = kTinyLayout;  // 4 worker ids
  RegistryCluster cluster(broker_, "exhaust", layout.Keys());
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  std::vector<Node*> four = {&cluster.AddGateway("gw-a"), &cluster.AddGateway("gw-b"),
                             &cluster.AddGateway("gw-c"), &cluster.AddGateway("gw-d")};
  auto started = cluster.Start(four);
  ASSERT_TRUE(started) << started.error();
  std::set<int64_t> ids;
  for (Node* g : four) {
    auto worker = WorkerIdOf(g->port);
    ASSERT_TRUE(worker) << g->name << ": " << worker.error();
    ids.insert(*worker);
    auto issued = GetSnowflakes(g->port, "full", 100);
    ASSERT_TRUE(issued) << issued.error();
    for (int64_t id : *issued) {
      ASSERT_EQ(Split(layout, id).worker_id, *worker) << g->name << " " << id;
    }
  }
  EXPECT_EQ(ids, (std::set<int64_t>{0, 1, 2, 3}));

  Node& fifth = cluster.AddGateway("gw-e");
  auto refused = StartExpectingExit(fifth);
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_TRUE(refused->status.exited && refused->status.code != 0) << refused->status.ToString();
  EXPECT_NE(refused->err.find("all 4 snowflake worker ids are leased"), std::string::npos)
      << refused->err;
  EXPECT_EQ(refused->out.find("listening on"), std::string::npos) << refused->out;
  // The refusal is an answer, not a claim timeout (workers.claim_timeout_ms is 20 s here).
  EXPECT_LT(refused->seconds, 15.0);
  std::cout << "[ worker ] fifth gateway refused after " << refused->seconds << " s\n";

  auto view = GetWorkers(four[0]->port);
  ASSERT_TRUE(view) << view.error();
  EXPECT_EQ(view->leased, 4) << view->body;
  EXPECT_EQ(view->free, 0) << view->body;
}

}  // namespace
}  // namespace kleaf::integration::workers
