// Per-key sequences (I5) in the cluster shape, checked as Jepsen checks a counter: clients record
// every operation's start, end and value, and a checker verifies the real-time order of each key:
// an operation that started after another one ended sees a larger value (a next value) or one at
// least as large (current). Two allocators and two gateways serve the clients while an allocator
// is killed with SIGKILL and restarted, the other is paused past its session timeout (its
// partitions move; it wakes up as a zombie whose answers must never be seen), a gateway is
// killed and restarted, and the broker is restarted.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// One completed operation of the history.
struct SeqOp {
  bool current = false;  // GET .../current; else a next value
  uint64_t key = 0;
  int64_t start_ns = 0;  // steady clock, before the request was written
  int64_t end_ns = 0;    // after its reply was read
  uint64_t value = 0;
};

std::string Describe(const SeqOp& op) {
  return std::string(op.current ? "current" : "next") + " " + std::to_string(op.value) + " [" +
         std::to_string(op.start_ns) + ", " + std::to_string(op.end_ns) + "]";
}

// The violations of I5's real-time order in `ops` (at most `max` of them): for each key, every
// operation must see a value above (next) or at least (current) the largest value of the
// operations of that key that ended before it started. Failed operations are not in the history:
// a next value that was handed out but never received only leaves a gap.
std::vector<std::string> RealTimeOrderViolations(std::vector<SeqOp> ops, size_t max = 20) {
  std::map<uint64_t, std::vector<SeqOp>> by_key;
  for (const auto& op : ops) by_key[op.key].push_back(op);
  std::vector<std::string> out;
  for (auto& [key, history] : by_key) {
    std::sort(history.begin(), history.end(),
              [](const SeqOp& a, const SeqOp& b) { return a.end_ns < b.end_ns; });
    // best[i]: the operation with the largest value among history[0..i] (by end time).
    std::vector<size_t> best(history.size());
    std::vector<int64_t> ends(history.size());
    for (size_t i = 0; i < history.size(); ++i) {
      ends[i] = history[i].end_ns;
      best[i] = (i > 0 && history[best[i - 1]].value >= history[i].value) ? best[i - 1] : i;
    }
    for (const SeqOp& op : history) {
      // The operations that ended before this one started.
      const auto ended = static_cast<size_t>(
          std::lower_bound(ends.begin(), ends.end(), op.start_ns) - ends.begin());
      if (ended == 0) continue;
      const SeqOp& before = history[best[ended - 1]];
      const bool ok = op.current ? op.value >= before.value : op.value > before.value;
      if (ok) continue;
      if (out.size() < max) {
        out.push_back("key " + std::to_string(key) + ": " + Describe(op) + " started after " +
                      Describe(before) + " ended");
      }
    }
  }
  return out;
}

// The checker catches what it is for, without a broker.
TEST(SequenceCheckerTest, FlagsAValueThatDidNotRiseAfterAnEarlierOneEnded) {
  const std::vector<SeqOp> fine = {
      {false, 1, 0, 10, 5},  {false, 1, 20, 30, 6},
      {true, 1, 40, 50, 6},  {false, 1, 45, 60, 9},  // overlaps the current: any order
      {false, 2, 0, 100, 1},                         // another key
      {false, 1, 55, 70, 7}};
  EXPECT_TRUE(RealTimeOrderViolations(fine).empty());
  // A repeated value (a new owner starting at the last value handed out, not above it).
  auto repeated = fine;
  repeated.push_back({false, 1, 80, 90, 9});
  EXPECT_EQ(RealTimeOrderViolations(repeated).size(), 1u);
  // A current below a value received before it was asked.
  auto current_back = fine;
  current_back.push_back({true, 1, 80, 90, 8});
  EXPECT_EQ(RealTimeOrderViolations(current_back).size(), 1u);
  // Concurrent operations may see any order.
  EXPECT_TRUE(RealTimeOrderViolations({{false, 3, 0, 50, 9}, {false, 3, 10, 40, 2}}).empty());
}

constexpr uint64_t kKeys = 200;        // keys 0..199
constexpr int64_t kSectionSize = 25;   // 8 sections, spread over the 4 partitions
constexpr int64_t kStep = 20;          // raises every few values of a key: often in flight
constexpr int kClients = 6;            // threads, each on both gateways in turn
constexpr int64_t kOpsPerPhase = 400;  // completed operations between two faults, at least
constexpr char kSpace[] = "im";

// Clients of both gateways: each request goes to one of them at random (a port of 0 is a gateway
// that is down), asking for a single key's next value, a fan-out of 8 keys, or a key's current
// value, and records every completed operation.
class SeqClients {
 public:
  explicit SeqClients(std::array<uint16_t, 2> ports) {
    for (size_t g = 0; g < ports.size(); ++g) ports_[g].store(ports[g]);
    for (int i = 0; i < kClients; ++i) threads_.emplace_back([this, i] { Run(i); });
  }
  ~SeqClients() { Stop(); }

  void SetPort(size_t gateway, uint16_t port) { ports_[gateway].store(port); }
  int64_t completed() const { return completed_.load(); }
  int64_t failed() const { return failed_.load(); }
  // Waits until `n` more operations completed than when it was called.
  bool WaitForMore(int64_t n, std::chrono::seconds timeout) const {
    const int64_t base = completed();
    return WaitUntil([&] { return completed() - base >= n; }, timeout);
  }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // After Stop().
  std::vector<SeqOp> History() const {
    std::vector<SeqOp> all;
    for (const auto& ops : ops_) all.insert(all.end(), ops.begin(), ops.end());
    return all;
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               SteadyClock::now().time_since_epoch())
        .count();
  }

  void Run(int index) {
    std::mt19937_64 random(static_cast<uint64_t>(index) * 7919 + 17);
    std::array<std::unique_ptr<e2e::HttpClient>, 2> conns;
    std::array<uint16_t, 2> conn_ports = {0, 0};
    std::vector<SeqOp>& mine = ops_[static_cast<size_t>(index)];
    while (!stop_.load()) {
      const size_t g = random() % 2;
      const uint16_t port = ports_[g].load();
      if (port == 0) continue;  // down: the other one is asked
      if (!conns[g] || conn_ports[g] != port) {
        conns[g] = std::make_unique<e2e::HttpClient>(port, seconds(10));
        conn_ports[g] = port;
      }
      const unsigned kind = random() % 5;  // 0-2: a single key, 3: a fan-out, 4: current
      std::vector<uint64_t> keys;
      std::expected<e2e::HttpReply, std::string> reply;
      const int64_t start = NowNs();
      if (kind == 3) {
        json list = json::array();
        for (int i = 0; i < 8; ++i) {
          keys.push_back(random() % kKeys);
          list.push_back(std::to_string(keys.back()));
        }
        reply =
            conns[g]->Request("POST", std::string("/api/v1/seq/") + kSpace,
                              json{{"keys", list}}.dump(), {{"Content-Type", "application/json"}});
      } else {
        keys.push_back(random() % kKeys);
        std::string target =
            std::string("/api/v1/seq/") + kSpace + "/" + std::to_string(keys.front());
        if (kind == 4) target += "/current";
        reply = conns[g]->Get(target);
      }
      const int64_t end = NowNs();
      if (!reply) {
        failed_.fetch_add(1);
        conns[g].reset();  // reconnect: the gateway may have restarted
        continue;
      }
      if (reply->status != 200) {
        failed_.fetch_add(1);
        // Unavailable while partitions move or a gateway restarts; anything else is a bug.
        if (reply->status != 503) {
          Error("status " + std::to_string(reply->status) + ": " + reply->body);
        }
        continue;
      }
      auto body = json::parse(reply->body, nullptr, false);
      try {
        if (kind == 3) {
          const auto& seqs = body.at("seqs");
          if (seqs.size() != keys.size()) throw std::runtime_error("wrong count");
          for (size_t i = 0; i < keys.size(); ++i) {
            if (std::stoull(seqs[i].at("key").get<std::string>()) != keys[i]) {
              throw std::runtime_error("keys out of order");
            }
            mine.push_back(
                {false, keys[i], start, end, std::stoull(seqs[i].at("seq").get<std::string>())});
          }
        } else {
          mine.push_back({kind == 4, keys.front(), start, end,
                          std::stoull(body.at("seq").get<std::string>())});
        }
        completed_.fetch_add(1);
      } catch (const std::exception& e) {
        Error(std::string("bad reply (") + e.what() + "): " + reply->body);
      }
    }
  }

  void Error(std::string what) {
    std::lock_guard lock(errors_mu_);
    if (errors_.size() < 20) errors_.push_back(std::move(what));
  }

  std::array<std::atomic<uint16_t>, 2> ports_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};
  std::array<std::vector<SeqOp>, kClients> ops_;  // one per client thread
  std::mutex errors_mu_;
  std::vector<std::string> errors_;
  std::vector<std::thread> threads_;
};

class SequenceIntegrationTest : public KafkaTest {
 protected:
  // The checker's run: load through two gateways across kill -9, SIGSTOP, a gateway and a broker
  // restart, on a cluster with `overrides`. Sets `hop_answered` to the gateways' owner-hop calls
  // answered.
  void CheckRealTimeOrder(const std::string& name, std::map<std::string, std::string> overrides,
                          double* hop_answered);
};

TEST_F(SequenceIntegrationTest, EveryKeysValuesFollowRealTimeAcrossKillPauseAndRestarts) {
  double hop_answered = 0;
  CheckRealTimeOrder("seq", {}, &hop_answered);
  EXPECT_EQ(hop_answered, 0);
}

// The same faults with sequence.owner_hop on allocators and gateways: the gateways call the
// owners directly, values come from memory under leases, and a paused owner is called until its
// calls time out. The checker asserts the same real-time order.
TEST_F(SequenceIntegrationTest, EveryKeysValuesFollowRealTimeOverTheOwnerHopToo) {
  double answered = 0;
  ASSERT_NO_FATAL_FAILURE(
      CheckRealTimeOrder("seqhop", {{"sequence.owner_hop", "true"}}, &answered));
  std::cout << "owner hop calls answered: " << answered << std::endl;
  EXPECT_GT(answered, 0) << "the gateways never called an owner directly";
}

void SequenceIntegrationTest::CheckRealTimeOrder(const std::string& name,
                                                 std::map<std::string, std::string> overrides,
                                                 double* hop_answered) {
  Cluster cluster(broker_, name, std::move(overrides));
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& alloc1 = *nodes->allocators[0];
  Node& alloc2 = *nodes->allocators[1];
  Node& gw_a = *nodes->gateways[0];
  Node& gw_b = *nodes->gateways[1];
  auto put = AdminCall(gw_a.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       json{{"section_size", kSectionSize}, {"step", kStep}}.dump());
  ASSERT_TRUE(put) << put.error();
  // Every gateway reads the space's record from its partition before its first value.
  auto described = AdminCall(gw_b.port, "GET", std::string("/api/v1/spaces/") + kSpace, "");
  ASSERT_TRUE(described) << described.error();
  EXPECT_EQ((*described)["section_size"], kSectionSize) << described->dump();

  SeqClients clients({gw_a.port, gw_b.port});
  ASSERT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(60)))
      << "no load: " << clients.completed() << " completed, " << clients.failed() << " failed\n"
      << cluster.Logs();
  const std::vector<Node*> allocators = {&alloc1, &alloc2};
  auto serves_all = [&](const Node& a) {
    auto served = ServedPartitions(a);
    return served && served->size() == static_cast<size_t>(Cluster::kPartitions);
  };

  // 1. kill -9 of an allocator: the other one takes its partitions over, each section starting
  //    at its persisted maximum; the killed one comes back on the same state.
  alloc1.process->Kill();
  alloc1.process->WaitExit(seconds(10));
  ASSERT_TRUE(WaitUntil([&] { return serves_all(alloc2); }, seconds(60)))
      << alloc2.name << " did not take every partition over after kill -9 of " << alloc1.name;
  EXPECT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(60))) << "no load after the takeover";
  auto restarted = StartNode(alloc1);
  ASSERT_TRUE(restarted) << restarted.error();
  auto balanced = cluster.WaitBalanced(allocators, seconds(90));
  ASSERT_TRUE(balanced) << balanced.error();
  EXPECT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(60))) << "no load after the restart";
  std::cout << "after kill -9 and restart: " << clients.completed() << " completed, "
            << clients.failed() << " failed" << std::endl;

  // 2. SIGSTOP past the session timeout: the running allocator takes over while the frozen one
  //    still holds its counters; woken, its answers must never be seen (fenced).
  alloc2.process->Signal(SIGSTOP);
  const bool taken = WaitUntil([&] { return serves_all(alloc1); }, seconds(60));
  alloc2.process->Signal(SIGCONT);  // whatever happened: the rest of the test needs it
  ASSERT_TRUE(taken) << alloc1.name << " did not take every partition over from the frozen "
                     << alloc2.name;
  // Woken after the takeover, the zombie still holds its counters until it learns it was fenced
  // or revoked; the load goes on meanwhile.
  EXPECT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(60))) << "no load after the zombie woke";
  balanced = cluster.WaitBalanced(allocators, seconds(90));
  ASSERT_TRUE(balanced) << balanced.error();
  EXPECT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(60))) << "no load after the rebalance";
  std::cout << "after the pause: " << clients.completed() << " completed, " << clients.failed()
            << " failed" << std::endl;

  // 3. A gateway killed and restarted (its space record and lanes start empty).
  clients.SetPort(0, 0);
  gw_a.process->Kill();
  gw_a.process->WaitExit(seconds(10));
  restarted = StartNode(gw_a);
  ASSERT_TRUE(restarted) << restarted.error();
  clients.SetPort(0, gw_a.port);
  EXPECT_TRUE(clients.WaitForMore(2 * kOpsPerPhase, seconds(60)))
      << "no load after the gateway restart";

  // 4. The broker restarted (stopped cleanly, its data kept): requests fail while it is away;
  //    afterwards every owner serves from what the state topic committed.
  {
    BrokerRestartGuard guard(broker_);
    auto stopped = broker_.Stop();
    ASSERT_TRUE(stopped) << stopped.error();
    auto started = broker_.Start();
    ASSERT_TRUE(started) << started.error();
  }
  EXPECT_TRUE(clients.WaitForMore(kOpsPerPhase, seconds(90))) << "no load after the broker restart";

  clients.Stop();
  for (const Node* gw : {&gw_a, &gw_b}) {
    if (auto m = ScrapeMetrics(gw->port)) {
      *hop_answered += m->Value("kleaf_owner_hop_calls_total", "outcome=\"answered\"").value_or(0);
    }
  }
  const auto history = clients.History();
  std::map<uint64_t, int64_t> per_key;
  for (const auto& op : history) ++per_key[op.key];
  std::cout << "history: " << history.size() << " values of " << per_key.size() << " keys from "
            << clients.completed() << " requests, " << clients.failed()
            << " failed (503 or a connection lost in a fault)" << std::endl;
  for (const auto& e : clients.errors()) ADD_FAILURE() << "client: " << e;
  const auto violations = RealTimeOrderViolations(history);
  for (const auto& v : violations) ADD_FAILURE() << "I5 violated: " << v;
  EXPECT_EQ(per_key.size(), kKeys);
}

}  // namespace
}  // namespace kleaf::integration
