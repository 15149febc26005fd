// `kleaf producer` against the real broker: top-up follows the consumer group's commits, a kill -9
// (mid-round and between rounds) never duplicates a batch or an ID, snowflake batches carry the
// leased worker id, and config errors name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kKafkaTimeout{20000};
constexpr char kCrashHook[] = "KLEAF_PRODUCER_TEST_CRASH_BEFORE_COMMIT";

// A batch as it sits on the ids topic.
struct Published {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string value;
  IdBatch batch;
};

std::string StreamName(const IdBatch& b) { return b.tag + "/" + std::string(ModeName(b.mode)); }

// Every batch of `topic`, read_committed (what consumers see) or read_uncommitted (also what open
// or aborted transactions wrote), in (partition, offset) order.
std::vector<Published> ReadAll(const std::string& bootstrap, const std::string& topic,
                               int32_t partitions, bool committed = true) {
  kafka::Properties props{{"bootstrap.servers", bootstrap}};
  if (!committed) props["isolation.level"] = "read_uncommitted";
  auto reader = kafka::PartitionReader::Create(props);
  EXPECT_TRUE(reader.has_value()) << reader.error().message;
  std::vector<Published> out;
  if (!reader) return out;
  for (int32_t p = 0; p < partitions; ++p) {
    auto end = (*reader)->ReadToEnd(
        topic, p, 0,
        [&](const kafka::Message& m) {
          ASSERT_TRUE(m.value.has_value());
          auto batch = DecodeBatch(*m.value);
          ASSERT_TRUE(batch.has_value()) << batch.error() << ": " << *m.value;
          EXPECT_EQ(m.key, batch->tag);
          out.push_back({p, m.offset, *m.value, std::move(*batch)});
        },
        kKafkaTimeout);
    EXPECT_TRUE(end.has_value()) << end.error().message;
  }
  return out;
}

// The consumer group's committed offsets of `topic` (-1001: none), and commits for it.
class Group {
 public:
  Group(const std::string& bootstrap, std::string topic, int32_t partitions,
        const std::string& name)
      : topic_(std::move(topic)), partitions_(partitions) {
    auto g = kafka::GroupOffsets::Create({{"bootstrap.servers", bootstrap}}, name);
    EXPECT_TRUE(g.has_value()) << g.error().message;
    if (g) offsets_ = std::move(*g);
  }
  std::map<int32_t, int64_t> Committed() {
    std::vector<kafka::TopicPartition> parts;
    for (int32_t p = 0; p < partitions_; ++p) parts.push_back({topic_, p, -1001});
    auto r = offsets_->Committed(parts, kKafkaTimeout);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    std::map<int32_t, int64_t> out;
    if (r) {
      for (const auto& tp : *r) out[tp.partition] = tp.offset;
    }
    return out;
  }
  void Commit(const std::map<int32_t, int64_t>& next) {
    std::vector<kafka::TopicPartition> parts;
    for (const auto& [p, o] : next) parts.push_back({topic_, p, o});
    auto r = offsets_->Commit(parts);
    ASSERT_TRUE(r.has_value()) << r.error().message;
  }

 private:
  std::string topic_;
  int32_t partitions_;
  std::unique_ptr<kafka::GroupOffsets> offsets_;
};

// Per stream ("tag/mode"), the batches at or after the group's committed offset of their partition.
std::map<std::string, int> AheadPerStream(const std::vector<Published>& all,
                                          const std::map<int32_t, int64_t>& committed) {
  std::map<std::string, int> ahead;
  for (const auto& b : all) {
    auto it = committed.find(b.partition);
    int64_t from = it == committed.end() || it->second < 0 ? 0 : it->second;
    if (b.offset >= from) ++ahead[StreamName(b.batch)];
  }
  return ahead;
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

// The snowflake IDs of `tag`, in the order they sit on the topic (one partition per tag).
std::vector<int64_t> SnowflakesOf(const std::vector<Published>& all, const std::string& tag) {
  std::vector<int64_t> ids;
  for (const auto& b : all) {
    if (b.batch.tag == tag && b.batch.mode == IdBatch::Mode::kSnowflake) {
      ids.insert(ids.end(), b.batch.ids.begin(), b.batch.ids.end());
    }
  }
  return ids;
}

// One `kleaf producer` node of a cluster, restartable on the same config and state.
class ProducerNode {
 public:
  ProducerNode(Cluster& cluster, const std::string& name, int batches_ahead,
               const std::string& streams)
      : cluster_(cluster), name_(name) {
    auto c = cluster.Config(name, cluster.dir() / (name + "-state"));
    c.Set("log.level", "debug")
        .Set("producer.batches_ahead", std::to_string(batches_ahead))
        .Set("producer.check_interval_ms", "100")
        .Set("producer.streams", streams);
    config_ = cluster.WriteConfig(name + ".yaml", c);
  }
  ~ProducerNode() {
    if (::testing::Test::HasFailure())
      std::cerr << "===== producer " << name_ << " =====\n" << Logs();
  }

  // Starts (again) and waits for the ready line; `env` e.g. the crash hook.
  std::expected<void, std::string> Start(
      std::vector<std::pair<std::string, std::string>> env = {}) {
    if (process_) earlier_logs_ += process_->Stderr();
    auto p =
        e2e::KleafProcess::Start({{"producer", "--config", config_.string()}, {}, std::move(env)});
    if (!p) return std::unexpected(p.error());
    process_ = std::move(*p);
    const auto deadline = SteadyClock::now() + seconds(90);
    while (process_->Stdout().find("kleaf producer running") == std::string::npos) {
      if (SteadyClock::now() > deadline) {
        return std::unexpected("producer not ready in time:\n" + process_->Stderr());
      }
      if (auto s = process_->WaitExit(milliseconds(50)); !s.timed_out) {
        return std::unexpected("producer exited (" + s.ToString() + "):\n" + process_->Stderr());
      }
    }
    return {};
  }

  e2e::KleafProcess& process() { return *process_; }

  // Waits until the current run logged `rounds` more finished rounds than it had when called.
  bool WaitRounds(int rounds, milliseconds timeout) {
    const int target = Count(process_->Stderr(), "[producer] checked:") + rounds;
    return WaitUntil([&] { return Count(process_->Stderr(), "[producer] checked:") >= target; },
                     timeout);
  }

  // The worker id the current run logged ("worker id N").
  std::optional<int64_t> WorkerId() const {
    std::smatch m;
    std::string log = process_->Stderr();
    static const std::regex kLine(R"(\[producer\] node \S+ running \(.*worker id (\d+)\))");
    if (!std::regex_search(log, m, kLine)) return std::nullopt;
    return std::stoll(m[1].str());
  }

  std::string Logs() const {
    return earlier_logs_ + (process_ ? process_->Stderr() : std::string());
  }

 private:
  Cluster& cluster_;
  std::string name_;
  std::filesystem::path config_;
  std::unique_ptr<e2e::KleafProcess> process_;
  std::string earlier_logs_;
};

class ProducerTest : public KafkaTest {};

// Three streams, K = 3: each has K batches ahead after start and no more after further rounds;
// when the group commits past some of them, the producer publishes exactly the missing ones.
TEST_F(ProducerTest, TopUpFollowsTheConsumerGroupsCommits) {
  Cluster cluster(broker_, "producer-topup", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  constexpr int kAhead = 3;
  ProducerNode producer(cluster, "prod-1", kAhead,
                        "[{tag: alpha, mode: segment, batch_size: 100}, "
                        "{tag: alpha, mode: snowflake, batch_size: 50}, "
                        "{tag: beta, mode: segment, batch_size: 7}]");
  ASSERT_TRUE(producer.Start().has_value());
  const std::string topic = cluster.prefix() + ".ids";
  Group group(broker_.bootstrap, topic, Cluster::kPartitions, topic + ".consumers");
  const std::vector<std::string> streams{"alpha/segment", "alpha/snowflake", "beta/segment"};

  auto ahead_now = [&] {
    return AheadPerStream(ReadAll(broker_.bootstrap, topic, Cluster::kPartitions),
                          group.Committed());
  };
  auto all_at_least = [&](int k) {
    auto ahead = ahead_now();
    for (const auto& s : streams) {
      if (ahead[s] < k) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  // Five more rounds see the batches already there and publish nothing.
  ASSERT_TRUE(producer.WaitRounds(5, seconds(20)));
  for (const auto& [s, n] : ahead_now()) EXPECT_EQ(n, kAhead) << s;

  // The group consumes the first two alpha/segment batches (and whatever lies before them).
  auto all = ReadAll(broker_.bootstrap, topic, Cluster::kPartitions);
  std::map<int32_t, int64_t> next;
  int seen = 0;
  for (const auto& b : all) {
    if (StreamName(b.batch) == "alpha/segment" && ++seen == 2) next[b.partition] = b.offset + 1;
  }
  ASSERT_EQ(next.size(), 1u);
  // ... and everything on beta's partition.
  int32_t beta_partition = kafka::PartitionFor("beta", Cluster::kPartitions);
  for (const auto& b : all) {
    if (b.partition == beta_partition)
      next[b.partition] = std::max(next[b.partition], b.offset + 1);
  }
  group.Commit(next);
  auto consumed = AheadPerStream(all, group.Committed());
  EXPECT_LT(consumed["alpha/segment"], kAhead);
  EXPECT_EQ(consumed["beta/segment"], 0);

  ASSERT_TRUE(WaitUntil([&] { return all_at_least(kAhead); }, seconds(20)));
  ASSERT_TRUE(producer.WaitRounds(5, seconds(20)));
  for (const auto& [s, n] : ahead_now()) EXPECT_EQ(n, kAhead) << s;

  all = ReadAll(broker_.bootstrap, topic, Cluster::kPartitions);
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
  // Snowflake batches: the leased worker id, IDs increasing within and across batches.
  auto worker = producer.WorkerId();
  ASSERT_TRUE(worker.has_value()) << producer.Logs();
  auto ids = SnowflakesOf(all, "alpha");
  ASSERT_GE(ids.size(), 50u * kAhead);
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
  const std::string topic = cluster.prefix() + ".ids";
  Group group(broker_.bootstrap, topic, Cluster::kPartitions, topic + ".consumers");
  const std::vector<std::string> streams{"t1/segment", "t2/segment", "t3/segment", "t1/snowflake",
                                         "t4/snowflake"};
  auto all_at_least = [&](int k) {
    auto ahead =
        AheadPerStream(ReadAll(broker_.bootstrap, topic, Cluster::kPartitions), group.Committed());
    for (const auto& s : streams) {
      if (ahead[s] < k) return false;
    }
    return true;
  };
  auto consume_everything = [&] {
    std::map<int32_t, int64_t> next;
    for (const auto& b : ReadAll(broker_.bootstrap, topic, Cluster::kPartitions)) {
      next[b.partition] = std::max(next[b.partition], b.offset + 1);
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
    for (const auto& b : ReadAll(broker_.bootstrap, topic, Cluster::kPartitions)) v.insert(b.value);
    return v;
  };
  const std::set<std::string> before = committed_values();
  std::vector<Published> open;
  for (auto& b : ReadAll(broker_.bootstrap, topic, Cluster::kPartitions, /*committed=*/false)) {
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

  auto all = ReadAll(broker_.bootstrap, topic, Cluster::kPartitions);
  ExpectNoDuplicates(all);
  for (const std::string tag : {"t1", "t4"}) {
    auto ids = SnowflakesOf(all, tag);
    ASSERT_GE(ids.size(), 3u * kAhead);
    for (size_t i = 1; i < ids.size(); ++i) {
      EXPECT_LT(ids[i - 1], ids[i]) << tag << " at " << i << " (across restarts)";
      EXPECT_EQ(e2e::SplitDefaultSnowflake(ids[i]).worker_id, *first_worker);
    }
  }
  producer.process().Terminate();
  EXPECT_TRUE(producer.process().WaitExit(seconds(20)).exited);
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
