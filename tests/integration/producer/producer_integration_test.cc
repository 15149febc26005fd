// `kleaf producer` against the real broker: top-up follows the consumer group's commits, a kill -9
// (mid-round and between rounds) never duplicates a batch or an ID, snowflake batches carry the
// leased worker id, uuid7 and ulid batches are read right by an independent parser, and config
// errors name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kafka/client.h"
#include "kleaf/batch.h"
#include "kleaf/batch_consumer.h"
#include "snowflake/id128.h"
#include "snowflake/snowflake.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/producer/producer_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kKafkaTimeout{20000};
constexpr char kCrashHook[] = "KLEAF_PRODUCER_TEST_CRASH_BEFORE_COMMIT";

// One partition of one stream topic.
using Queue = std::pair<std::string, int32_t>;

std::string StreamName(const IdBatch& b) { return b.tag + "/" + std::string(ModeName(b.mode)); }

// The consumer group's committed offsets of `topics` (-1001: none), and commits for it.
class Group {
 public:
  Group(const std::string& bootstrap, std::vector<std::string> topics, int32_t partitions,
        const std::string& name)
      : topics_(std::move(topics)), partitions_(partitions) {
    auto g = kafka::GroupOffsets::Create({{"bootstrap.servers", bootstrap}}, name);
    EXPECT_TRUE(g.has_value()) << g.error().message;
    if (g) offsets_ = std::move(*g);
  }
  std::map<Queue, int64_t> Committed() {
    std::vector<kafka::TopicPartition> parts;
    for (const auto& t : topics_) {
      for (int32_t p = 0; p < partitions_; ++p) parts.push_back({t, p, -1001});
    }
    auto r = offsets_->Committed(parts, kKafkaTimeout);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    std::map<Queue, int64_t> out;
    if (r) {
      for (const auto& tp : *r) out[{tp.topic, tp.partition}] = tp.offset;
    }
    return out;
  }
  void Commit(const std::map<Queue, int64_t>& next) {
    std::vector<kafka::TopicPartition> parts;
    for (const auto& [q, o] : next) parts.push_back({q.first, q.second, o});
    auto r = offsets_->Commit(parts);
    ASSERT_TRUE(r.has_value()) << r.error().message;
  }

 private:
  std::vector<std::string> topics_;
  int32_t partitions_;
  std::unique_ptr<kafka::GroupOffsets> offsets_;
};

// Per stream ("tag/mode") and partition ("tag/mode#p"), the batches at or after the group's
// committed offset of their partition.
std::map<std::string, int> AheadPerQueue(const std::vector<Published>& all,
                                         const std::map<Queue, int64_t>& committed) {
  std::map<std::string, int> ahead;
  for (const auto& b : all) {
    auto it = committed.find({b.topic, b.partition});
    int64_t from = it == committed.end() || it->second < 0 ? 0 : it->second;
    if (b.offset >= from) ++ahead[StreamName(b.batch) + "#" + std::to_string(b.partition)];
  }
  return ahead;
}

// Whether every partition of every stream of `streams` has at least `k` batches ahead.
bool AllAtLeast(const std::map<std::string, int>& ahead, const std::vector<std::string>& streams,
                int32_t partitions, int k) {
  for (const auto& s : streams) {
    for (int32_t p = 0; p < partitions; ++p) {
      auto it = ahead.find(s + "#" + std::to_string(p));
      if (it == ahead.end() || it->second < k) return false;
    }
  }
  return true;
}

// No batch twice, no ID twice, no negative ID: segment ranges of a tag are disjoint, snowflake IDs
// are unique across every batch of every tag.
void ExpectNoDuplicates(const std::vector<Published>& all) {
  std::set<std::string> values;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges;
  std::set<int64_t> snowflakes;
  for (const auto& b : all) {
    EXPECT_TRUE(values.insert(b.value).second) << "batch published twice: " << b.value;
    if (b.batch.mode == IdBatch::Mode::kSegment) {
      EXPECT_GE(b.batch.start, 0);
      EXPECT_LT(b.batch.start, b.batch.end);
      ranges[b.batch.tag].emplace_back(b.batch.start, b.batch.end);
    } else {
      for (int64_t id : b.batch.ids) {
        EXPECT_GT(id, 0);
        EXPECT_TRUE(snowflakes.insert(id).second) << "snowflake ID " << id << " published twice";
      }
    }
  }
  for (auto& [tag, r] : ranges) {
    std::sort(r.begin(), r.end());
    for (size_t i = 1; i < r.size(); ++i) {
      EXPECT_LE(r[i - 1].second, r[i].first)
          << "segment ranges of " << tag << " overlap: [" << r[i - 1].first << ", "
          << r[i - 1].second << ") and [" << r[i].first << ", " << r[i].second << ")";
    }
  }
}

// The snowflake IDs of `tag`, sorted (its batches are spread over the partitions of its topic).
std::vector<int64_t> SnowflakesOf(const std::vector<Published>& all, const std::string& tag) {
  std::vector<int64_t> ids;
  for (const auto& b : all) {
    if (b.batch.tag == tag && b.batch.mode == IdBatch::Mode::kSnowflake) {
      ids.insert(ids.end(), b.batch.ids.begin(), b.batch.ids.end());
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

class ProducerTest : public KafkaTest {};

// Three streams, K = 3: every partition of each stream's topic has K batches ahead after start
// and no more after further rounds; when the group commits past some of them, the producer
// publishes exactly the missing ones.
TEST_F(ProducerTest, TopUpFollowsTheConsumerGroupsCommits) {
  Cluster cluster(broker_, "producer-topup", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  constexpr int kAhead = 3;
  ProducerNode producer(cluster, "prod-1", kAhead,
                        "[{tag: alpha, mode: segment, batch_size: 100}, "
                        "{tag: alpha, mode: snowflake, batch_size: 50}, "
                        "{tag: beta, mode: segment, batch_size: 7}]");
  ASSERT_TRUE(producer.Start().has_value());
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::vector<std::string> streams{"alpha/segment", "alpha/snowflake", "beta/segment"};
  const auto topics = StreamTopics(ids_topic, streams);
  Group group(broker_.bootstrap, topics, Cluster::kPartitions, ids_topic + ".consumers");

  auto ahead_now = [&] {
    return AheadPerQueue(ReadAll(broker_.bootstrap, topics, Cluster::kPartitions),
                         group.Committed());
  };
  auto all_at_least = [&](int k) {
    return AllAtLeast(ahead_now(), streams, Cluster::kPartitions, k);
  };
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  // Five more rounds see the batches already there and publish nothing.
  ASSERT_TRUE(producer.WaitRounds(5, seconds(20)));
  for (const auto& [s, n] : ahead_now()) EXPECT_EQ(n, kAhead) << s;

  // The group consumes the first two alpha/segment batches of partition 0 ...
  auto all = ReadAll(broker_.bootstrap, topics, Cluster::kPartitions);
  std::map<Queue, int64_t> next;
  int seen = 0;
  for (const auto& b : all) {
    if (StreamName(b.batch) == "alpha/segment" && b.partition == 0 && ++seen == 2) {
      next[{b.topic, b.partition}] = b.offset + 1;
    }
  }
  ASSERT_EQ(next.size(), 1u);
  // ... and everything of beta.
  for (const auto& b : all) {
    if (b.batch.tag == "beta") {
      next[{b.topic, b.partition}] = std::max(next[{b.topic, b.partition}], b.offset + 1);
    }
  }
  group.Commit(next);
  auto consumed = AheadPerQueue(all, group.Committed());
  EXPECT_EQ(consumed["alpha/segment#0"], kAhead - 2);
  EXPECT_EQ(consumed["alpha/segment#1"], kAhead);
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    EXPECT_EQ(consumed["beta/segment#" + std::to_string(p)], 0);
  }

  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  ASSERT_TRUE(producer.WaitRounds(5, seconds(20)));
  for (const auto& [s, n] : ahead_now()) EXPECT_EQ(n, kAhead) << s;

  all = ReadAll(broker_.bootstrap, topics, Cluster::kPartitions);
  ExpectNoDuplicates(all);
  // Segment batches hold batch_size IDs each (a segment is split, never padded).
  for (const auto& b : all) {
    if (b.batch.tag == "beta") {
      EXPECT_LE(b.batch.size(), 7);
    }
    if (b.batch.tag == "alpha" && b.batch.mode == IdBatch::Mode::kSnowflake) {
      EXPECT_EQ(b.batch.size(), 50);
    }
  }
  // Snowflake batches: the leased worker id, no ID twice.
  auto worker = producer.WorkerId();
  ASSERT_TRUE(worker.has_value()) << producer.Logs();
  auto ids = SnowflakesOf(all, "alpha");
  ASSERT_GE(ids.size(), 50u * kAhead * Cluster::kPartitions);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(e2e::SplitDefaultSnowflake(ids[i]).worker_id, *worker) << ids[i];
    if (i > 0) {
      EXPECT_LT(ids[i - 1], ids[i]) << "at " << i;
    }
  }
  EXPECT_NE(producer.process().Stderr().find("[producer] round 1 published"), std::string::npos);

  producer.process().Terminate();
  auto status = producer.process().WaitExit(seconds(20));
  EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  EXPECT_NE(producer.process().Stderr().find("[producer] stopped"), std::string::npos);
}

// Issue 16: with the producer running, two BatchConsumers of one group asking for one tag both
// get batches of it (the producer keeps batches ahead on every partition either may hold), no ID
// twice, and neither drops a batch; the other stream's batches reach neither.
TEST_F(ProducerTest, TwoConsumersOfOneTagInOneGroupBothGetBatches) {
  Cluster cluster(broker_, "producer-spread", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  constexpr int kAhead = 2;
  ProducerNode producer(cluster, "prod-1", kAhead,
                        "[{tag: shared, mode: segment, batch_size: 100}, "
                        "{tag: other, mode: segment, batch_size: 100}]");
  ASSERT_TRUE(producer.Start().has_value());
  const std::string ids_topic = cluster.prefix() + ".ids";
  BatchConsumer::Options options;
  options.bootstrap = broker_.bootstrap;
  options.topic = ids_topic;
  options.group_id = ids_topic + ".consumers";
  options.streams = {{"shared", IdBatch::Mode::kSegment}};
  auto one = BatchConsumer::Create(options);
  ASSERT_TRUE(one) << one.error().message;
  auto two = BatchConsumer::Create(options);
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return (*one)->stats().assigned_partitions == Cluster::kPartitions / 2 &&
               (*two)->stats().assigned_partitions == Cluster::kPartitions / 2;
      },
      seconds(60)))
      << (*one)->stats().assigned_partitions << " and " << (*two)->stats().assigned_partitions;
  std::set<int64_t> seen;
  std::vector<int64_t> twice;
  std::array<int64_t, 2> by{0, 0};
  constexpr int64_t kEach = 2000;  // more than is ever ahead: the producer tops up meanwhile
  const auto deadline = SteadyClock::now() + seconds(60);
  while ((by[0] < kEach || by[1] < kEach) && SteadyClock::now() < deadline) {
    for (int who : {0, 1}) {
      if (by[who] >= kEach) continue;
      auto& c = who == 0 ? *one : *two;
      auto ids = c->Take("shared", IdBatch::Mode::kSegment, 100, milliseconds(200));
      if (!ids) continue;
      by[who] += static_cast<int64_t>(ids->size());
      for (int64_t id : *ids) {
        if (!seen.insert(id).second) twice.push_back(id);
      }
    }
  }
  std::cerr << "[two consumers] took " << by[0] << " and " << by[1] << " IDs of shared\n";
  EXPECT_GE(by[0], kEach) << "consumer 1: " << (*one)->stats().last_error;
  EXPECT_GE(by[1], kEach) << "consumer 2: " << (*two)->stats().last_error;
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice";
  EXPECT_EQ((*one)->stats().dropped_batches + (*two)->stats().dropped_batches, 0);
  EXPECT_EQ((*one)->stats().malformed_batches + (*two)->stats().malformed_batches, 0);
  // Nobody asked for "other": its batches wait, untouched, kAhead on every partition.
  Group group(broker_.bootstrap, StreamTopics(ids_topic, {"other/segment"}), Cluster::kPartitions,
              ids_topic + ".consumers");
  for (const auto& [q, offset] : group.Committed()) {
    EXPECT_LT(offset, 0) << q.first << "/" << q.second << " was committed";
  }
  (*one)->Close();
  (*two)->Close();
  producer.process().Terminate();
  EXPECT_TRUE(producer.process().WaitExit(seconds(20)).exited);
}

// A producer killed with SIGKILL in the middle of a round (its batches on the broker, the
// transaction open) and, later, between rounds: after each restart, read_committed shows no batch
// twice, no ID twice, none of the killed round's batches, and snowflake IDs still increase.
TEST_F(ProducerTest, KillNineMidRoundAndBetweenRoundsNeverDuplicates) {
  Cluster cluster(broker_, "producer-kill", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  constexpr int kAhead = 2;
  ProducerNode producer(cluster, "prod-1", kAhead,
                        "[{tag: t1, mode: segment, batch_size: 10}, "
                        "{tag: t2, mode: segment, batch_size: 1000}, "
                        "{tag: t3, mode: segment, batch_size: 3}, "
                        "{tag: t1, mode: snowflake, batch_size: 20}, "
                        "{tag: t4, mode: snowflake, batch_size: 5}]");
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::vector<std::string> streams{"t1/segment", "t2/segment", "t3/segment", "t1/snowflake",
                                         "t4/snowflake"};
  const auto topics = StreamTopics(ids_topic, streams);
  Group group(broker_.bootstrap, topics, Cluster::kPartitions, ids_topic + ".consumers");
  auto all_at_least = [&](int k) {
    return AllAtLeast(
        AheadPerQueue(ReadAll(broker_.bootstrap, topics, Cluster::kPartitions), group.Committed()),
        streams, Cluster::kPartitions, k);
  };
  auto consume_everything = [&] {
    std::map<Queue, int64_t> next;
    for (const auto& b : ReadAll(broker_.bootstrap, topics, Cluster::kPartitions)) {
      next[{b.topic, b.partition}] = std::max(next[{b.topic, b.partition}], b.offset + 1);
    }
    group.Commit(next);
  };

  // Round 1 publishes at start; round 2 (after the group consumed everything) dies before commit.
  ASSERT_TRUE(producer.Start({{kCrashHook, "2"}}).has_value());
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  auto first_worker = producer.WorkerId();
  ASSERT_TRUE(first_worker.has_value());
  consume_everything();
  auto killed = producer.process().WaitExit(seconds(30));
  ASSERT_EQ(killed.signal, SIGKILL) << killed.ToString() << "\n" << producer.Logs();
  ASSERT_NE(producer.process().Stderr().find("[producer] round 2: "), std::string::npos);

  // The killed round's batches reached the log, uncommitted.
  auto committed_values = [&] {
    std::set<std::string> v;
    for (const auto& b : ReadAll(broker_.bootstrap, topics, Cluster::kPartitions))
      v.insert(b.value);
    return v;
  };
  const std::set<std::string> before = committed_values();
  std::vector<Published> open;
  for (auto& b : ReadAll(broker_.bootstrap, topics, Cluster::kPartitions, /*committed=*/false)) {
    if (!before.contains(b.value)) open.push_back(std::move(b));
  }
  ASSERT_GE(open.size(), streams.size()) << "the killed round left no batch on the broker";

  // Restarted: init_transactions aborts the open transaction; tops up again.
  ASSERT_TRUE(producer.Start().has_value());
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(30)));
  EXPECT_EQ(producer.WorkerId(), first_worker);  // the same node gets its worker id back
  auto after = committed_values();
  for (const auto& b : open)
    EXPECT_FALSE(after.contains(b.value)) << "aborted batch visible: " << b.value;

  // Consumed again, killed between rounds at whatever moment, restarted.
  consume_everything();
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  producer.process().KillAndWait();
  consume_everything();
  ASSERT_TRUE(producer.Start().has_value());
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(30)));

  auto all = ReadAll(broker_.bootstrap, topics, Cluster::kPartitions);
  ExpectNoDuplicates(all);
  for (const std::string tag : {"t1", "t4"}) {
    auto ids = SnowflakesOf(all, tag);
    ASSERT_GE(ids.size(), 3u * kAhead);
    for (size_t i = 1; i < ids.size(); ++i) {
      EXPECT_LT(ids[i - 1], ids[i]) << tag << " at " << i << " (across restarts: twice)";
      EXPECT_EQ(e2e::SplitDefaultSnowflake(ids[i]).worker_id, *first_worker);
    }
  }
  producer.process().Terminate();
  EXPECT_TRUE(producer.process().WaitExit(seconds(20)).exited);
}

// Issue 17: uuid7 and ulid streams beside a snowflake stream of the same tag. Two BatchConsumers of
// the group take them as text (and are refused the wrong accessor); every ID is unique and was
// published; Python's `uuid` module and a Crockford decoder (tests/e2e/check_uuid7_ulid.py) read
// every published ID: version 7 and the RFC 9562 variant, the producer's worker id, timestamps
// within the test's run, and one increasing sequence per stream (batches in the order their first
// IDs sort are disjoint and increasing inside). The three kinds are drawn from one snowflake
// generator: no (millisecond, counter) pair is used twice among them.
TEST_F(ProducerTest, Uuid7AndUlidStreamsAreUniqueOrderedAndReadByAnIndependentParser) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not installed (scripts/install-deps.sh --test installs it)";
  }
  const int64_t from_ms = e2e::WallClockMs();
  Cluster cluster(broker_, "producer-id128", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  // Enough for the whole test in the first round (10 x 4 partitions of each stream): the producer
  // then stops, and what it published is read before the consumers claim, since a claim deletes
  // its batches from the topic (the claim floor).
  constexpr int kAhead = 10;
  ProducerNode producer(cluster, "prod-1", kAhead,
                        "[{tag: ev, mode: uuid7, batch_size: 50}, "
                        "{tag: ev, mode: ulid, batch_size: 40}, "
                        "{tag: ev, mode: snowflake, batch_size: 30}]");
  ASSERT_TRUE(producer.Start().has_value());
  auto worker = producer.WorkerId();
  ASSERT_TRUE(worker.has_value()) << producer.Logs();
  const std::string ids_topic = cluster.prefix() + ".ids";
  ASSERT_TRUE(producer.WaitRounds(1, seconds(30))) << producer.Logs();
  producer.process().Terminate();
  EXPECT_TRUE(producer.process().WaitExit(seconds(20)).exited);
  const int64_t to_ms = e2e::WallClockMs();

  // Everything the producer published, read_committed.
  const auto all =
      ReadAll(broker_.bootstrap, StreamTopics(ids_topic, {"ev/uuid7", "ev/ulid", "ev/snowflake"}),
              Cluster::kPartitions);
  ASSERT_EQ(all.size(), 3u * kAhead * Cluster::kPartitions);

  BatchConsumer::Options options;
  options.bootstrap = broker_.bootstrap;
  options.topic = ids_topic;
  options.group_id = ids_topic + ".consumers";
  options.streams = {{"ev", IdBatch::Mode::kUuid7}, {"ev", IdBatch::Mode::kUlid}};
  auto one = BatchConsumer::Create(options);
  ASSERT_TRUE(one) << one.error().message;
  auto two = BatchConsumer::Create(options);
  ASSERT_TRUE(two) << two.error().message;

  // The wrong accessor is refused at once, naming the right one.
  auto as_int = (*one)->Next("ev", IdBatch::Mode::kUuid7, seconds(1));
  ASSERT_FALSE(as_int);
  EXPECT_EQ(as_int.error().kind, ClientError::Kind::kInvalidArgument);
  EXPECT_NE(as_int.error().message.find("NextText/TakeText"), std::string::npos)
      << as_int.error().message;
  auto as_ints = (*one)->Take("ev", IdBatch::Mode::kUlid, 5, seconds(1));
  ASSERT_FALSE(as_ints);
  EXPECT_EQ(as_ints.error().kind, ClientError::Kind::kInvalidArgument);
  auto as_text = (*one)->NextText("ev", IdBatch::Mode::kSnowflake, seconds(1));
  ASSERT_FALSE(as_text);
  EXPECT_EQ(as_text.error().kind, ClientError::Kind::kInvalidArgument);
  EXPECT_NE(as_text.error().message.find("Next/Take"), std::string::npos)
      << as_text.error().message;

  // Both consumers take both streams, 600 IDs each: 1,200 of the 2,000 (uuid7) and 1,600 (ulid)
  // published, with room for the batches each claims ahead. Only once the group split the 8
  // partitions between them: the producer publishes no more, so one consumer holding every
  // partition for a while (the other still joining) could claim, and drop as gaps, what the other
  // needs.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return (*one)->stats().assigned_partitions == 4 && (*two)->stats().assigned_partitions == 4;
      },
      seconds(60)))
      << "assigned: " << (*one)->stats().assigned_partitions << " and "
      << (*two)->stats().assigned_partitions;
  constexpr int64_t kEach = 600;
  const std::array<IdBatch::Mode, 2> modes{IdBatch::Mode::kUuid7, IdBatch::Mode::kUlid};
  std::array<std::set<std::string>, 2> taken;  // per mode, over both consumers
  std::vector<std::string> twice;
  std::array<std::array<int64_t, 2>, 2> by{};  // [consumer][mode]
  const auto deadline = SteadyClock::now() + seconds(90);
  auto done = [&] {
    for (const auto& c : by) {
      for (int64_t n : c) {
        if (n < kEach) return false;
      }
    }
    return true;
  };
  while (!done() && SteadyClock::now() < deadline) {
    for (int who : {0, 1}) {
      for (size_t m = 0; m < modes.size(); ++m) {
        if (by[who][m] >= kEach) continue;
        auto& c = who == 0 ? *one : *two;
        auto ids = c->TakeText("ev", modes[m], 100, milliseconds(100));
        if (!ids) continue;
        by[who][m] += static_cast<int64_t>(ids->size());
        for (auto& id : *ids) {
          EXPECT_TRUE(IsCanonical128(modes[m], id)) << id;
          if (!taken[m].insert(id).second) twice.push_back(id);
        }
      }
    }
  }
  std::cerr << "[id128 streams] uuid7 " << by[0][0] << " + " << by[1][0] << ", ulid " << by[0][1]
            << " + " << by[1][1] << "\n";
  auto describe = [](const BatchConsumer& c) {
    const auto st = c.stats();
    return "claimed " + std::to_string(st.claimed_batches) + ", held " +
           std::to_string(st.held_batches) + ", assigned " +
           std::to_string(st.assigned_partitions) + ", rebalances " +
           std::to_string(st.rebalances) + ", released " + std::to_string(st.released_batches) +
           ", stale " + std::to_string(st.stale_batches) + ", dropped " +
           std::to_string(st.dropped_batches) + ", last error '" + st.last_error + "'";
  };
  EXPECT_TRUE(done()) << describe(**one) << " / " << describe(**two);
  EXPECT_TRUE(twice.empty()) << twice.size() << " IDs handed out twice, e.g. " << twice.front();
  EXPECT_EQ((*one)->stats().malformed_batches + (*two)->stats().malformed_batches, 0);
  (*one)->Close();
  (*two)->Close();
  ExpectNoDuplicates(all);
  const auto layout = snowflake::SnowflakeLayout::Default();
  std::set<std::pair<int64_t, int64_t>> draws;  // (millisecond, counter) of every ID, all kinds
  int64_t draw_count = 0;
  std::array<std::string, 2> files;  // per mode: the IDs, batches in the order of their first ID
  for (size_t m = 0; m < modes.size(); ++m) {
    const snowflake::Id128Layout id128(modes[m] == IdBatch::Mode::kUuid7
                                           ? snowflake::Id128Kind::kUuid7
                                           : snowflake::Id128Kind::kUlid,
                                       layout);
    std::vector<const IdBatch*> batches;
    std::set<std::string> published;
    for (const auto& b : all) {
      if (b.batch.mode != modes[m]) continue;
      batches.push_back(&b.batch);
      EXPECT_EQ(b.batch.size(), modes[m] == IdBatch::Mode::kUuid7 ? 50 : 40);
      for (const auto& text : b.batch.texts) {
        EXPECT_TRUE(published.insert(text).second) << text << " published twice";
        auto id = id128.Parse(text);
        ASSERT_TRUE(id) << text << ": " << id.error().message;
        auto parts = id128.Split(*id);
        EXPECT_EQ(parts.worker_id, *worker) << text;
        draws.insert({parts.timestamp_ms, parts.counter});
        ++draw_count;
      }
    }
    for (const auto& id : taken[m]) EXPECT_TRUE(published.contains(id)) << id << " never published";
    std::sort(batches.begin(), batches.end(), [](const IdBatch* a, const IdBatch* b) {
      return a->texts.front() < b->texts.front();
    });
    for (const IdBatch* b : batches) {
      for (const auto& text : b->texts) files[m] += text + "\n";
    }
  }
  for (const auto& b : all) {
    if (b.batch.mode != IdBatch::Mode::kSnowflake) continue;
    for (int64_t id : b.batch.ids) {
      auto parts = e2e::SplitDefaultSnowflake(id);
      draws.insert({parts.timestamp_ms, parts.sequence});
      ++draw_count;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(draws.size()), draw_count)
      << "two IDs of different kinds came from one snowflake draw";

  const auto dir = cluster.dir();
  const std::array<std::filesystem::path, 3> paths{dir / "uuid7.txt", dir / "ulid.txt",
                                                   dir / "check.out"};
  for (size_t m = 0; m < files.size(); ++m) std::ofstream(paths[m]) << files[m];
  const std::string command =
      std::string("python3 '") + KLEAF_SOURCE_DIR + "/tests/e2e/check_uuid7_ulid.py' --uuid7 '" +
      paths[0].string() + "' --ulid '" + paths[1].string() + "' --from-ms " +
      std::to_string(from_ms) + " --to-ms " + std::to_string(to_ms) + " --worker " +
      std::to_string(*worker) + " > '" + paths[2].string() + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(paths[2]);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find(" problems"), std::string::npos) << output;
  EXPECT_NE(output.find(": 0 problems"), std::string::npos) << output;
  std::cerr << "[id128 streams] " << output;
}

// Bad producer settings stop startup with the key in the message; no broker needed.
TEST(ProducerConfigE2eTest, ErrorsNameTheKey) {
  e2e::TempDir dir;
  auto bad_mode = dir.WriteFile("bad.yaml",
                                "producer:\n  streams:\n    - {tag: a, mode: segment}\n"
                                "    - {tag: b, mode: sequence}\n");
  auto r = e2e::RunKleaf({"producer", "--config", bad_mode.string()});
  EXPECT_TRUE(r.status.exited && r.status.code == 2) << r.status.ToString();
  EXPECT_NE(r.err.find("producer.streams[1].mode"), std::string::npos) << r.err;

  auto none = dir.WriteFile("none.yaml", "kafka:\n  bootstrap: \"127.0.0.1:1\"\n");
  r = e2e::RunKleaf({"producer", "--config", none.string()});
  // A config error (exit 2), found before the state directory is created.
  EXPECT_TRUE(r.status.exited && r.status.code == 2) << r.status.ToString();
  EXPECT_NE(r.err.find("producer.streams: no stream configured"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kleaf::integration
