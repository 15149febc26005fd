// BatchConsumer on the real broker (invariant I4): consumer processes (batch_consumer_example) in
// one group, with members joining, killed -9 and restarted, stopped past their session: no ID is
// ever printed twice, and the group makes its way through the topic.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "kafka/client.h"
#include "kleaf/batch_consumer.h"
#include "tests/integration/client/client_env.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Procs = std::vector<std::unique_ptr<e2e::KleafProcess>>;

class BatchConsumerIntegrationTest : public KafkaTest {
 protected:
  // Every ID printed by any of `procs`, with the process that printed it first; the IDs printed
  // more than once go to `duplicates`.
  static std::map<int64_t, int> Printed(const Procs& procs, std::vector<int64_t>* duplicates = nullptr) {
    std::map<int64_t, int> seen;
    for (size_t i = 0; i < procs.size(); ++i) {
      for (int64_t id : PrintedIds(procs[i]->Stdout())) {
        bool fresh = seen.emplace(id, static_cast<int>(i)).second;
        if (!fresh && duplicates != nullptr) duplicates->push_back(id);
      }
    }
    return seen;
  }
  // Printed(), failing the test on a duplicate.
  static std::map<int64_t, int> PrintedOnce(const Procs& procs) {
    std::vector<int64_t> duplicates;
    auto seen = Printed(procs, &duplicates);
    std::string some;
    for (size_t i = 0; i < std::min<size_t>(duplicates.size(), 10); ++i) {
      some += " " + std::to_string(duplicates[i]) + " (first by consumer " +
              std::to_string(seen[duplicates[i]]) + ")";
    }
    EXPECT_TRUE(duplicates.empty()) << duplicates.size() << " IDs printed twice:" << some;
    return seen;
  }
  static int64_t CountIn(const std::map<int64_t, int>& seen, int64_t from, int64_t to) {
    return std::distance(seen.lower_bound(from), seen.lower_bound(to));
  }
  // The partitions a batch_consumer_example holds by its last "stats: ... assigned=N" line; -1
  // before the first.
  static int Assigned(const e2e::KleafProcess& p) {
    auto lines = LinesWith(p.Stderr(), "stats: ");
    if (lines.empty()) return -1;
    auto at = lines.back().find("assigned=");
    return at == std::string::npos ? -1 : std::atoi(lines.back().c_str() + at + 9);
  }
  // Waits until each consumer in `alive` holds one of the 4 partitions (the group settled).
  static bool Settled(const Procs& procs, const std::vector<int>& alive) {
    return WaitUntil(
        [&] {
          for (int i : alive) {
            if (Assigned(*procs[i]) != 1) return false;
          }
          return true;
        },
        seconds(60));
  }
  // In-process consumer options for `streams` of `topic`, in the group `<topic>.group`.
  BatchConsumer::Options OptionsFor(const std::string& topic,
                                    std::vector<BatchConsumer::Stream> streams) const {
    BatchConsumer::Options options;
    options.bootstrap = broker_.bootstrap;
    options.topic = topic;
    options.streams = std::move(streams);
    options.group_id = topic + ".group";
    return options;
  }
  static std::string Stderrs(const Procs& procs) {
    std::string out;
    for (size_t i = 0; i < procs.size(); ++i) out += "--- consumer " + std::to_string(i) + ":\n" + procs[i]->Stderr();
    return out;
  }
};

constexpr int64_t kBatch = 50;
constexpr int kWaveBatches = 100;
constexpr int64_t kWaveIds = kBatch * kWaveBatches;

// Batches of wave w of tag "t" (IDs [1 + w*kWaveIds, 1 + (w+1)*kWaveIds)) with some batches of
// another tag in between (on that stream's own topic: the consumers, asking for "t" only, never
// fetch them).
std::vector<IdBatch> Wave(int w) {
  auto batches = SegmentBatches("t", 1 + w * kWaveIds, kBatch, kWaveBatches);
  auto other = SegmentBatches("other", 1'000'000 + w * 1000, 100, 10);
  for (size_t i = 0; i < other.size(); ++i) batches.insert(batches.begin() + 10 * i + 5, other[i]);
  return batches;
}

TEST_F(BatchConsumerIntegrationTest, FourConsumersWithRebalancesAndKillsNeverPrintAnIdTwice) {
  const std::string topic = UniqueTopic("four");
  const std::string group = topic + ".group";
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 4, {"t", "other"}));
  Procs procs;
  auto start = [&] {
    auto p = StartConsumer(broker_.bootstrap, topic, group, "t", seconds(60));
    ASSERT_TRUE(p) << p.error();
    procs.push_back(std::move(*p));
  };
  auto all_of_wave = [&](int w) {
    return WaitUntil([&] { return CountIn(Printed(procs), 1 + w * kWaveIds, 1 + (w + 1) * kWaveIds) == kWaveIds; },
                     seconds(60));
  };
  const auto began = SteadyClock::now();

  // Two members share wave 0; no crash, so every ID of it comes out.
  start();
  start();
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 4, Wave(0)));
  ASSERT_TRUE(all_of_wave(0)) << Stderrs(procs);

  // Two more join (a rebalance while wave 1 streams in): still no gap without a crash.
  start();
  start();
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 4, Wave(1)));
  ASSERT_TRUE(all_of_wave(1)) << Stderrs(procs);

  // Wave 2: once each member holds a partition, kill -9 consumer 1 as soon as it prints an ID
  // of wave 2, restart it (as consumer 4); wave 3: the same for consumer 0 (restarted as 5).
  for (int victim : {1, 0}) {
    const int w = victim == 1 ? 2 : 3;
    const std::vector<int> alive = victim == 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 2, 3, 4};
    ASSERT_TRUE(Settled(procs, alive)) << Stderrs(procs);
    ASSERT_TRUE(Publish(broker_.bootstrap, topic, 4, Wave(w)));
    bool mid_wave = WaitUntil(
        [&] {
          auto ids = PrintedIds(procs[victim]->Stdout());
          return !ids.empty() && ids.back() > w * kWaveIds;
        },
        seconds(30));
    procs[victim]->KillAndWait();
    EXPECT_TRUE(mid_wave) << "consumer " << victim << " printed no ID of wave " << w
                          << " before the kill\n" << Stderrs(procs);
    start();
  }
  // Wave 4 after the crashes: the survivors and the restarted members hand out all of it.
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 4, Wave(4)));
  ASSERT_TRUE(all_of_wave(4)) << Stderrs(procs);

  auto seen = PrintedOnce(procs);
  int64_t killed_waves = CountIn(seen, 1 + 2 * kWaveIds, 1 + 4 * kWaveIds);
  // A killed member loses what it had claimed and not printed: a few batches at most.
  EXPECT_GE(killed_waves, 2 * kWaveIds - 2 * 8 * kBatch) << "the kills lost more than they explain";
  EXPECT_EQ(CountIn(seen, 1, 1 + 5 * kWaveIds), static_cast<int64_t>(seen.size()))
      << "an ID outside the published ranges";
  std::cerr << "[four consumers] printed " << seen.size() << " of " << 5 * kWaveIds
            << " IDs (waves 2-3 with kills: " << killed_waves << ") in " << SecondsSince(began) << " s\n";
}

TEST_F(BatchConsumerIntegrationTest, BatchOfAConsumerKilledRightAfterClaimingIsNeverHandedOutAgain) {
  const std::string topic = UniqueTopic("claim");
  const std::string group = topic + ".group";
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"g"}));
  // Enough batches that the first member cannot drain the topic between its first line and the
  // kill (it hands out IDs as fast as it can).
  constexpr int kBatches = 500;
  constexpr int64_t kSize = 10;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("g", 0, kSize, kBatches)));

  Procs procs;
  auto first = StartConsumer(broker_.bootstrap, topic, group, "g", seconds(60));
  ASSERT_TRUE(first) << first.error();
  procs.push_back(std::move(*first));
  ASSERT_TRUE(WaitUntil([&] { return !PrintedIds(procs[0]->Stdout()).empty(); }, seconds(30)))
      << procs[0]->Stderr();
  procs[0]->KillAndWait();
  const auto killed_ids = PrintedIds(procs[0]->Stdout());
  const int64_t last_batch = killed_ids.back() / kSize;  // the batch it was in when killed
  ASSERT_LT(last_batch, kBatches - 10) << "the first member drained the topic before the kill";

  // The new member gets the partition once the killed one's session expired (6 s).
  auto second = StartConsumer(broker_.bootstrap, topic, group, "g", seconds(60));
  ASSERT_TRUE(second) << second.error();
  procs.push_back(std::move(*second));
  const int64_t last_id = kBatches * kSize - 1;
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto ids = PrintedIds(procs[1]->Stdout());
        return !ids.empty() && ids.back() == last_id;
      },
      seconds(60)))
      << procs[1]->Stderr();
  procs[1]->KillAndWait();

  auto seen = PrintedOnce(procs);
  const auto ids = PrintedIds(procs[1]->Stdout());
  ASSERT_FALSE(ids.empty()) << procs[1]->Stderr();
  for (int64_t id : ids) {
    EXPECT_GT(id / kSize, last_batch) << "the new member got ID " << id << " of batch "
                                      << id / kSize << ", which the killed one had claimed";
  }
  // The killed member lost what it had claimed and not printed: at most a full buffer (one claim
  // takes the run of fetched batches the buffer has room for when a caller waits, up to
  // max_buffered_batches, 16 in the example). The rest comes out. The earlier bound of 3 batches
  // assumed a slow consumer: with a faster Next() on a loaded machine (branch i16-bench) the new
  // member printed 4,500 IDs where it asked for 4,540.
  constexpr int64_t kMaxBufferedBatches = 16;
  EXPECT_GE(static_cast<int64_t>(ids.size()),
            (kBatches - last_batch - 1 - kMaxBufferedBatches) * kSize);
}

TEST_F(BatchConsumerIntegrationTest, MemberStoppedPastItsSessionNeverHandsOutWhatTheGroupMovedOn) {
  const std::string topic = UniqueTopic("stopped");
  const std::string group = topic + ".group";
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"s"}));
  constexpr int64_t kSize = 10;
  Procs procs;
  auto a = StartConsumer(broker_.bootstrap, topic, group, "s", seconds(120));
  ASSERT_TRUE(a) << a.error();
  procs.push_back(std::move(*a));
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("s", 0, kSize, 5)));
  ASSERT_TRUE(WaitUntil([&] { return PrintedIds(procs[0]->Stdout()).size() == 5 * kSize; }, seconds(30)))
      << procs[0]->Stderr();

  // A is stopped (as by a long pause) while more batches arrive; B takes over once A's session
  // expires and hands them out.
  procs[0]->Signal(SIGSTOP);
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("s", 5 * kSize, kSize, 20)));
  auto b = StartConsumer(broker_.bootstrap, topic, group, "s", seconds(120));
  ASSERT_TRUE(b) << b.error();
  procs.push_back(std::move(*b));
  bool taken_over = WaitUntil([&] { return !PrintedIds(procs[1]->Stdout()).empty(); }, seconds(40));
  // A resumes: whatever librdkafka had fetched for it, its commits carry a stale generation.
  procs[0]->Signal(SIGCONT);
  ASSERT_TRUE(taken_over) << procs[1]->Stderr();
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("s", 25 * kSize, kSize, 10)));
  // The group (A rejoined, or B) hands out the last batches.
  ASSERT_TRUE(WaitUntil([&] { return Printed(procs).contains(35 * kSize - 1); }, seconds(60)))
      << Stderrs(procs);
  auto seen = PrintedOnce(procs);
  EXPECT_GE(CountIn(seen, 25 * kSize, 35 * kSize), 10 * kSize - 3 * kSize);
  std::cerr << "[stopped member] " << LinesWith(procs[0]->Stderr(), "stats:").size()
            << " stats lines; last: "
            << (LinesWith(procs[0]->Stderr(), "stats:").empty() ? std::string("none")
                                                                : LinesWith(procs[0]->Stderr(), "stats:").back())
            << "\n";
}

// The ground BatchConsumer stands on: a member the group moved on without cannot commit, and the
// new owner does not see its attempt. A stops polling past max.poll.interval.ms, so it is dropped
// from the group and B takes the partition over.
TEST_F(BatchConsumerIntegrationTest, CommitOfAMemberTheGroupDroppedIsRejected) {
  const std::string topic = UniqueTopic("stale");
  const std::string group = topic + ".group";
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"z"}));
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("z", 0, 10, 3)));
  const std::string z_topic = StreamTopic(topic, "z", IdBatch::Mode::kSegment);
  const kafka::Properties props{{"bootstrap.servers", broker_.bootstrap},
                                {"group.id", group},
                                {"session.timeout.ms", "6000"},
                                {"max.poll.interval.ms", "6000"},
                                {"heartbeat.interval.ms", "500"}};
  auto first_message = [](kafka::GroupConsumer& c) -> std::optional<kafka::Message> {
    const auto deadline = SteadyClock::now() + seconds(40);
    while (SteadyClock::now() < deadline) {
      auto ev = c.Poll(milliseconds(100));
      if (ev.kind == kafka::GroupConsumer::Event::Kind::kMessage) return ev.message;
    }
    return std::nullopt;
  };
  auto a = kafka::GroupConsumer::Create(props, {z_topic});
  ASSERT_TRUE(a) << a.error().message;
  auto m = first_message(**a);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->offset, 0);
  ASSERT_TRUE((*a)->Commit({{z_topic, 0, 1}}, seconds(10)));  // A claims batch 0

  // A stops polling; B joins and gets the partition once A is out, starting at A's commit.
  auto b = kafka::GroupConsumer::Create(props, {z_topic});
  ASSERT_TRUE(b) << b.error().message;
  auto taken = first_message(**b);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->offset, 1);
  auto stale = (*a)->Commit({{z_topic, 0, 3}}, seconds(10));
  EXPECT_FALSE(stale) << "a member the group dropped committed";
  if (!stale) std::cerr << "[stale commit] rejected: " << stale.error().message << "\n";
  auto committed = (*b)->Committed({{z_topic, 0}}, seconds(10));
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_EQ(committed->front().offset, 1);
  EXPECT_TRUE((*b)->Commit({{z_topic, 0, 2}}, seconds(10)));  // the owner can
}

// A member that paused fetching (many records fetched, nobody taking IDs) and then goes through
// a rebalance must fetch again whatever it is assigned: a pause that outlived the rebalance would
// leave its partition unread for good. And the other member, starting at the committed offset,
// hands out nothing the first one claimed.
TEST_F(BatchConsumerIntegrationTest, PausedMemberFetchesAgainAfterARebalance) {
  const std::string topic = UniqueTopic("paused");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 2, {"q"}));
  constexpr int kBatches = 400;
  constexpr int64_t kSize = 10;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 2, SegmentBatches("q", 0, kSize, kBatches)));
  BatchConsumer::Options options = OptionsFor(topic, {{"q", IdBatch::Mode::kSegment}});
  options.max_buffered_batches = 2;  // fetching pauses at 64 held records
  options.properties = {{"session.timeout.ms", "6000"}, {"heartbeat.interval.ms", "500"}};
  auto a = BatchConsumer::Create(options);
  ASSERT_TRUE(a) << a.error().message;
  std::map<int64_t, int> seen;  // ID -> consumer that handed it out first
  std::vector<int64_t> twice;
  auto note = [&](const std::vector<int64_t>& ids, int who) {
    for (int64_t id : ids) {
      if (!seen.emplace(id, who).second) twice.push_back(id);
    }
  };
  auto first = (*a)->Take("q", IdBatch::Mode::kSegment, 1, seconds(30));
  ASSERT_TRUE(first) << first.error().message;
  note(*first, 0);
  // A fetched far more than it may claim: fetching is paused now.
  ASSERT_TRUE(WaitUntil([&] { return (*a)->stats().held_batches >= 64; }, seconds(30)))
      << "held " << (*a)->stats().held_batches;

  auto b = BatchConsumer::Create(options);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto sa = (*a)->stats();
        return sa.rebalances >= 2 && sa.assigned_partitions == 1 && (*b)->stats().assigned_partitions == 1;
      },
      seconds(60)))
      << "A: " << (*a)->stats().assigned_partitions << " partitions, B: " << (*b)->stats().assigned_partitions;

  const auto deadline = SteadyClock::now() + seconds(60);
  while (static_cast<int64_t>(seen.size()) < kBatches * kSize && SteadyClock::now() < deadline) {
    for (int who : {0, 1}) {
      auto& c = who == 0 ? *a : *b;
      if (auto ids = c->Take("q", IdBatch::Mode::kSegment, 1000, milliseconds(200))) note(*ids, who);
    }
  }
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice, first " << twice.front();
  int by_a = 0;
  for (const auto& [id, who] : seen) by_a += who == 0 ? 1 : 0;
  EXPECT_EQ(static_cast<int64_t>(seen.size()), kBatches * kSize)
      << "A handed out " << by_a << ", B " << seen.size() - by_a << "; A: " << (*a)->stats().last_error
      << "; B: " << (*b)->stats().last_error;
  EXPECT_GT(by_a, 1) << "A never fetched again after the rebalance";
}

// A commit that gets no answer (the broker frozen by SIGSTOP) may still land later. The member
// hands out nothing of it and commits nothing more on that partition until the commit is settled
// (answered, or timed out in librdkafka and given time); then it reads on from the group's
// committed offset. No ID twice, and the partition is served again.
TEST_F(BatchConsumerIntegrationTest, CommitWithoutAnOutcomeHoldsThePartitionUntilItIsSettled) {
  const std::string topic = UniqueTopic("frozen");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"f"}));
  constexpr int kBatches = 300;
  constexpr int64_t kSize = 10;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("f", 0, kSize, kBatches)));
  BatchConsumer::Options options = OptionsFor(topic, {{"f", IdBatch::Mode::kSegment}});
  options.max_buffered_batches = 2;
  options.commit_timeout = milliseconds(1000);
  auto c = BatchConsumer::Create(options);
  ASSERT_TRUE(c) << c.error().message;
  std::set<int64_t> seen;
  std::vector<int64_t> twice;
  auto take = [&](milliseconds timeout) {
    auto ids = (*c)->Take("f", IdBatch::Mode::kSegment, 25, timeout);
    if (!ids) return;
    for (int64_t id : *ids) {
      if (!seen.insert(id).second) twice.push_back(id);
    }
  };
  take(seconds(30));
  ASSERT_FALSE(seen.empty());

  BrokerFreeze freeze(broker_);
  ASSERT_TRUE(freeze.found()) << "no pid in " << broker_.dir << "/kafka.pid";
  ASSERT_TRUE(freeze.Freeze());
  // The consumer uses up its buffer and claims again: that commit gets no answer.
  const bool quarantined = WaitUntil(
      [&] {
        take(milliseconds(50));
        return (*c)->stats().quarantines >= 1;
      },
      seconds(20));
  freeze.Thaw();
  ASSERT_TRUE(quarantined) << "last error: " << (*c)->stats().last_error;
  const auto frozen_at = seen.size();

  // Settled, the partition is served again, to its end.
  const int64_t last_id = kBatches * kSize - 1;
  EXPECT_TRUE(WaitUntil(
      [&] {
        take(milliseconds(100));
        return seen.contains(last_id);
      },
      seconds(60)))
      << seen.size() << " IDs; stats: quarantines " << (*c)->stats().quarantines << ", last error "
      << (*c)->stats().last_error;
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice, first " << twice.front();
  // What the unanswered commit claimed (if it landed) is a gap: a few batches at most.
  EXPECT_GE(static_cast<int64_t>(seen.size()), kBatches * kSize - 4 * kSize);
  auto stats = (*c)->stats();
  std::cerr << "[frozen broker] " << frozen_at << " IDs before the freeze, " << seen.size()
            << " in all; quarantines " << stats.quarantines << ", commit failures "
            << stats.commit_failures << ", stale skipped " << stats.stale_batches << "\n";
}

// Close() while the broker does not answer (SIGSTOP) returns within its bound instead of waiting
// for the group coordinator forever; what the member had claimed is a gap, and the group goes on.
TEST_F(BatchConsumerIntegrationTest, CloseReturnsWhileTheBrokerIsFrozen) {
  const std::string topic = UniqueTopic("closefrozen");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"c"}));
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("c", 0, 10, 20)));
  BatchConsumer::Options options = OptionsFor(topic, {{"c", IdBatch::Mode::kSegment}});
  options.commit_timeout = milliseconds(2000);
  options.close_timeout = milliseconds(3000);
  auto c = BatchConsumer::Create(options);
  ASSERT_TRUE(c) << c.error().message;
  auto first = (*c)->Next("c", IdBatch::Mode::kSegment, seconds(30));
  ASSERT_TRUE(first) << first.error().message;

  BrokerFreeze freeze(broker_);
  ASSERT_TRUE(freeze.found()) << "no pid in " << broker_.dir << "/kafka.pid";
  ASSERT_TRUE(freeze.Freeze());
  const auto began = SteadyClock::now();
  (*c)->Close();
  const double took = SecondsSince(began);
  freeze.Thaw();
  std::cerr << "[close frozen] Close() took " << took << " s\n";
  // A claim's commit (2 s), the close bound (3 s), and librdkafka finishing the commit in flight
  // (its request timeout): 10 s measured. It hung for good (over 200 s) before Close had a bound.
  EXPECT_LT(took, 15.0) << "Close() waited for the frozen broker";
  auto closed = (*c)->Next("c", IdBatch::Mode::kSegment, milliseconds(10));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().kind, ClientError::Kind::kClosed);
}

// Close() while the broker is up returns within a second: alone in the group, right after a peer
// left cleanly (a rebalance under way), after a peer stopped on SIGTERM, after one was killed
// (kill -9: still a member until its session expires), after one was frozen (SIGSTOP), and in a
// rebalance that waits for a dead member (killed, and another member joined since). In that last
// case the coordinator holds this member's JoinGroup until the dead one's session expires and
// answers a connection's requests in order, so the LeaveGroup waits behind it: Close() returns
// after close_wait (500 ms) and the leave goes on in the background. It must still reach the
// coordinator: the other member gets both partitions once the dead one's session (6 s) expired,
// not after this member's own session as well (6 s more).
TEST_F(BatchConsumerIntegrationTest, CloseReturnsWithinASecondWhileTheBrokerIsUp) {
  enum class Peer { kNone, kClosed, kTerminated, kKilled, kStopped, kKilledThenJoined };
  for (const Peer peer : {Peer::kNone, Peer::kClosed, Peer::kTerminated, Peer::kKilled,
                          Peer::kStopped, Peer::kKilledThenJoined}) {
    const char* name = peer == Peer::kNone         ? "alone"
                       : peer == Peer::kClosed     ? "after a peer closed"
                       : peer == Peer::kTerminated ? "after a peer stopped on SIGTERM"
                       : peer == Peer::kKilled     ? "after a peer was killed"
                       : peer == Peer::kStopped    ? "after a peer was frozen"
                                                   : "in a rebalance waiting for a killed peer";
    SCOPED_TRACE(name);
    // A topic per case, filled once the group has settled. A batch_consumer_example peer claims
    // every batch of the partitions it is given, and each claim moves that partition's log start
    // past its batch (the claim floor): with one topic for all cases, a later case's consumer
    // could be given a partition an earlier peer had emptied (the roundrobin assignor orders
    // members by their random member ids), and with the batches published before the consumers
    // joined, a peer alone in the group for a moment could claim both partitions' batches before
    // the rebalance that brought this consumer in. Either way its first Next() waited 30 s for
    // nothing. With librdkafka 2.8 the peers had claimed 2 to 10 batches each by the time they
    // were stopped (the case groups' committed offsets); with 2.14 some claimed all 50 of a
    // partition, or all 100, and the test failed in 2 of 4 runs.
    const std::string topic = UniqueTopic("closepeer");
    ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 2, {"k"}));
    BatchConsumer::Options options = OptionsFor(topic, {{"k", IdBatch::Mode::kSegment}});
    // A group per case: a peer killed or frozen in one case must not hold up the next one's.
    const std::string case_group = topic + ".group";
    options.group_id = case_group;
    Procs procs;  // a batch_consumer_example peer (6 s session)
    std::unique_ptr<BatchConsumer> in_process_peer;
    if (peer == Peer::kClosed) {
      auto p = BatchConsumer::Create(options);
      ASSERT_TRUE(p) << p.error().message;
      in_process_peer = std::move(*p);
    } else if (peer != Peer::kNone) {
      auto p = StartConsumer(broker_.bootstrap, topic, case_group, "k", seconds(120));
      ASSERT_TRUE(p) << p.error();
      procs.push_back(std::move(*p));
    }
    auto c = BatchConsumer::Create(options);
    ASSERT_TRUE(c) << c.error().message;
    const int partitions = peer == Peer::kNone ? 2 : 1;
    ASSERT_TRUE(WaitUntil(
        [&] {
          if ((*c)->stats().assigned_partitions != partitions) return false;
          if (!procs.empty()) return Assigned(*procs[0]) == 1;
          if (in_process_peer) return in_process_peer->stats().assigned_partitions == 1;
          return true;
        },
        seconds(60)))
        << "assigned " << (*c)->stats().assigned_partitions << "; " << Stderrs(procs);
    ASSERT_TRUE(Publish(broker_.bootstrap, topic, 2, SegmentBatches("k", 0, 10, 100)));
    auto id = (*c)->Next("k", IdBatch::Mode::kSegment, seconds(30));
    ASSERT_TRUE(id) << id.error().message;
    const double bound = 1.0;
    switch (peer) {
      case Peer::kNone:
        break;
      case Peer::kClosed:
        in_process_peer->Close();
        break;
      case Peer::kTerminated:
        procs[0]->Terminate();
        EXPECT_EQ(procs[0]->WaitExit(seconds(5)).code, 0) << procs[0]->Stderr();
        break;
      case Peer::kKilled:
        procs[0]->KillAndWait();
        break;
      case Peer::kStopped:
        procs[0]->Signal(SIGSTOP);
        break;
      case Peer::kKilledThenJoined: {
        procs[0]->KillAndWait();
        const auto rebalances = (*c)->stats().rebalances;
        auto p = BatchConsumer::Create(options);
        ASSERT_TRUE(p) << p.error().message;
        in_process_peer = std::move(*p);
        // This member learns of the rebalance at its next heartbeat (1 s) and gives its
        // partition up; its JoinGroup then waits for the killed peer's session (6 s).
        ASSERT_TRUE(WaitUntil([&] { return (*c)->stats().assigned_partitions == 0; }, seconds(5)));
        EXPECT_EQ((*c)->stats().rebalances, rebalances);
        break;
      }
    }
    const auto began = SteadyClock::now();
    (*c)->Close();
    const double took = SecondsSince(began);
    std::cerr << "[close] " << name << ": Close() took " << took << " s\n";
    EXPECT_LT(took, bound) << "Close() waited for the group";
    if (peer == Peer::kKilledThenJoined) {
      EXPECT_NE((*c)->stats().last_error.find("still under way"), std::string::npos)
          << (*c)->stats().last_error;
      // The dead peer's session ends at most 6 s after the kill, so before this deadline; a
      // leave that never went out would keep the partition for 6 s after that.
      EXPECT_TRUE(
          WaitUntil([&] { return in_process_peer->stats().assigned_partitions == 2; }, seconds(8)))
          << "the background leave did not reach the coordinator: "
          << in_process_peer->stats().assigned_partitions << " partition(s) after "
          << SecondsSince(began) << " s";
      std::cerr << "[close] the other member held both partitions " << SecondsSince(began)
                << " s after Close()\n";
    }
    if (peer == Peer::kStopped) procs[0]->Signal(SIGCONT);
  }
}

// The example stops cleanly on SIGTERM: it leaves the group (its peer takes its partition over at
// once, not after a session timeout), prints its summary and exits 0.
TEST_F(BatchConsumerIntegrationTest, ExampleStopsCleanlyOnSigterm) {
  const std::string topic = UniqueTopic("sigterm");
  const std::string group = topic + ".group";
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"t"}));
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("t", 0, 10, 5)));
  auto p = StartConsumer(broker_.bootstrap, topic, group, "t", seconds(120));
  ASSERT_TRUE(p) << p.error();
  ASSERT_TRUE(WaitUntil([&] { return PrintedIds((*p)->Stdout()).size() == 50; }, seconds(30)))
      << (*p)->Stderr();
  (*p)->Terminate();
  const auto status = (*p)->WaitExit(seconds(5));
  EXPECT_TRUE(status.exited && status.code == 0) << status.ToString() << "\n" << (*p)->Stderr();
  auto summary = LinesWith((*p)->Stderr(), "summary: ");
  ASSERT_EQ(summary.size(), 1u) << (*p)->Stderr();
  EXPECT_NE(summary[0].find("printed=50 "), std::string::npos) << summary[0];
  EXPECT_NE(summary[0].find("stopped_by=SIGTERM"), std::string::npos) << summary[0];
  EXPECT_EQ(Count((*p)->Stderr(), "%"), 0) << "raw librdkafka lines:\n" << (*p)->Stderr();
}

// The broker stops (clean shutdown; connections refused) and starts again on the same data while
// a consumer claims batches on another thread: every Take returns within its timeout while the
// broker is away, a second consumer's Close() returns within its bound, and once the broker is
// back the first consumer reads on to the end of the topic by itself, no ID handed out twice.
TEST_F(BatchConsumerIntegrationTest, ClaimsAndCloseKeepTheirBoundsAcrossABrokerRestart) {
  ASSERT_FALSE(broker_.script.empty() || broker_.port.empty())
      << "this test restarts the broker: it needs KLEAF_TEST_KAFKA_SCRIPT and _PORT";
  const std::string topic = UniqueTopic("restart");
  const std::string other_topic = UniqueTopic("restart-close");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 1, {"r"}));
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, other_topic, 1, {"o"}));
  constexpr int kBatches = 300;
  constexpr int64_t kSize = 10;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("r", 0, kSize, kBatches)));
  ASSERT_TRUE(Publish(broker_.bootstrap, other_topic, 1, SegmentBatches("o", 0, kSize, 20)));
  // With the broker away the group coordinator is unknown, and librdkafka keeps a commit that
  // got no answer queued for up to session.timeout.ms (with librdkafka's 45 s, Close() took
  // 45.0 s and the quarantined partition resumed 48 s after the restart). The closing consumer
  // sets 15 s: with BatchConsumer's default 6 s, a broker that takes 8 s to stop on a loaded
  // machine (measured: 7.8 s) outlasts the session, librdkafka declares the assignment lost, the
  // held batches are let go unclaimed, and there is no claim in flight to close on.
  constexpr int kSessionMs = 15000;
  BatchConsumer::Options options = OptionsFor(topic, {{"r", IdBatch::Mode::kSegment}});
  options.max_buffered_batches = 2;
  options.commit_timeout = milliseconds(2000);
  options.close_timeout = milliseconds(3000);
  auto c = BatchConsumer::Create(options);
  ASSERT_TRUE(c) << c.error().message;
  BatchConsumer::Options other_options = OptionsFor(other_topic, {{"o", IdBatch::Mode::kSegment}});
  other_options.properties["session.timeout.ms"] = std::to_string(kSessionMs);
  other_options.commit_timeout = milliseconds(2000);
  other_options.close_timeout = milliseconds(3000);
  auto closing = BatchConsumer::Create(other_options);
  ASSERT_TRUE(closing) << closing.error().message;
  ASSERT_TRUE((*closing)->Next("o", IdBatch::Mode::kSegment, seconds(30)));

  // The claiming thread: Takes of 5 IDs with a 500 ms timeout, back to back, until told to stop.
  constexpr auto kTakeTimeout = milliseconds(500);
  std::mutex mu;
  std::set<int64_t> seen;              // guarded by mu
  std::vector<int64_t> twice;          // guarded by mu
  double slowest_away = 0;             // guarded by mu: the slowest Take while the broker was away
  int takes_away = 0, empty_away = 0;  // guarded by mu
  std::atomic<bool> away{false}, stop{false};
  std::thread taker([&] {
    while (!stop.load()) {
      const bool during = away.load();
      const auto t0 = SteadyClock::now();
      auto ids = (*c)->Take("r", IdBatch::Mode::kSegment, 5, kTakeTimeout);
      const double took = SecondsSince(t0);
      std::lock_guard lock(mu);
      if (during) {
        ++takes_away;
        slowest_away = std::max(slowest_away, took);
        if (!ids) ++empty_away;
      }
      if (ids) {
        for (int64_t id : *ids) {
          if (!seen.insert(id).second) twice.push_back(id);
        }
      }
    }
  });
  // Stops and joins the thread however the test ends (an ASSERT returns early).
  struct JoinOnExit {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinOnExit() {
      stop.store(true);
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{stop, taker};
  auto seen_count = [&] {
    std::lock_guard lock(mu);
    return seen.size();
  };
  EXPECT_TRUE(WaitUntil([&] { return seen_count() >= 100; }, seconds(30)));
  // The closing consumer must hold fetched, unclaimed batches before the broker stops, or its Take
  // below has nothing to claim (and so no commit to fail) however long it waits: on a loaded
  // machine its fetch of the rest of `other_topic` can come after the stop.
  EXPECT_TRUE(WaitUntil([&] { return (*closing)->stats().held_batches >= 1; }, seconds(30)))
      << "the closing consumer fetched nothing beyond the batches it claimed";
  double close_s = 0, stop_s = 0, start_s = 0;
  size_t before = 0;
  {
    BrokerRestartGuard guard(broker_);
    away.store(true);
    const auto t0 = SteadyClock::now();
    auto stopped = broker_.Stop();
    stop_s = SecondsSince(t0);
    ASSERT_TRUE(stopped) << stopped.error();
    before = seen_count();
    // The other consumer closes while the broker is down, with a claim on its way (a Take that
    // needs more than it buffered makes it claim the records it fetched): within its bound.
    const auto stats_before_close = (*closing)->stats();
    auto take_while_closing = std::async(std::launch::async, [&] {
      return (*closing)->Take("o", IdBatch::Mode::kSegment, 150, seconds(5));
    });
    // Its commit gets no answer: quarantined (outcome unknown, librdkafka keeps it in flight)
    // or refused after commit_timeout. Close() comes after that, with the commit still queued.
    const bool claimed = WaitUntil(
        [&] {
          auto st = (*closing)->stats();
          return st.quarantines + st.commit_failures >
                 stats_before_close.quarantines + stats_before_close.commit_failures;
        },
        seconds(10));
    EXPECT_TRUE(claimed) << "the closing consumer never tried to claim with the broker stopped";
    const auto c0 = SteadyClock::now();
    (*closing)->Close();
    close_s = SecondsSince(c0);
    const bool take_returned = take_while_closing.wait_for(seconds(5)) == std::future_status::ready;
    EXPECT_TRUE(take_returned) << "a Take did not return after Close()";
    const auto stats_after_close = (*closing)->stats();
    std::cerr << "[broker restart] closing consumer: claims " << stats_before_close.claimed_batches
              << " -> " << stats_after_close.claimed_batches << ", quarantines "
              << stats_after_close.quarantines << ", commit failures "
              << stats_after_close.commit_failures << ", held " << stats_after_close.held_batches
              << "; Take during Close: "
              << (take_returned ? (take_while_closing.get() ? "IDs" : "error") : "still waiting")
              << "\n";
    // Claims go on failing for a while: each Take within its timeout.
    const auto down = SteadyClock::now();
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::lock_guard lock(mu);
          return takes_away >= 5 && SteadyClock::now() - down > seconds(3);
        },
        seconds(30)));
    const auto s0 = SteadyClock::now();
    auto started = broker_.Start();
    start_s = SecondsSince(s0);
    away.store(false);
    ASSERT_TRUE(started) << started.error();
  }
  // Back: the consumer reads on to the end by itself.
  const auto back = SteadyClock::now();
  const int64_t last_id = kBatches * kSize - 1;
  const bool to_end = WaitUntil(
      [&] {
        std::lock_guard lock(mu);
        return seen.contains(last_id);
      },
      seconds(60));
  const double recovered_s = SecondsSince(back);
  stop.store(true);
  if (taker.joinable()) taker.join();
  auto stats = (*c)->stats();
  std::lock_guard lock(mu);
  std::cerr << "[broker restart] stop " << stop_s << " s, start " << start_s
            << " s; while away: " << takes_away << " Takes (" << empty_away << " empty), slowest "
            << slowest_away << " s (timeout " << kTakeTimeout.count()
            << " ms); the other consumer's Close() took " << close_s << " s; " << before
            << " IDs before the stop, " << seen.size() << " in all, the last one " << recovered_s
            << " s after the restart; " << twice.size() << " handed out twice; quarantines "
            << stats.quarantines << ", commit failures " << stats.commit_failures << "\n";
  EXPECT_TRUE(to_end) << "the consumer did not read to the end within 60 s of the restart: "
                      << seen.size() << " IDs; last error " << stats.last_error;
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice, first " << twice.front();
  // A claim's commit without an outcome is a gap of a few batches at most.
  EXPECT_GE(static_cast<int64_t>(seen.size()), kBatches * kSize - 4 * kSize);
  EXPECT_GT(takes_away, 0);
  EXPECT_LT(slowest_away, 1.5) << "a Take with a 500 ms timeout waited for the stopped broker";
  // Close() itself returns within commit_timeout + close_wait now; the bound stays the one of the
  // whole leave with the coordinator unknown, which Close() used to wait out: close_timeout (3 s)
  // plus session.timeout.ms (15 s) for the commit librdkafka still holds, plus 2 s for load.
  const double close_bound_s = 3.0 + kSessionMs / 1000.0 + 2.0;
  EXPECT_LT(close_s, close_bound_s) << "Close() waited for the stopped broker past its bound";
  auto closed = (*closing)->Next("o", IdBatch::Mode::kSegment, milliseconds(10));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().kind, ClientError::Kind::kClosed);
}

// Issue 16: a stream spreads over its topic's partitions, so every member of the group asking for
// it gets batches of it, and the IDs are unique across members.
TEST_F(BatchConsumerIntegrationTest, TwoMembersAskingForOneTagBothGetBatchesOfIt) {
  const std::string topic = UniqueTopic("spread");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 4, {"a"}));
  constexpr int kBatches = 40;
  constexpr int64_t kSize = 10;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 4, SegmentBatches("a", 0, kSize, kBatches)));
  BatchConsumer::Options options = OptionsFor(topic, {{"a", IdBatch::Mode::kSegment}});
  auto one = BatchConsumer::Create(options);
  ASSERT_TRUE(one) << one.error().message;
  auto two = BatchConsumer::Create(options);
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return (*one)->stats().assigned_partitions == 2 && (*two)->stats().assigned_partitions == 2;
      },
      seconds(60)))
      << (*one)->stats().assigned_partitions << " and " << (*two)->stats().assigned_partitions;
  std::map<int64_t, int> seen;  // ID -> member
  std::vector<int64_t> twice;
  std::array<int64_t, 2> by{0, 0};
  const auto deadline = SteadyClock::now() + seconds(60);
  while (static_cast<int64_t>(seen.size()) < kBatches * kSize && SteadyClock::now() < deadline) {
    for (int who : {0, 1}) {
      auto& c = who == 0 ? *one : *two;
      auto ids = c->Take("a", IdBatch::Mode::kSegment, 25, milliseconds(200));
      if (!ids) continue;
      by[who] += static_cast<int64_t>(ids->size());
      for (int64_t id : *ids) {
        if (!seen.emplace(id, who).second) twice.push_back(id);
      }
    }
  }
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice";
  EXPECT_EQ(static_cast<int64_t>(seen.size()), kBatches * kSize);
  // Each holds two of the four partitions: half of the batches each.
  EXPECT_EQ(by[0], kBatches * kSize / 2) << "member 2 took " << by[1];
  EXPECT_EQ(by[1], kBatches * kSize / 2) << "member 1 took " << by[0];
  EXPECT_EQ((*one)->stats().dropped_batches + (*two)->stats().dropped_batches, 0);
  std::cerr << "[spread] member 1 took " << by[0] << " IDs, member 2 " << by[1] << "\n";
}

// A member asking only for tag A never claims (nor drops as a gap) a batch of tag B, although
// both streams are published side by side; the member asking for B gets every batch of B.
TEST_F(BatchConsumerIntegrationTest, MemberAskingForOneTagClaimsNoBatchOfAnother) {
  const std::string topic = UniqueTopic("streams");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 2, {"A", "B"}));
  constexpr int kBatches = 30;
  constexpr int64_t kSize = 10;
  std::vector<IdBatch> batches;
  auto a = SegmentBatches("A", 0, kSize, kBatches);
  auto b = SegmentBatches("B", 100000, kSize, kBatches);
  for (int i = 0; i < kBatches; ++i) {
    batches.push_back(a[i]);
    batches.push_back(b[i]);
  }
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 2, batches));
  auto only_a = BatchConsumer::Create(OptionsFor(topic, {{"A", IdBatch::Mode::kSegment}}));
  ASSERT_TRUE(only_a) << only_a.error().message;
  auto ids_a = (*only_a)->Take("A", IdBatch::Mode::kSegment, kBatches * kSize, seconds(60));
  ASSERT_TRUE(ids_a) << ids_a.error().message;
  EXPECT_EQ(static_cast<int64_t>(ids_a->size()), kBatches * kSize);
  // The member of the same group asking for B joins afterwards and finds all of B.
  auto only_b = BatchConsumer::Create(OptionsFor(topic, {{"B", IdBatch::Mode::kSegment}}));
  ASSERT_TRUE(only_b) << only_b.error().message;
  auto ids_b = (*only_b)->Take("B", IdBatch::Mode::kSegment, kBatches * kSize, seconds(60));
  ASSERT_TRUE(ids_b) << ids_b.error().message;
  EXPECT_EQ(static_cast<int64_t>(ids_b->size()), kBatches * kSize);
  std::set<int64_t> all(ids_a->begin(), ids_a->end());
  all.insert(ids_b->begin(), ids_b->end());
  EXPECT_EQ(static_cast<int64_t>(all.size()), 2 * kBatches * kSize) << "an ID handed out twice";
  for (int64_t id : *ids_a) EXPECT_LT(id, 100000) << "A's member handed out an ID of B";
  const auto stats = (*only_a)->stats();
  EXPECT_EQ(stats.claimed_batches, kBatches) << "A's member claimed batches it did not ask for";
  EXPECT_EQ(stats.dropped_batches, 0);
  EXPECT_EQ(stats.malformed_batches, 0);
  EXPECT_EQ((*only_b)->stats().claimed_batches, kBatches);
}

TEST_F(BatchConsumerIntegrationTest, InProcessConsumerTakesKeysAndBatches) {
  const std::string topic = UniqueTopic("inproc");
  ASSERT_TRUE(CreateIdsTopic(broker_.bootstrap, topic, 2, {"x", "y", "empty"}));
  std::vector<IdBatch> batches = SegmentBatches("x", 0, 100, 4);
  IdBatch snow;
  snow.tag = "x";
  snow.mode = IdBatch::Mode::kSnowflake;
  snow.ids = {7000, 7001, 7002};
  batches.push_back(snow);
  auto y = SegmentBatches("y", 5000, 10, 1);
  batches.insert(batches.end(), y.begin(), y.end());
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 2, batches));

  BatchConsumer::Options options = OptionsFor(topic, {{"x", IdBatch::Mode::kSegment},
                                                      {"x", IdBatch::Mode::kSnowflake},
                                                      {"y", IdBatch::Mode::kSegment},
                                                      {"empty", IdBatch::Mode::kSegment}});
  auto consumer = BatchConsumer::Create(options);
  ASSERT_TRUE(consumer) << consumer.error().message;
  std::set<int64_t> got;
  auto bulk = (*consumer)->Take("x", IdBatch::Mode::kSegment, 400, seconds(30));
  ASSERT_TRUE(bulk) << bulk.error().message;
  EXPECT_EQ(bulk->size(), 400u);
  got.insert(bulk->begin(), bulk->end());
  EXPECT_EQ(got.size(), 400u);
  EXPECT_EQ(*got.begin(), 0);
  EXPECT_EQ(*got.rbegin(), 399);
  auto s = (*consumer)->Next("x", IdBatch::Mode::kSnowflake, seconds(30));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, 7000);
  auto batch = (*consumer)->NextBatch(seconds(30));
  ASSERT_TRUE(batch) << batch.error().message;
  // Oldest claimed first: the rest of the snowflake batch or the y batch, whichever came first.
  EXPECT_TRUE((batch->tag == "x" && batch->ids == std::vector<int64_t>{7001, 7002}) ||
              (batch->tag == "y" && batch->start == 5000 && batch->end == 5010))
      << EncodeBatch(*batch);
  auto none = (*consumer)->Next("empty", IdBatch::Mode::kSegment, milliseconds(300));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, ClientError::Kind::kTimeout);
  auto not_asked = (*consumer)->Next("y", IdBatch::Mode::kSnowflake, milliseconds(300));
  ASSERT_FALSE(not_asked);
  EXPECT_EQ(not_asked.error().kind, ClientError::Kind::kInvalidArgument)
      << not_asked.error().message;
  auto stats = (*consumer)->stats();
  EXPECT_EQ(stats.commit_failures, 0);
  (*consumer)->Close();
  auto closed = (*consumer)->Next("x", IdBatch::Mode::kSegment, milliseconds(10));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().kind, ClientError::Kind::kClosed);
}

// Issue 36: a stream topic on which the claim floor cannot move (compacted: the broker refuses
// DeleteRecords there, as it does without the DELETE right). The consumer finds out before its
// first claim: it commits nothing, hands nothing out, and Take fails at once saying why, instead
// of committing every batch and dropping it unused.
TEST_F(BatchConsumerIntegrationTest, AStreamWhoseFloorCannotMoveIsRefusedBeforeAnyClaim) {
  const std::string topic = UniqueTopic("compacted");
  const std::string stream_topic = StreamTopic(topic, "c", IdBatch::Mode::kSegment);
  const kafka::Properties props{{"bootstrap.servers", broker_.bootstrap}};
  auto created = kafka::EnsureTopics(props, {{stream_topic, 1, 1, {{"cleanup.policy", "compact"}}}},
                                     seconds(30));
  ASSERT_TRUE(created) << created.error().message;
  ASSERT_TRUE(Publish(broker_.bootstrap, topic, 1, SegmentBatches("c", 0, 10, 5)));
  auto c = BatchConsumer::Create(OptionsFor(topic, {{"c", IdBatch::Mode::kSegment}}));
  ASSERT_TRUE(c) << c.error().message;
  auto ids = (*c)->Take("c", IdBatch::Mode::kSegment, 5, seconds(30));
  ASSERT_FALSE(ids) << "handed out " << ids->size() << " IDs";
  EXPECT_EQ(ids.error().kind, ClientError::Kind::kRejected) << ids.error().message;
  EXPECT_NE(ids.error().message.find("cleanup.policy"), std::string::npos) << ids.error().message;
  EXPECT_EQ((*c)->stats().claimed_batches, 0);
  (*c)->Close();
  auto group = kafka::GroupOffsets::Create(props, topic + ".group");
  ASSERT_TRUE(group) << group.error().message;
  auto committed = (*group)->Committed({{stream_topic, 0, 0}}, seconds(10));
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_LT(committed->front().offset, 0) << "a batch was committed";
}

TEST_F(BatchConsumerIntegrationTest, RefusesOptionsThatBreakTheGuarantee) {
  BatchConsumer::Options options;
  options.bootstrap = broker_.bootstrap;
  auto no_stream = BatchConsumer::Create(options);
  ASSERT_FALSE(no_stream);
  EXPECT_EQ(no_stream.error().kind, ClientError::Kind::kInvalidArgument);
  options.streams = {{"t", IdBatch::Mode::kSegment}};
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"enable.auto.commit", "true"},
           {"isolation.level", "read_uncommitted"},
           {"partition.assignment.strategy", "cooperative-sticky"}}) {
    options.properties = {{k, v}};
    auto c = BatchConsumer::Create(options);
    ASSERT_FALSE(c) << k;
    EXPECT_EQ(c.error().kind, ClientError::Kind::kInvalidArgument) << k;
  }
}

}  // namespace
}  // namespace kleaf::integration
