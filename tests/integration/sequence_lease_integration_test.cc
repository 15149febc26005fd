// The lease of "I5 with a lease" (docs/architecture.md, R2 to R5): after each takeover an owner
// waits out the lease that the partition's newest lease record names before it answers that
// partition's sequence calls, and it holds, renews and releases a lease of its own
// (AnOwnerHoldsRenewsAndReleasesItsLease). For the wait, the test plays the
// earlier owners: with a transactional producer of its own it commits lease records into three
// state partitions (a `held` one with a long lease; a `released` one; a committed generation that
// goes back, which only a writer other than kleaf's allocators can make), then a fresh allocator
// takes the partitions over. Its sequence calls must wait the held record's lease out (never
// answered before it could have ended), answer at once after the release, and refuse for good
// where the generations go back. A restart on the same state then waits again, although its
// restore reads nothing of the log below its applied offset: the store's copy of the record.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "allocator/sequences.h"
#include "base/mutex.h"
#include "kafka/group_consumer.h"
#include "kafka/message.h"
#include "kafka/txn_producer.h"
#include "state/lease_record.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSpace[] = "wait";
constexpr int64_t kSectionSize = 1;  // one key per section: each key picks its partition
// The held record's lease: above the allocators' own (sequence.lease_ms 1000 below), so the wait
// is the record's: 3000·(1 + 0.001) + 100 ms.
constexpr int64_t kRecordLeaseMs = 3000;
constexpr double kWaitS = (kRecordLeaseMs * 1.001 + 100) / 1000.0;

class SequenceLeaseIntegrationTest : public KafkaTest {};

// The first key 0, 1, ... whose section lies on state partition p.
uint64_t KeyOnPartition(int32_t p) { return SeqKeyOnPartition(kSpace, p); }

// One next value of `key` through the gateway: the value, or the status and body.
std::expected<uint64_t, std::string> Next(uint16_t port, uint64_t key) {
  return SeqNext(port, kSpace, key);
}

// Polls key's next value until it is answered (or `timeout`): the value and the seconds since
// `since`, and whether a refusal naming the takeover wait was seen before it.
struct FirstAnswer {
  uint64_t value = 0;
  double after_s = 0;
  bool refused_waiting = false;
  std::string last_error;
};
FirstAnswer PollNext(uint16_t port, uint64_t key, SteadyClock::time_point since, seconds timeout) {
  FirstAnswer out;
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    auto value = Next(port, key);
    if (value) {
      out.value = *value;
      out.after_s = std::chrono::duration<double>(SteadyClock::now() - since).count();
      return out;
    }
    out.last_error = value.error();
    if (value.error().find("waits out its previous owner's sequence lease") != std::string::npos)
      out.refused_waiting = true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  out.after_s = -1;
  return out;
}

// Starts `allocator`, then `gateway`, and creates the space through it: how both tests begin.
void StartWithSpace(Cluster& cluster, Node& allocator, Node& gateway) {
  StartWithSeqSpace(cluster, allocator, gateway, kSpace, 10);
}

TEST_F(SequenceLeaseIntegrationTest, ATakeoverWaitsOutTheNewestLeaseRecordAndKeepsItsCopy) {
  Cluster cluster(broker_, "seqwait", {{"sequence.lease_ms", "1000"}});
  const int32_t p_held = 0, p_released = 1, p_back = 2;
  const uint64_t k_held = KeyOnPartition(p_held);
  const uint64_t k_released = KeyOnPartition(p_released);
  const uint64_t k_back = KeyOnPartition(p_back);

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw));
  std::map<uint64_t, uint64_t> before;
  for (uint64_t key : {k_held, k_released, k_back}) {
    FirstAnswer a = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
    ASSERT_GE(a.after_s, 0) << "key " << key << ": " << a.last_error << "\n" << cluster.Logs();
    before[key] = a.value;
  }
  EXPECT_EQ(Stop(a1).code, 0);

  // The earlier owners' lease records, committed.
  {
    auto writer = kafka::TxnProducer::Create({{"bootstrap.servers", broker_.bootstrap}},
                                             cluster.prefix() + ".test-lease");
    ASSERT_TRUE(writer) << writer.error().message;
    ASSERT_TRUE((*writer)->Init(seconds(30)));
    ASSERT_TRUE((*writer)->Begin());
    const std::string state_topic = cluster.prefix() + ".state";
    const auto send = [&](int32_t p, uint64_t generation, state::LeaseState st) {
      state::LeaseRecord r{generation, "h-test", "earlier-owner", kRecordLeaseMs, true, st};
      ASSERT_TRUE((*writer)->Send(state_topic, p, state::LeaseKey(p), state::EncodeLease(r), {}));
    };
    send(p_held, 7, state::LeaseState::kHeld);
    send(p_released, 2, state::LeaseState::kHeld);
    send(p_released, 2, state::LeaseState::kReleased);
    send(p_back, 5, state::LeaseState::kHeld);
    send(p_back, 4, state::LeaseState::kHeld);
    ASSERT_TRUE((*writer)->Commit(seconds(30)));
  }

  // A fresh allocator (its own empty state) takes every partition over. It holds no lease of its
  // own (L 0: it still waits), so that its stop below leaves the test's records the newest.
  Node& a2 = cluster.AddNode("alloc-2", Node::Role::kAllocator, {{"sequence.lease_ms", "0"}});
  const auto spawned = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a2}));
  FirstAnswer held = PollNext(gw.port, k_held, spawned, seconds(60));
  ASSERT_GE(held.after_s, 0) << held.last_error << "\n" << cluster.Logs();
  std::cout << "seqwait: the held partition answered " << held.after_s
            << " s after the allocator was spawned (its wait: " << kWaitS << " s after its fence)"
            << std::endl;
  // Its fence came after the spawn, so no answer may come before the wait from the spawn.
  EXPECT_GE(held.after_s, kWaitS) << "answered before the earlier owner's lease could have ended";
  EXPECT_TRUE(held.refused_waiting) << "no refusal seen during the wait";
  EXPECT_GT(held.value, before[k_held]);

  FirstAnswer released = PollNext(gw.port, k_released, SteadyClock::now(), seconds(10));
  ASSERT_GE(released.after_s, 0) << released.last_error;
  EXPECT_GT(released.value, before[k_released]);

  // Generations that go back among committed records: refused, and still refused later.
  auto back = Next(gw.port, k_back);
  ASSERT_FALSE(back) << "a partition whose lease records go back answered " << *back;
  EXPECT_NE(back.error().find("goes back"), std::string::npos) << back.error();

  auto metrics = ScrapeMetrics(a2.port);
  ASSERT_TRUE(metrics) << metrics.error();
  const auto wait_s = [&](int32_t p) {
    return metrics->Value("kleaf_sequence_takeover_wait_seconds",
                          "partition=\"" + std::to_string(p) + "\"");
  };
  const auto row = [&](int32_t p, const char* name) {
    return metrics->Value("kleaf_sequence_takeover_waits_total",
                          "partition=\"" + std::to_string(p) + "\",row=\"" + name + "\"");
  };
  EXPECT_EQ(row(p_held, "other"), 1.0);
  EXPECT_GE(wait_s(p_held).value_or(0), kWaitS - 0.001);
  EXPECT_EQ(row(p_released, "released"), 1.0);
  EXPECT_LE(wait_s(p_released).value_or(1), 0.2);
  EXPECT_EQ(row(3, "none"), 1.0) << "a partition without lease records waits only the margin";
  EXPECT_LE(wait_s(3).value_or(1), 0.2);
  // A wait that ended without a sequence call of its partition ends all the same (the rollback
  // past the bridge waits for this gauge to be 0); one refused for good stays.
  EXPECT_EQ(metrics->Value("kleaf_sequence_takeover_waiting", "partition=\"3\""), 0.0);
  EXPECT_EQ(metrics->Value("kleaf_sequence_takeover_waiting",
                           "partition=\"" + std::to_string(p_back) + "\""),
            1.0);
  EXPECT_GE(metrics
                ->Value("kleaf_sequence_refusals_total",
                        "partition=\"" + std::to_string(p_held) + "\",reason=\"waiting\"")
                .value_or(0),
            1.0);

  // Restarted on the same state: the restore reads the log from its applied offset, past the
  // records; the store's copy still names the held lease.
  EXPECT_EQ(Stop(a2).code, 0);
  const auto restarted = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a2}));
  FirstAnswer again = PollNext(gw.port, k_held, restarted, seconds(60));
  ASSERT_GE(again.after_s, 0) << again.last_error << "\n" << cluster.Logs();
  EXPECT_GE(again.after_s, kWaitS) << "the restart forgot the lease record (the store's copy)";
  EXPECT_GT(again.value, held.value);
  const auto lines = LinesWith(a2.Log(), "lease records read again");
  EXPECT_TRUE(lines.empty()) << "the copy was complete, yet read again: " << lines.front();
}

// An owner's own lease (R2, R3, R5): a partition with a sequence call commits a `held` record and
// renews it while nobody calls, a partition without calls commits none; a SIGTERM releases it, so
// the next owner answers at once; a kill -9 does not, so the next owner waits L·(1+ρ) + δ after its
// fence; an idle partition releases its lease and takes a new one at its next call.
TEST_F(SequenceLeaseIntegrationTest, AnOwnerHoldsRenewsAndReleasesItsLease) {
  Cluster cluster(broker_, "seqhold",
                  {{"sequence.lease_ms", "1000"}, {"sequence.idle_release_ms", "3000"}});
  // L 1000: renewals every 333 ms; a takeover after a kill waits 1000·1.001 + 100 ms.
  constexpr double kKillWaitS = (1000 * 1.001 + 100) / 1000.0;
  const int32_t p = 0, p_quiet = 3;
  const uint64_t key = KeyOnPartition(p);
  const std::string part = "partition=\"" + std::to_string(p) + "\"";
  const std::string quiet = "partition=\"" + std::to_string(p_quiet) + "\"";
  // Polls `node`'s /metrics until `done` holds (or 30 s); the last scrape.
  const auto await = [&](const Node& node, const std::function<bool(const Metrics&)>& done,
                         const std::string& what) -> std::optional<Metrics> {
    const auto deadline = SteadyClock::now() + seconds(30);
    std::optional<Metrics> last;
    while (SteadyClock::now() < deadline) {
      auto m = ScrapeMetrics(node.port);
      if (m) {
        last = *m;
        if (done(*m)) return last;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ADD_FAILURE() << "timed out waiting for " << what << "\n" << cluster.Logs();
    return std::nullopt;
  };
  const auto renewals = [&](const Metrics& m, const std::string& labels, const char* via) {
    return m.Value("kleaf_sequence_lease_renewals_total", labels + ",via=\"" + via + "\"")
        .value_or(0);
  };

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw));
  FirstAnswer first = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(first.after_s, 0) << first.last_error << "\n" << cluster.Logs();
  // Held, then renewed by records of its own while no call comes (3 renewals: about 1 s).
  auto held = await(
      a1,
      [&](const Metrics& m) {
        return m.Value("kleaf_sequence_lease_held", part) == 1.0 &&
               renewals(m, part, "record") >= 3;
      },
      "alloc-1's lease held and renewed three times");
  ASSERT_TRUE(held);
  EXPECT_LT(held->Value("kleaf_sequence_lease_age_seconds", part).value_or(9), 1.0);
  EXPECT_EQ(held->Value("kleaf_sequence_lease_held", quiet), 0.0);
  EXPECT_EQ(renewals(*held, quiet, "record") + renewals(*held, quiet, "transaction"), 0.0)
      << "a partition without sequence calls committed lease records";
  EXPECT_EQ(held->Value("kleaf_sequence_lease_expiries_total", part), 0.0);

  // A planned stop releases: the next owner waits only δ.
  EXPECT_EQ(Stop(a1).code, 0);
  EXPECT_EQ(LinesWith(a1.Log(), "released (stopping)").size(), 1u) << a1.Log();
  Node& a2 = cluster.AddAllocator("alloc-2");
  ASSERT_TRUE(cluster.Start({&a2}));
  FirstAnswer after_release = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(after_release.after_s, 0) << after_release.last_error << "\n" << cluster.Logs();
  EXPECT_GT(after_release.value, first.value);
  auto m2 = ScrapeMetrics(a2.port);
  ASSERT_TRUE(m2) << m2.error();
  EXPECT_EQ(m2->Value("kleaf_sequence_takeover_waits_total", part + ",row=\"released\""), 1.0);
  EXPECT_LE(m2->Value("kleaf_sequence_takeover_wait_seconds", part).value_or(9), 0.2);
  ASSERT_TRUE(await(
      a2, [&](const Metrics& m) { return m.Value("kleaf_sequence_lease_held", part) == 1.0; },
      "alloc-2's lease held"));

  // A kill -9 releases nothing: the next owner waits the lease out after its fence.
  a2.process->KillAndWait();
  Node& a3 = cluster.AddAllocator("alloc-3");
  const auto spawned = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a3}));
  FirstAnswer after_kill = PollNext(gw.port, key, spawned, seconds(60));
  ASSERT_GE(after_kill.after_s, 0) << after_kill.last_error << "\n" << cluster.Logs();
  EXPECT_GE(after_kill.after_s, kKillWaitS) << "answered before the killed owner's lease ended";
  EXPECT_TRUE(after_kill.refused_waiting);
  EXPECT_GT(after_kill.value, after_release.value);
  auto m3 = ScrapeMetrics(a3.port);
  ASSERT_TRUE(m3) << m3.error();
  EXPECT_EQ(m3->Value("kleaf_sequence_takeover_waits_total", part + ",row=\"other\""), 1.0);

  // Idle for idle_release_ms: released (committed), not renewed; the next call holds it again.
  auto idle = await(
      a3,
      [&](const Metrics& m) {
        return m.Value("kleaf_sequence_releases_total",
                       part + ",reason=\"idle\",outcome=\"committed\"") == 1.0;
      },
      "alloc-3's idle release");
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->Value("kleaf_sequence_lease_held", part), 0.0);
  FirstAnswer later = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(later.after_s, 0) << later.last_error;
  EXPECT_GT(later.value, after_kill.value);
  ASSERT_TRUE(await(
      a3, [&](const Metrics& m) { return m.Value("kleaf_sequence_lease_held", part) == 1.0; },
      "alloc-3's lease held again after the idle release"));
  // Its SIGTERM releases the lease it holds again; a fourth owner does not wait.
  EXPECT_EQ(Stop(a3).code, 0);
  Node& a4 = cluster.AddAllocator("alloc-4");
  ASSERT_TRUE(cluster.Start({&a4}));
  FirstAnswer last = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(last.after_s, 0) << last.last_error;
  EXPECT_GT(last.value, later.value);
  auto m4 = ScrapeMetrics(a4.port);
  ASSERT_TRUE(m4) << m4.error();
  EXPECT_EQ(m4->Value("kleaf_sequence_takeover_waits_total", part + ",row=\"released\""), 1.0);
}

// A lease record in a transaction without an outcome (docs/architecture.md, R3): the restore reads
// it in the tail past the last stable offset, waits it out, and writes it again in its rewrite of
// the maxima, so that an abort of that transaction cannot take it away. A fresh allocator after the
// abort must still find it, committed, and wait again.
TEST_F(SequenceLeaseIntegrationTest, ALeaseRecordPastAnOpenTransactionIsWaitedOutAndWrittenAgain) {
  Cluster cluster(broker_, "seqtail", {{"sequence.lease_ms", "1000"}});
  const int32_t p = 1;
  const uint64_t key = KeyOnPartition(p);
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw));
  FirstAnswer first = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(first.after_s, 0) << first.last_error << "\n" << cluster.Logs();
  EXPECT_EQ(Stop(a1).code, 0);

  // A holder's `held` record in a transaction that stays open (what a commit whose markers Kafka
  // dropped looks like to every reader).
  auto made = kafka::TxnProducer::Create(
      {{"bootstrap.servers", broker_.bootstrap}, {"transaction.timeout.ms", "600000"}},
      cluster.prefix() + ".test-open");
  ASSERT_TRUE(made) << made.error().message;
  std::unique_ptr<kafka::TxnProducer> open = std::move(*made);
  ASSERT_TRUE(open->Init(seconds(30)));
  ASSERT_TRUE(open->Begin());
  state::LeaseRecord held{
      3, "h-test", "earlier-owner", kRecordLeaseMs, true, state::LeaseState::kHeld};
  ASSERT_TRUE(
      open->Send(cluster.prefix() + ".state", p, state::LeaseKey(p), state::EncodeLease(held), {}));
  ASSERT_TRUE(open->Flush(seconds(10)));

  // It holds no lease of its own (L 0: it still waits), so that its stop below writes no record
  // over the rewrite's.
  Node& a2 = cluster.AddNode("alloc-2", Node::Role::kAllocator, {{"sequence.lease_ms", "0"}});
  const auto spawned = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a2}));
  FirstAnswer tail = PollNext(gw.port, key, spawned, seconds(60));
  ASSERT_GE(tail.after_s, 0) << tail.last_error << "\n" << cluster.Logs();
  EXPECT_GE(tail.after_s, kWaitS) << "the record in the tail was not waited out";
  EXPECT_GT(tail.value, first.value);
  EXPECT_EQ(Stop(a2).code, 0);

  // The operator ends the open transaction (kafka-transactions.sh abort does the same): its record
  // is gone for every reader; the rewrite's copy of it is committed.
  ASSERT_TRUE(open->Abort(seconds(30)));
  Node& a3 = cluster.AddAllocator("alloc-3");
  const auto fresh = SteadyClock::now();
  ASSERT_TRUE(cluster.Start({&a3}));
  FirstAnswer again = PollNext(gw.port, key, fresh, seconds(60));
  ASSERT_GE(again.after_s, 0) << again.last_error << "\n" << cluster.Logs();
  EXPECT_GE(again.after_s, kWaitS) << "the lease record did not outlast the abort (no rewrite)";
  EXPECT_GT(again.value, tail.value);
}

// The group check ("Allocators of different versions"): a member of the allocators' group whose
// client id lacks ;seqwait=1 (an allocator of a version without leases, which would take
// partitions over without waiting leases out) makes an allocator drop the leases it holds and
// take none, serving its sequences with a commit per batch, until that member leaves.
TEST_F(SequenceLeaseIntegrationTest, NoLeaseWhileAGroupMemberCannotWait) {
  Cluster cluster(broker_, "seqold", {{"sequence.lease_ms", "1000"}});
  const auto label = [](int32_t p) { return "partition=\"" + std::to_string(p) + "\""; };
  const std::string old_member = "reason=\"old_member\"";
  // Polls `node`'s /metrics until `done` holds (or 30 s), after `act` each time; the last scrape.
  const auto await = [&](const Node& node, const std::function<bool(const Metrics&)>& done,
                         const std::string& what,
                         const std::function<void()>& act = {}) -> std::optional<Metrics> {
    const auto deadline = SteadyClock::now() + seconds(30);
    while (SteadyClock::now() < deadline) {
      if (act) act();
      auto m = ScrapeMetrics(node.port);
      if (m && done(*m)) return *m;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ADD_FAILURE() << "timed out waiting for " << what << "\n" << cluster.Logs();
    return std::nullopt;
  };

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  ASSERT_NO_FATAL_FAILURE(StartWithSpace(cluster, a1, gw));
  const int32_t p0 = 0;
  FirstAnswer first = PollNext(gw.port, KeyOnPartition(p0), SteadyClock::now(), seconds(30));
  ASSERT_GE(first.after_s, 0) << first.last_error << "\n" << cluster.Logs();
  ASSERT_TRUE(await(
      a1,
      [&](const Metrics& m) {
        return m.Value("kleaf_sequence_lease_held", label(p0)) == 1.0 &&
               m.Value("kleaf_sequence_lease_blocked", old_member) == 0.0;
      },
      "alloc-1's lease held, every member waiting"));

  // A member of an older version joins the allocators' group (and answers nothing).
  kafka::Properties props{{"bootstrap.servers", broker_.bootstrap},
                          {"group.id", cluster.prefix() + ".allocators"},
                          {"client.id", "kleaf-before-leases"}};
  if (const char* protocol = std::getenv("KLEAF_TEST_GROUP_PROTOCOL"); protocol && *protocol) {
    props["group.protocol"] = protocol;
  }
  auto old = kafka::GroupConsumer::Create(props, {cluster.prefix() + ".requests"});
  ASSERT_TRUE(old) << old.error().message;
  Mutex mu;
  std::set<int32_t> old_holds;  // guarded by mu
  std::atomic<bool> leave{false};
  std::thread member([&] {
    while (!leave.load()) {
      auto event = (*old)->Poll(milliseconds(100));
      MutexLock lock(mu);
      for (const auto& tp : event.partitions) {
        if (event.kind == kafka::GroupConsumer::Event::Kind::kAssigned)
          old_holds.insert(tp.partition);
        if (event.kind == kafka::GroupConsumer::Event::Kind::kRevoked)
          old_holds.erase(tp.partition);
      }
    }
  });
  const auto leave_group = [&] {
    if (leave.exchange(true)) return;
    member.join();
    (*old)->Close();
  };
  struct Leave {
    std::function<void()> f;
    ~Leave() { f(); }
  } leave_at_end{leave_group};

  // alloc-1 holds no lease, and names the member; a partition it still serves answers.
  int32_t kept = -1;
  auto blocked = await(
      a1,
      [&](const Metrics& m) {
        if (m.Value("kleaf_sequence_lease_blocked", old_member) != 1.0) return false;
        MutexLock lock(mu);
        if (old_holds.empty()) return false;  // the rebalance is not over
        kept = -1;
        for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
          if (m.Value("kleaf_sequence_lease_held", label(p)).value_or(0) != 0.0) return false;
          if (m.Value("kleaf_allocator_partition_serving", label(p)) == 1.0 &&
              !old_holds.contains(p)) {
            kept = p;
          }
        }
        return kept >= 0;
      },
      "alloc-1's leases blocked by the old member");
  ASSERT_TRUE(blocked);
  EXPECT_FALSE(LinesWith(a1.Log(), "\"kleaf-before-leases\"").empty()) << a1.Log();
  const uint64_t key = KeyOnPartition(kept);
  // The first after alloc-1's takeover wait (δ after its own release at the rebalance).
  FirstAnswer taken = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(taken.after_s, 0) << taken.last_error << "\n" << cluster.Logs();
  uint64_t last = taken.value;
  for (int i = 0; i < 20; ++i) {
    auto v = Next(gw.port, key);
    ASSERT_TRUE(v) << v.error() << "\n" << cluster.Logs();
    EXPECT_GT(*v, last);
    last = *v;
  }
  auto after = ScrapeMetrics(a1.port);
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->Value("kleaf_sequence_lease_held", label(kept)), 0.0)
      << "a lease was taken with a member in the group that would not wait it out";
  EXPECT_EQ(after->Value("kleaf_sequence_lease_blocked", old_member), 1.0);

  // It leaves: the next calls take a lease again.
  leave_group();
  ASSERT_TRUE(await(
      a1,
      [&](const Metrics& m) {
        return m.Value("kleaf_sequence_lease_blocked", old_member) == 0.0 &&
               m.Value("kleaf_sequence_lease_held", label(kept)) == 1.0;
      },
      "alloc-1's lease held again after the old member left", [&] { (void)Next(gw.port, key); }));
}

// A1's check on the node: an allocator whose kernel frequency correction (adjtimex; the test hook
// KLEAF_ALLOCATOR_TEST_CLOCK_CORRECTION fixes it at 900 ppm, above ρ/2 = 500 ppm, and counts drift
// over 8 s instead of 10 minutes) stayed above ρ/2 for the window drops the lease it held and takes
// none: it serves its sequences with a commit per batch, exports the correction and the drift, and
// names it in its log.
TEST_F(SequenceLeaseIntegrationTest, AClockCorrectionAboveHalfRhoForTheWindowDropsTheLeases) {
  Cluster cluster(broker_, "seqdrift", {{"sequence.lease_ms", "1000"}});
  const std::string part = "partition=\"0\"";
  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw = cluster.AddGateway("gw-a", 0);
  auto started = StartNode(a1, {{"KLEAF_ALLOCATOR_TEST_CLOCK_CORRECTION", "900,8000"}});
  ASSERT_TRUE(started) << started.error();
  ASSERT_TRUE(cluster.Start({&gw}));
  auto put = AdminCall(gw.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       json{{"section_size", kSectionSize}, {"step", 10}}.dump());
  ASSERT_TRUE(put) << put.error();
  const uint64_t key = KeyOnPartition(0);
  FirstAnswer first = PollNext(gw.port, key, SteadyClock::now(), seconds(30));
  ASSERT_GE(first.after_s, 0) << first.last_error << "\n" << cluster.Logs();

  // A lease is held before the window ends (8 s after the start)...
  uint64_t last = first.value;
  bool held = false;
  for (auto until = SteadyClock::now() + seconds(20); !held && SteadyClock::now() < until;) {
    auto v = Next(gw.port, key);
    ASSERT_TRUE(v) << v.error() << "\n" << cluster.Logs();
    EXPECT_GT(*v, last);
    last = *v;
    auto m = ScrapeMetrics(a1.port);
    ASSERT_TRUE(m) << m.error();
    ASSERT_EQ(m->Value("kleaf_sequence_clock_drift"), 0.0)
        << "the drift window ended before a lease was held: the drop cannot be shown";
    held = m->Value("kleaf_sequence_lease_held", part) == 1.0;
  }
  ASSERT_TRUE(held) << cluster.Logs();
  // ...then calls keep coming (each would take or renew a lease), and the drift takes it away.
  std::optional<Metrics> drifting;
  const auto deadline = SteadyClock::now() + seconds(30);
  while (SteadyClock::now() < deadline) {
    auto v = Next(gw.port, key);
    ASSERT_TRUE(v) << v.error() << "\n" << cluster.Logs();
    EXPECT_GT(*v, last);
    last = *v;
    auto m = ScrapeMetrics(a1.port);
    if (m && m->Value("kleaf_sequence_clock_drift") == 1.0 &&
        m->Value("kleaf_sequence_lease_held", part) == 0.0) {
      drifting = *m;
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(drifting) << "no drift seen, or the lease still held\n" << cluster.Logs();
  EXPECT_EQ(drifting->Value("kleaf_sequence_clock_slew_ppm"), 900.0);
  EXPECT_EQ(drifting->Value("kleaf_sequence_clock_synchronized"), 1.0);
  EXPECT_EQ(drifting->Value("kleaf_sequence_lease_blocked", "reason=\"clock_drift\""), 1.0);
  EXPECT_FALSE(LinesWith(a1.Log(), "has stayed above 500 ppm").empty()) << a1.Log();
  // Served still, with a commit per batch: no lease comes back while the drift lasts.
  for (int i = 0; i < 20; ++i) {
    auto v = Next(gw.port, key);
    ASSERT_TRUE(v) << v.error();
    EXPECT_GT(*v, last);
    last = *v;
  }
  auto after = ScrapeMetrics(a1.port);
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->Value("kleaf_sequence_lease_held", part), 0.0)
      << "a lease was held by a node whose clock drifts beyond ρ/2";
}

}  // namespace
}  // namespace kleaf::integration
