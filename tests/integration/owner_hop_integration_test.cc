// The owner hop's side at the owner (docs/architecture.md, "I5 with a lease", R1; issue 38 item
// 2): an allocator with sequence.owner_hop answers a partition's sequence calls from memory, at
// POST /internal/v1/seq/<p> of its http.listen, while it holds the partition's lease, from the
// same counters as the requests topic. The test plays the gateway that calls the owner directly.
// An owner paused (SIGSTOP) past its lease and its session timeout and woken after the new owner
// answered must never answer again: its lease ran out while it was stopped, and the new owner
// waited the lease out after its fence. And when the new owner's clock runs fast beyond ρ, it does
// answer again: the limit of the lease's clock assumption, shown rather than described.
#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "allocator/sequences.h"
#include "cluster/wire.h"
#include "kafka/message.h"
#include "tests/e2e/tls_env.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSpace[] = "hop";

class OwnerHopIntegrationTest : public KafkaTest {};

// The first key 0, 1, ... whose section (one key per section) lies on state partition p.
uint64_t KeyOnPartition(int32_t p) { return SeqKeyOnPartition(kSpace, p); }

struct HopValue {
  uint64_t value = 0;
  uint64_t generation = 0;
};
// One next value of `key` from the allocator at `port`, over the owner hop: the value and the
// lease generation it came with, or the status and body of a refusal.
std::expected<HopValue, std::string> HopNext(e2e::HttpClient& http, int32_t p, uint64_t key,
                                             int64_t step) {
  const std::string body = cluster::wire::EncodeRequest(cluster::wire::Envelope{
      allocator::op::NextSeq{kSpace, {key}, allocator::op::SpaceShape{1, step}},
      Cluster::kPartitions});
  auto reply = http.Request("POST", "/internal/v1/seq/" + std::to_string(p), body, {});
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected(std::to_string(reply->status) + " " + reply->body);
  }
  auto values = cluster::wire::DecodeReply<std::vector<uint64_t>>(reply->body);
  if (!values || values->size() != 1) return std::unexpected("undecodable reply " + reply->body);
  return HopValue{values->front(), std::stoull(reply->Header("Kleaf-Generation"))};
}

// The raw bytes of HopNext's request, for a connection that sends them before the owner can read.
std::string HopRequestBytes(int32_t p, uint64_t key, int64_t step) {
  const std::string body = cluster::wire::EncodeRequest(cluster::wire::Envelope{
      allocator::op::NextSeq{kSpace, {key}, allocator::op::SpaceShape{1, step}},
      Cluster::kPartitions});
  return "POST /internal/v1/seq/" + std::to_string(p) +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Calls HopNext until it answers (a lease is taken at a partition's first call) or `timeout`.
std::expected<HopValue, std::string> HopNextWhenHeld(uint16_t port, int32_t p, uint64_t key,
                                                     int64_t step, seconds timeout) {
  e2e::HttpClient http(port, seconds(10));
  const auto deadline = SteadyClock::now() + timeout;
  std::string last;
  while (SteadyClock::now() < deadline) {
    auto v = HopNext(http, p, key, step);
    if (v) return v;
    last = v.error();
    std::this_thread::sleep_for(milliseconds(20));
  }
  return std::unexpected("no answer over the owner hop: " + last);
}

// One next value of `key` through the gateway (the requests topic).
std::expected<uint64_t, std::string> GatewayNext(uint16_t port, uint64_t key) {
  return SeqNext(port, kSpace, key);
}

// GatewayNext until it answers (a 503 asks the client to retry: a broker just restarted by another
// test, a takeover) or 30 s pass.
std::expected<uint64_t, std::string> GatewayNextWhenAnswered(uint16_t port, uint64_t key) {
  const auto deadline = SteadyClock::now() + seconds(30);
  std::expected<uint64_t, std::string> v = std::unexpected("not asked");
  while (SteadyClock::now() < deadline) {
    v = GatewayNext(port, key);
    if (v) return v;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return v;
}

void StartWithSpace(Cluster& cluster, Node& allocator, Node& gateway, int64_t step) {
  StartWithSeqSpace(cluster, allocator, gateway, kSpace, step);
}

// The paused-owner scenes: alloc-1 and gw-a of `cluster` started with the space, alloc-1 holding
// p's lease (its first call takes it); `last` is the last value alloc-1 answered for `key`.
void HoldLeaseAtFirstOwner(Cluster& cluster, int32_t p, uint64_t key, int64_t step, Node** a1,
                           HopValue* last) {
  *a1 = &cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, **a1, gw, step));
  auto held = HopNextWhenHeld((*a1)->port, p, key, step, seconds(30));
  ASSERT_TRUE(held) << held.error() << "\n" << cluster.Logs();
  e2e::HttpClient http((*a1)->port, seconds(5));
  auto v = HopNext(http, p, key, step);
  ASSERT_TRUE(v) << v.error();
  *last = *v;
}

double Committed(const Metrics& m) {
  return m.Value("kleaf_allocator_transactions_total", "outcome=\"committed\"").value_or(0);
}

// Values over the hop and through the requests topic come from one set of counters: every value
// of a key is above every value before it, whichever path answered. The hop's values cost no
// transaction each: the broker sees raises and renewals only.
TEST_F(OwnerHopIntegrationTest, TheOwnerAnswersFromMemoryInOneOrderWithTheRequestsTopic) {
  Cluster cluster(broker_, "hop", {{"sequence.lease_ms", "1000"}, {"sequence.owner_hop", "true"}});
  constexpr int64_t kStep = 100;
  const int32_t p = 2;
  const uint64_t key = KeyOnPartition(p);
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw, kStep));

  auto first = GatewayNextWhenAnswered(gw.port, key);
  ASSERT_TRUE(first) << first.error() << "\n" << cluster.Logs();
  auto held = HopNextWhenHeld(a1.port, p, key, kStep, seconds(30));
  ASSERT_TRUE(held) << held.error() << "\n" << cluster.Logs();
  EXPECT_GT(held->value, *first);
  EXPECT_GE(held->generation, 1u);

  auto before = ScrapeMetrics(a1.port);
  ASSERT_TRUE(before) << before.error();
  e2e::HttpClient http(a1.port, seconds(10));
  uint64_t last = held->value;
  constexpr int kCalls = 500;
  for (int i = 0; i < kCalls; ++i) {
    if (i % 100 == 50) {  // now and then through the requests topic
      auto v = GatewayNext(gw.port, key);
      ASSERT_TRUE(v) << v.error();
      ASSERT_GT(*v, last) << "call " << i << " through the gateway went back";
      last = *v;
      continue;
    }
    auto v = HopNext(http, p, key, kStep);
    ASSERT_TRUE(v) << "call " << i << ": " << v.error() << "\n" << cluster.Logs();
    ASSERT_GT(v->value, last) << "call " << i << " over the hop went back";
    EXPECT_EQ(v->generation, held->generation);
    last = v->value;
  }
  auto after = ScrapeMetrics(a1.port);
  ASSERT_TRUE(after) << after.error();
  const double transactions = Committed(*after) - Committed(*before);
  std::cout << "hop: " << kCalls << " calls (" << kCalls / 100 << " through the gateway) cost "
            << transactions << " committed transactions" << std::endl;
  // A raise per step (100 values), the gateway's calls, and the renewals (every 333 ms).
  EXPECT_LT(transactions, kCalls / 5.0) << "values over the hop waited for transactions";

  // Not the owner of a partition the cluster does not have; not a sequence call.
  auto wrong = HopNext(http, 9, key, kStep);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("503"), std::string::npos) << wrong.error();
  const int32_t space_partition = kafka::PartitionFor(kSpace, Cluster::kPartitions);
  auto get_space = http.Request("POST", "/internal/v1/seq/" + std::to_string(space_partition),
                                cluster::wire::EncodeRequest(cluster::wire::Envelope{
                                    allocator::op::GetSpace{kSpace}, Cluster::kPartitions}),
                                {});
  ASSERT_TRUE(get_space) << get_space.error();
  EXPECT_EQ(get_space->status, 400) << get_space->body;
}

// An owner paused past its lease and its session timeout, woken after the new owner answered:
// none of its values is ever seen after the new owner's first. The lease (10 s) is longer than
// the session timeout (6 s), so a new owner that did not wait would answer while the paused one's
// lease still ran, and the woken owner would answer from it.
TEST_F(OwnerHopIntegrationTest, AnOwnerPausedPastItsLeaseNeverAnswersAfterTheNewOwner) {
  Cluster cluster(broker_, "hoppause",
                  {{"sequence.lease_ms", "10000"},
                   {"sequence.lease_renew_ms", "300"},
                   {"sequence.owner_hop", "true"}});
  constexpr int64_t kStep = 1000;
  constexpr double kWaitS = (10000 * 1.001 + 100) / 1000.0;
  const int32_t p = 1;
  const uint64_t key = KeyOnPartition(p);
  Node* a1 = nullptr;
  HopValue last_old;
  ASSERT_NO_FATAL_FAILURE(HoldLeaseAtFirstOwner(cluster, p, key, kStep, &a1, &last_old));
  e2e::HttpClient old_owner(a1->port, seconds(5));

  a1->process->Signal(SIGSTOP);
  Node& a2 = cluster.AddAllocator("alloc-2");
  const auto spawned = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a2}));
  auto first_new = HopNextWhenHeld(a2.port, p, key, kStep, seconds(90));
  const double answered_s = std::chrono::duration<double>(SteadyClock::now() - spawned).count();
  // A call already waiting at the paused owner when it wakes (the kernel takes the connection and
  // the bytes meanwhile): the first thing it serves.
  auto waiting = e2e::RawConnection::Connect(a1->port);
  ASSERT_TRUE(waiting) << waiting.error();
  ASSERT_TRUE(waiting->Send(HopRequestBytes(p, key, kStep)));
  a1->process->Signal(SIGCONT);
  const auto woken = waiting->ReadResponse(seconds(10));
  ASSERT_TRUE(first_new) << first_new.error() << "\n" << cluster.Logs();
  std::cout << "hoppause: the new owner answered " << answered_s
            << " s after it was spawned (the lease: " << kWaitS << " s after its fence)"
            << std::endl;
  EXPECT_GE(answered_s, kWaitS) << "the new owner answered before the old lease could have ended";
  EXPECT_GT(first_new->value, last_old.value);
  EXPECT_GT(first_new->generation, last_old.generation);

  // The woken owner: the call that waited, and calls for a second more, are never answered.
  EXPECT_EQ(e2e::StatusOf(woken.data), 503) << "the paused owner answered the call that waited "
                                               "for it: "
                                            << woken.data;
  const auto until = SteadyClock::now() + seconds(1);
  int refused = 0;
  while (SteadyClock::now() < until) {
    auto v = HopNext(old_owner, p, key, kStep);
    if (v) {
      ADD_FAILURE() << "the paused owner answered " << v->value << " (generation " << v->generation
                    << ") after the new owner answered " << first_new->value;
      break;
    }
    ++refused;
    old_owner.Close();
  }
  EXPECT_GT(refused, 0);
  // And the new owner goes on above its first value.
  auto next_new = HopNextWhenHeld(a2.port, p, key, kStep, seconds(10));
  ASSERT_TRUE(next_new) << next_new.error();
  EXPECT_GT(next_new->value, first_new->value);
}

// Issue 38 item 3: a clock-rate skew beyond ρ, and what it breaks. The lease rests on A1 (docs/
// architecture.md, "I5 with a lease"): every allocator's lease clocks run within ρ of real time.
// Here the new owner's run 4 times fast (libfaketime: CLOCK_BOOTTIME and CLOCK_MONOTONIC_RAW too),
// so it waits out L·(1+ρ) + δ of its own time in a quarter of it, while the paused owner's lease,
// on its true clocks, still runs: woken cut off from Kafka (the broker frozen), the old owner
// answers from memory a value below the one the new owner answered before it. Real-time order (I5)
// is broken, and nothing in kleaf notices (the clock-rate checks of A1 are not built). The same
// scenario with true clocks is the test above, where the woken owner refuses. If this test fails
// because the woken owner refused, something now catches a fast clock: say so in architecture.md's
// A1 and turn this test around.
TEST_F(OwnerHopIntegrationTest, ANewOwnerWhoseClockRunsFastBeyondRhoLetsTheOldOwnerAnswerAfterIt) {
  if (e2e::Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  ASSERT_FALSE(broker_.dir.empty())
      << "this test freezes the broker: it needs KLEAF_TEST_KAFKA_DIR";
  Cluster cluster(broker_, "hopskew",
                  {{"sequence.lease_ms", "20000"},
                   {"sequence.lease_renew_ms", "300"},
                   {"sequence.owner_hop", "true"}});
  constexpr int64_t kStep = 1000;
  constexpr double kRate = 4;                                 // the new owner's clocks
  constexpr double kLeaseS = (20000 * 0.999 - 100) / 1000.0;  // the old owner's, true clocks
  constexpr double kWaitS = (20000 * 1.001 + 100) / 1000.0;   // the new owner's, on its clocks
  const int32_t p = 1;
  const uint64_t key = KeyOnPartition(p);
  Node* a1 = nullptr;
  HopValue last_old;
  ASSERT_NO_FATAL_FAILURE(HoldLeaseAtFirstOwner(cluster, p, key, kStep, &a1, &last_old));

  // Renewed at most 300 ms ago: the old lease runs until at least kLeaseS - 0.3 s from here.
  const auto stopped = SteadyClock::now();
  a1->process->Signal(SIGSTOP);
  Node& a2 = cluster.AddAllocator("alloc-2");
  auto started =
      StartNode(a2, {}, e2e::FaketimePrefix("+0 x" + std::to_string(static_cast<int>(kRate))));
  ASSERT_TRUE(started) << started.error();
  auto first_new = HopNextWhenHeld(a2.port, p, key, kStep, seconds(60));
  const double answered_s = std::chrono::duration<double>(SteadyClock::now() - stopped).count();
  ASSERT_TRUE(first_new) << first_new.error() << "\n" << cluster.Logs();
  std::cout << "hopskew: the new owner, its clocks " << kRate << " times fast, answered "
            << answered_s << " s after the old owner was paused (its wait: " << kWaitS
            << " s of its clocks; the old lease: " << kLeaseS << " s of true time)" << std::endl;
  // The scenario needs the old lease to still run; a new owner with true clocks could not have
  // answered before it ended (the session timeout, 6 s, plus kWaitS).
  ASSERT_LT(answered_s, kLeaseS - 2) << "the new owner answered too late for the scenario";

  // The old owner wakes cut off from Kafka (the broker frozen: as a network partition would), so
  // it cannot learn from the group or from its producer's fence that it lost p before it answers
  // the call waiting for it; only its lease can refuse it. (Woken with Kafka there, it races the
  // answer against hearing of the rebalance, and sometimes hears first.)
  BrokerFreeze freeze(broker_);
  ASSERT_TRUE(freeze.Freeze());
  auto waiting = e2e::RawConnection::Connect(a1->port);
  ASSERT_TRUE(waiting) << waiting.error();
  ASSERT_TRUE(waiting->Send(HopRequestBytes(p, key, kStep)));
  // A freeze that took long could leave the old owner waking after its lease (it was renewed up to
  // 300 ms and a commit before the pause): a refusal then would say nothing about the skew.
  const double waking_s = std::chrono::duration<double>(SteadyClock::now() - stopped).count();
  ASSERT_LT(waking_s, kLeaseS - 1) << "the old owner would wake too late for the scenario";
  a1->process->Signal(SIGCONT);
  const auto woken = waiting->ReadResponse(seconds(10));
  const double woken_s = std::chrono::duration<double>(SteadyClock::now() - stopped).count();
  freeze.Thaw();
  // librdkafka checks the session timeout on the client too: woken past it, the old owner's
  // consumer revokes p on its own, without the broker, racing the call above (it won 2 runs in
  // 22 here). Dropped by that revocation, p is "not served here", has "no sequence lease", or
  // (the group changed: its lease marked until the group is described again) names the group
  // check; the scenario did not happen then, and the run says so rather than pass or fail. A
  // refusal for any other reason (the lease ran out, a clock event, a clock-rate check) fails
  // below: something caught the skew.
  const std::string body = e2e::BodyOf(woken.data);
  if (e2e::StatusOf(woken.data) == 503 &&
      (body.find("is not served here") != std::string::npos ||
       body.find("no sequence lease held yet") != std::string::npos ||
       body.find("has not been described since its membership last changed") !=
           std::string::npos)) {
    GTEST_SKIP() << "the old owner revoked p on its own session timeout before it answered (a "
                    "race this run lost): "
                 << body;
  }
  ASSERT_EQ(e2e::StatusOf(woken.data), 200)
      << "the old owner refused after waking " << woken_s
      << " s after its pause, within its lease: something caught the new owner's fast clock. "
         "Update docs/architecture.md (A1) and this test. "
      << woken.data;
  auto values = cluster::wire::DecodeReply<std::vector<uint64_t>>(body);
  ASSERT_TRUE(values && values->size() == 1) << woken.data;
  std::cout << "hopskew: woken " << woken_s << " s after its pause, the old owner answered "
            << values->front() << " after the new owner had answered " << first_new->value
            << std::endl;
  EXPECT_LT(values->front(), first_new->value)
      << "a value answered after another of the same key is below it: what the skew breaks";
  EXPECT_GT(first_new->generation, last_old.generation);
  a1->process->Signal(SIGKILL);
}

// An owner whose renewals cannot commit (its broker is down) stops answering once its lease ran
// out, L·(1−ρ) − δ after the reading before its last successful commit, which came before the
// broker was gone: every call sent later than that after the broker stopped is refused.
TEST_F(OwnerHopIntegrationTest, AnOwnerWhoseRenewalsFailStopsAnsweringWhenItsLeaseEnds) {
  Cluster cluster(broker_, "hopcut",
                  {{"sequence.lease_ms", "1000"}, {"sequence.owner_hop", "true"}});
  // No raise is needed while the broker is away: a call past the committed maximum would wait
  // for one (R1 (iv)) instead of showing what the lease allows.
  constexpr int64_t kStep = 1'000'000;
  constexpr double kHoldS = (1000 * 0.999 - 100) / 1000.0;  // L(1−ρ) − δ: 0.899 s
  const int32_t p = 3;
  const uint64_t key = KeyOnPartition(p);
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw, kStep));
  auto held = HopNextWhenHeld(a1.port, p, key, kStep, seconds(30));
  ASSERT_TRUE(held) << held.error() << "\n" << cluster.Logs();

  uint64_t last = held->value;
  int answered_after = 0, refused_after = 0;
  {
    BrokerRestartGuard guard(broker_);
    ASSERT_TRUE(broker_.Stop());
    const auto gone = SteadyClock::now();  // no commit can succeed from here on
    e2e::HttpClient http(a1.port, seconds(5));
    // Calls for three leases' time: answered only while the lease may still run.
    while (SteadyClock::now() < gone + seconds(3)) {
      const auto sent = SteadyClock::now();
      auto v = HopNext(http, p, key, kStep);
      const double after_s = std::chrono::duration<double>(sent - gone).count();
      if (v) {
        EXPECT_GT(v->value, last);
        last = v->value;
        if (after_s > kHoldS + 0.001) {
          ++answered_after;
          ADD_FAILURE() << "answered " << v->value << " to a call sent " << after_s
                        << " s after the broker was gone (the lease lasts " << kHoldS << " s)";
          break;
        }
      } else if (after_s > kHoldS + 0.001) {
        ++refused_after;
      }
    }
  }
  EXPECT_EQ(answered_after, 0);
  EXPECT_GT(refused_after, 0);
  // The broker back: renewals commit again and the owner answers again, above every value before.
  auto again = HopNextWhenHeld(a1.port, p, key, kStep, seconds(60));
  ASSERT_TRUE(again) << again.error() << "\n" << cluster.Logs();
  EXPECT_GT(again->value, last);
}

// --- The gateways' side: routes, the route table, fan-outs, stale routes, TLS
// ---------------------

// Next values of `keys` in one call through the gateway (a fan-out when they lie on several
// partitions), in the keys' order. A 503 (a takeover, a takeover wait) is asked again for up to
// 30 s.
std::expected<std::vector<uint64_t>, std::string> GatewayNextMany(
    e2e::HttpClient& http, const std::vector<uint64_t>& keys) {
  json list = json::array();
  for (uint64_t key : keys) list.push_back(std::to_string(key));
  const std::string body = json{{"keys", list}}.dump();
  const auto deadline = SteadyClock::now() + seconds(30);
  std::string last;
  while (SteadyClock::now() < deadline) {
    auto reply = http.Request("POST", std::string("/api/v1/seq/") + kSpace, body,
                              {{"Content-Type", "application/json"}});
    if (!reply) {
      last = reply.error();
      http.Close();
    } else if (reply->status == 503) {
      last = reply->body;
    } else if (reply->status != 200) {
      return std::unexpected(std::to_string(reply->status) + " " + reply->body);
    } else {
      std::vector<uint64_t> values;
      const json answer = json::parse(reply->body);
      for (const auto& s : answer.at("seqs")) {
        values.push_back(std::stoull(s.at("seq").get<std::string>()));
      }
      if (values.size() != keys.size()) return std::unexpected("wrong count: " + reply->body);
      return values;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return std::unexpected("no answer for 30 s: " + last);
}

// The gateway's owner-hop calls with `outcome` (kleaf_owner_hop_calls_total).
double HopCalls(uint16_t gateway_port, const std::string& outcome, e2e::Transport transport = {}) {
  auto m = ScrapeMetrics(gateway_port, std::move(transport));
  EXPECT_TRUE(m) << m.error();
  if (!m) return -1;
  return m->Value("kleaf_owner_hop_calls_total", "outcome=\"" + outcome + "\"").value_or(0);
}

// A key of each partition, and the last value seen of each: every call's values must be above.
class KeyValues {
 public:
  KeyValues() {
    for (int32_t p = 0; p < Cluster::kPartitions; ++p) keys_.push_back(KeyOnPartition(p));
    last_.assign(keys_.size(), 0);
  }
  const std::vector<uint64_t>& keys() const { return keys_; }
  // `rounds` rounds of a fan-out over every key and a single key's next, each value checked.
  void Rounds(e2e::HttpClient& http, int rounds, const std::string& phase) {
    for (int r = 0; r < rounds; ++r) {
      auto many = GatewayNextMany(http, keys_);
      ASSERT_TRUE(many) << phase << " round " << r << ": " << many.error();
      for (size_t i = 0; i < keys_.size(); ++i) Check(i, (*many)[i], phase, r);
      const size_t i = static_cast<size_t>(r) % keys_.size();
      auto one = GatewayNextMany(http, {keys_[i]});
      ASSERT_TRUE(one) << phase << " round " << r << ": " << one.error();
      Check(i, one->front(), phase, r);
    }
  }

 private:
  void Check(size_t i, uint64_t value, const std::string& phase, int round) {
    EXPECT_GT(value, last_[i]) << phase << " round " << round << ": key " << keys_[i]
                               << " went back or repeated";
    last_[i] = value;
  }
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> last_;
};

// Starts `a1` and `a2`, waits until they share the partitions, then starts `gw` and creates the
// space (one key per section, step 1,000).
void StartTwoOwners(Cluster& cluster, Node& a1, Node& a2, Node& gw) {
  ASSERT_TRUE(cluster.Start({&a1, &a2}));
  ASSERT_TRUE(cluster.WaitBalanced({&a1, &a2}, seconds(60))) << cluster.Logs();
  ASSERT_TRUE(cluster.Start({&gw}));
  auto put = AdminCall(gw.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       json{{"section_size", 1}, {"step", 1000}}.dump());
  ASSERT_TRUE(put) << put.error();
}

// A gateway with sequence.owner_hop learns each owner's route from its answers over the requests
// topic and then calls the owner directly; fan-outs are split by owner and come back in the
// caller's order. When partitions move (an allocator joins: the old owner refuses; an owner is
// killed: its address fails) the stale routes send the calls through the requests topic again,
// whose answers name the new owners, and no value of any key goes back.
TEST_F(OwnerHopIntegrationTest, GatewaysCallTheOwnersAndFollowThemWhenPartitionsMove) {
  Cluster cluster(broker_, "hopgw",
                  {{"sequence.lease_ms", "1000"}, {"sequence.owner_hop", "true"}});
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& a2 = cluster.AddAllocator("alloc-2");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartTwoOwners(cluster, a1, a2, gw));

  KeyValues values;
  e2e::HttpClient http(gw.port, seconds(40));
  // Routes are learned from the first answers; leases are taken at the first calls.
  const auto deadline = SteadyClock::now() + seconds(30);
  while (HopCalls(gw.port, "answered") < 8 && SteadyClock::now() < deadline) {
    ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 1, "warm-up"));
  }
  const double answered0 = HopCalls(gw.port, "answered");
  ASSERT_GE(answered0, 8) << "the gateway never called an owner directly\n" << cluster.Logs();
  ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 100, "two owners"));
  const double answered1 = HopCalls(gw.port, "answered");
  // 100 fan-outs over 4 partitions and 100 single keys: all but a few go over the hop.
  EXPECT_GE(answered1 - answered0, 400) << cluster.Logs();
  // A fan-out's calls to one owner travel together: fewer requests than calls.
  auto m = ScrapeMetrics(gw.port);
  ASSERT_TRUE(m) << m.error();
  const double requests = m->Value("kleaf_owner_hop_requests_total").value_or(0);
  EXPECT_LT(requests, answered1) << "no request carried the calls of two partitions of one owner";

  // A third allocator joins: partitions move away from owners that stay up and refuse them.
  Node& a3 = cluster.AddAllocator("alloc-3");
  ASSERT_TRUE(cluster.Start({&a3}));
  ASSERT_TRUE(cluster.WaitBalanced({&a1, &a2, &a3}, seconds(60))) << cluster.Logs();
  ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 50, "three owners"));
  // An owner is killed: its address fails until the gateway learns the new owners.
  a1.process->Kill();
  ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 50, "after kill -9"));
  const double stale = HopCalls(gw.port, "refused") + HopCalls(gw.port, "failed");
  std::cout << "hopgw: " << answered1 - answered0 << " of 500 calls answered over the hop with two "
            << "owners, " << answered1 << " calls in " << requests << " requests; " << stale
            << " calls on stale routes sent through the requests topic" << std::endl;
  EXPECT_GT(stale, 0) << "no call met a stale route: the test moved nothing";
  const double answered2 = HopCalls(gw.port, "answered");
  ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 100, "settled"));
  EXPECT_GE(HopCalls(gw.port, "answered") - answered2, 400)
      << "the gateway did not learn the new owners' routes\n"
      << cluster.Logs();
  EXPECT_EQ(HopCalls(gw.port, "older_generation"), 0);
}

// A gateway's hop workers serve every owner. An owner that stops answering (paused here) holds at
// most half of them until its calls time out (kafka.request_timeout_ms, 3 s here), and its other
// queued calls go through the requests topic as soon as one fails: calls to the other owner are
// answered over the hop meanwhile, at once. (With every worker free to wait on the paused owner,
// the other owner's calls waited up to the timeout.)
TEST_F(OwnerHopIntegrationTest, APausedOwnerDoesNotHoldUpCallsToTheOthers) {
  // L 5 s: the live owner's lease rides out a slow commit on busy cores (at 1 s it lapses after
  // about 0.6 s without one, and its calls would leave the hop).
  Cluster cluster(broker_, "hopstall",
                  {{"sequence.lease_ms", "5000"}, {"sequence.owner_hop", "true"}});
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& a2 = cluster.AddAllocator("alloc-2");
  Node& gw = cluster.AddGateway("gw-a", 0);
  constexpr double kTimeoutS = 3;
  cluster.Reconfigure(gw, {{"kafka.request_timeout_ms", "3000"}});
  ASSERT_NO_FATAL_FAILURE(StartTwoOwners(cluster, a1, a2, gw));
  // A key of each partition of the owner to pause: the router keeps two calls of one partition in
  // flight (SequenceRouter::kSeqInFlight), so two partitions can take four workers.
  auto served = ServedPartitions(a1);
  ASSERT_TRUE(served && served->size() >= 2) << (served ? "fewer than 2" : served.error());
  std::vector<uint64_t> paused_keys;
  for (int32_t p : *served) paused_keys.push_back(KeyOnPartition(p));
  auto other = ServedPartitions(a2);
  ASSERT_TRUE(other && !other->empty()) << (other ? "none" : other.error());
  const uint64_t live_key = KeyOnPartition(*other->begin());
  // Routes learned and leases taken on both owners.
  const auto deadline = SteadyClock::now() + seconds(30);
  const double wanted = 3.0 * static_cast<double>(paused_keys.size() + 1);
  while (HopCalls(gw.port, "answered") < wanted && SteadyClock::now() < deadline) {
    for (uint64_t key : paused_keys) ASSERT_TRUE(GatewayNextWhenAnswered(gw.port, key));
    ASSERT_TRUE(GatewayNextWhenAnswered(gw.port, live_key));
  }
  ASSERT_GE(HopCalls(gw.port, "answered"), wanted) << cluster.Logs();

  a1.process->Signal(SIGSTOP);
  // Calls to the paused owner, arriving one by one over its partitions: each would take a worker.
  std::vector<std::thread> stuck;
  for (int i = 0; i < 8; ++i) {
    stuck.emplace_back([&, i] {
      std::this_thread::sleep_for(milliseconds(40 * i));
      // Answered once a1 wakes, or refused: either way.
      (void)GatewayNext(gw.port, paused_keys[static_cast<size_t>(i) % paused_keys.size()]);
    });
  }
  std::this_thread::sleep_for(milliseconds(400));
  const double answered = HopCalls(gw.port, "answered");
  double slowest_s = 0;
  std::string live_error;  // the threads above are joined before any assertion ends the test
  for (int i = 0; i < 10 && live_error.empty(); ++i) {
    const auto asked = SteadyClock::now();
    auto v = GatewayNext(gw.port, live_key);
    const double took_s = std::chrono::duration<double>(SteadyClock::now() - asked).count();
    if (!v) live_error = "call " + std::to_string(i) + " to the live owner: " + v.error();
    slowest_s = std::max(slowest_s, took_s);
  }
  const double live_over_hop = HopCalls(gw.port, "answered") - answered;
  a1.process->Signal(SIGCONT);
  for (auto& t : stuck) t.join();
  ASSERT_TRUE(live_error.empty()) << live_error;
  std::cout << "hopstall: with one owner paused, 10 calls to the other took at most " << slowest_s
            << " s (" << live_over_hop << " answered over the hop; the hop's timeout " << kTimeoutS
            << " s)" << std::endl;
  EXPECT_LT(slowest_s, kTimeoutS / 2) << "calls to a live owner waited for the paused one's";
  EXPECT_GE(live_over_hop, 10);
}

// A1's check across nodes: owners send their CLOCK_MONOTONIC_RAW reading with every hop answer,
// and a gateway estimates each owner's clock rate against its own (over 2 s here, a test hook, for
// 60 s). An owner whose every clock runs 5 % fast (libfaketime "x1.05") must show about +50,000
// ppm, within the exported error and a margin for the scheduler.
TEST_F(OwnerHopIntegrationTest, AGatewayEstimatesEachOwnersClockRate) {
  if (e2e::Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  Cluster cluster(broker_, "hoprate",
                  {{"sequence.lease_ms", "1000"}, {"sequence.owner_hop", "true"}});
  const int32_t p = 1;
  const uint64_t key = KeyOnPartition(p);
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  auto owner = StartNode(a1, {}, e2e::FaketimePrefix("+0 x1.05"));
  ASSERT_TRUE(owner) << owner.error();
  auto gateway = StartNode(gw, {{"KLEAF_GATEWAY_TEST_RATE_WINDOW_MS", "2000"}});
  ASSERT_TRUE(gateway) << gateway.error();
  auto put = AdminCall(gw.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       json{{"section_size", 1}, {"step", 1000}}.dump());
  ASSERT_TRUE(put) << put.error();
  auto first = GatewayNextWhenAnswered(gw.port, key);
  ASSERT_TRUE(first) << first.error() << "\n" << cluster.Logs();

  const std::string label = "owner=\"127.0.0.1:" + std::to_string(a1.port) + "\"";
  std::optional<Metrics> estimated;
  const auto deadline = SteadyClock::now() + seconds(30);
  while (SteadyClock::now() < deadline) {
    (void)GatewayNext(gw.port, key);
    auto m = ScrapeMetrics(gw.port);
    if (m && m->Value("kleaf_sequence_owner_clock_rate_ppm", label).has_value() &&
        HopCalls(gw.port, "answered") > 0) {
      estimated = *m;
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(estimated) << "no estimate of " << label << "\n" << cluster.Logs();
  const double ppm = *estimated->Value("kleaf_sequence_owner_clock_rate_ppm", label);
  const double error =
      estimated->Value("kleaf_sequence_owner_clock_rate_error_ppm", label).value_or(-1);
  std::cout << "owner clock rate: " << ppm << " ppm, error " << error << " ppm\n";
  EXPECT_GE(error, 0);
  EXPECT_NEAR(ppm, 50'000, error + 2'000);
}

// With http.tls the owner hop runs over TLS: the allocators ask for client certificates
// (http.tls.client_ca_file, mutual TLS) and the gateway offers its own and trusts the owner's.
// The nodes share one certificate, for both ends; the gateway's API is HTTPS.
TEST_F(OwnerHopIntegrationTest, TheHopRunsOverMutualTls) {
  Cluster cluster(broker_, "hoptls",
                  {{"sequence.lease_ms", "1000"}, {"sequence.owner_hop", "true"}});
  e2e::Pki pki(cluster.dir());
  ASSERT_FALSE(HasFatalFailure());
  pki.IssueNode("node", "11");
  ASSERT_FALSE(HasFatalFailure());
  const std::string tls = e2e::TlsSetting(pki.Cert("node"), pki.Key("node"));
  Node& a1 = cluster.AddAllocator("alloc-1");
  cluster.Reconfigure(a1,
                      {{"http.tls", "{cert_file: " + e2e::Quote(pki.Cert("node")) +
                                        ", key_file: " + e2e::Quote(pki.Key("node")) +
                                        ", client_ca_file: " + e2e::Quote(pki.CaCert()) + "}"}});
  Node& gw = cluster.AddGateway("gw-a", 0);
  cluster.Reconfigure(gw, {{"http.tls", tls}});
  const e2e::Transport transport{pki.CaCert()};
  auto started = cluster.Start({&a1});
  ASSERT_TRUE(started) << started.error();
  started = cluster.Start({&gw});
  ASSERT_TRUE(started) << started.error();
  auto put = AdminCall(gw.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       json{{"section_size", 1}, {"step", 1000}}.dump(), transport);
  ASSERT_TRUE(put) << put.error();
  KeyValues values;
  e2e::HttpClient http(gw.port, seconds(40), transport);
  const auto deadline = SteadyClock::now() + seconds(30);
  while (HopCalls(gw.port, "answered", transport) < 8 && SteadyClock::now() < deadline) {
    ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 1, "warm-up"));
  }
  const double answered0 = HopCalls(gw.port, "answered", transport);
  ASSERT_GE(answered0, 8) << "no call over the TLS hop was answered\n" << cluster.Logs();
  ASSERT_NO_FATAL_FAILURE(values.Rounds(http, 50, "tls"));
  EXPECT_GE(HopCalls(gw.port, "answered", transport) - answered0, 200) << cluster.Logs();
  EXPECT_EQ(HopCalls(gw.port, "failed", transport), 0) << cluster.Logs();
}

}  // namespace
}  // namespace kleaf::integration
