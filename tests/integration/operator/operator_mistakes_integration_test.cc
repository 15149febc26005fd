// The operator-mistakes suite (issue 11, item 4): kleaf deployed wrongly, as operators do, against
// the real broker. Each scenario checks every ID served for duplicates (and prints how many it
// checked) and, where the setup is wrong, the refusal the node must give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/await.h"
#include "base/clock.h"
#include "cluster/allocator_client.h"
#include "cluster/topics.h"
#include "kafka/client.h"
#include "kleaf/batch.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/operator/operator_env.h"
#include "tests/integration/producer/producer_env.h"

namespace kleaf::integration::mistakes {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kKafkaTimeout{20000};

class OperatorMistakesTest : public KafkaTest {};

int64_t WorkerOf(int64_t id) { return e2e::SplitDefaultSnowflake(id).worker_id; }

std::set<int64_t> WorkersOf(const std::vector<int64_t>& ids) {
  std::set<int64_t> out;
  for (int64_t id : ids) out.insert(WorkerOf(id));
  return out;
}

std::string Joined(const std::set<int64_t>& values) {
  std::string s;
  for (int64_t v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
  return "{" + s + "}";
}

void Append(std::vector<int64_t>& to, const std::vector<int64_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// The last line of `text`.
std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// Whether a line of `text` contains `needle` and each of `numbers` as a whole number.
bool SaysWithNumbers(const std::string& text, const std::string& needle,
                     const std::vector<int>& numbers) {
  for (const auto& line : LinesWith(text, needle)) {
    bool all = true;
    for (int n : numbers) {
      const std::regex number("(^|[^0-9])" + std::to_string(n) + "([^0-9]|$)");
      if (!std::regex_search(line, number)) all = false;
    }
    if (all) return true;
  }
  return false;
}

// Gives `node` (added to `cluster` under its own name) the config `config`.
void Rewrite(Cluster& cluster, Node& node, const e2e::TestConfig& config) {
  node.config = cluster.WriteConfig(node.name + ".yaml", config);
}

// Segment load on `gateway` over `tags`: batches of 40, one client, lightly paced.
IdLoad::Options SegmentLoad(const Node& gateway, std::vector<std::string> tags) {
  return {.name = gateway.name,
          .port = gateway.port,
          .mode = IdLoad::Mode::kSegment,
          .tags = std::move(tags),
          .count = 40,
          .pause = milliseconds(2)};
}

// Tags spread over the 4 partitions, `per_partition` on each.
std::vector<std::string> SpreadTags(const std::string& base, int per_partition) {
  std::vector<std::string> tags;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    for (int k = 0; k < per_partition; ++k) {
      tags.push_back(TagOnPartition(base + std::to_string(p) + "x" + std::to_string(k), p,
                                    Cluster::kPartitions));
    }
  }
  return tags;
}

// --- 1. The same node.id twice ------------------------------------------------------------------

// Two gateways with one node.id (different state.path and ports) each lease a worker id of their
// own; a gateway killed with kill -9 and restarted on its own state.path gets its id back at once
// (its state directory's lock proves the previous process is gone), well before the lease TTL.
TEST_F(OperatorMistakesTest, SameNodeIdOnTwoGatewaysLeasesTwoWorkerIds) {
  constexpr int64_t kTtlMs = 20000;  // long: "at once" must be told apart from "after the TTL"
  Cluster cluster(broker_, "op-same-gw", ShortLeases(kTtlMs));
  auto nodes = cluster.StartNodes(1, 0);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& g1 = cluster.AddGateway("gw-same-1", 0);
  Node& g2 = cluster.AddGateway("gw-same-2", 1);
  for (Node* g : {&g1, &g2}) {
    Rewrite(cluster, *g,
            cluster.Config("gw-same", g->state).Set("kafka.reply_partition", g == &g1 ? "0" : "1"));
  }
  ASSERT_TRUE(StartNode(g1)) << cluster.Logs();
  ASSERT_TRUE(StartNode(g2)) << cluster.Logs();
  auto worker1 = WorkerIdOf(g1.port);
  auto worker2 = WorkerIdOf(g2.port);
  ASSERT_TRUE(worker1) << worker1.error();
  ASSERT_TRUE(worker2) << worker2.error();
  EXPECT_NE(*worker1, *worker2)
      << "two running gateways with node.id gw-same both claimed worker id " << *worker1;

  std::vector<int64_t> all;
  std::vector<int64_t> first_run;
  std::set<int64_t> workers2;
  {
    IdLoad l1({.name = "gw-same-1", .port = g1.port});
    IdLoad l2({.name = "gw-same-2", .port = g2.port});
    ASSERT_TRUE(WaitUntil([&] { return l1.ok() >= 200 && l2.ok() >= 200; }, seconds(30)))
        << l1.Summary() << "; " << l2.Summary();
    l1.Stop();
    l2.Stop();
    std::cout << "[ operator ] " << l1.Summary() << "; " << l2.Summary() << "\n";
    first_run = l1.Ids();
    auto ids2 = l2.Ids();
    workers2 = WorkersOf(ids2);
    EXPECT_EQ(WorkersOf(first_run), std::set<int64_t>{*worker1});
    EXPECT_EQ(workers2, std::set<int64_t>{*worker2});
    Append(all, first_run);
    Append(all, ids2);
  }
  EXPECT_EQ(ReportDuplicates("same node.id, gateway + gateway", all), 0);

  // kill -9 of gw-same-1 and a restart on its own state.path: the same worker id, at once.
  g1.process->KillAndWait();
  const auto killed = SteadyClock::now();
  ASSERT_TRUE(StartNode(g1)) << cluster.Logs();
  const double claimed_after_s = SecondsSince(killed);
  auto again = WorkerIdOf(g1.port);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *worker1) << "the restart on its own state.path got another id";
  EXPECT_LT(claimed_after_s * 1000, kTtlMs / 2)
      << "the restart waited for the lease TTL instead of proving the old process gone";
  {
    IdLoad l1({.name = "gw-same-1 (restarted)", .port = g1.port});
    IdLoad l2({.name = "gw-same-2", .port = g2.port});
    ASSERT_TRUE(WaitUntil([&] { return l1.ok() >= 100 && l2.ok() >= 100; }, seconds(30)))
        << l1.Summary() << "; " << l2.Summary();
    l1.Stop();
    l2.Stop();
    std::cout << "[ operator ] restart after kill -9 claimed worker id " << *again << " "
              << claimed_after_s << " s after the kill (lease TTL " << kTtlMs / 1000 << " s); "
              << l1.Summary() << "; " << l2.Summary() << "\n";
    Append(all, l1.Ids());
    Append(all, l2.Ids());
  }
  EXPECT_EQ(ReportDuplicates("same node.id, gateway + gateway, with a kill -9 and restart", all),
            0);
}

// A gateway and a `kleaf producer` with a snowflake stream, one node.id: different worker ids,
// no snowflake ID served by the gateway and published by the producer.
TEST_F(OperatorMistakesTest, SameNodeIdOnGatewayAndProducerLeasesTwoWorkerIds) {
  Cluster cluster(broker_, "op-same-prod", ShortLeases(6000));
  auto nodes = cluster.StartNodes(1, 0);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& g = cluster.AddGateway("gw-shared", 0);
  Rewrite(cluster, g, cluster.Config("host-1", g.state).Set("kafka.reply_partition", "0"));
  ASSERT_TRUE(StartNode(g)) << cluster.Logs();

  ProducerNode producer(
      cluster, "producer",
      cluster.Config("host-1", cluster.dir() / "producer-state")
          .Set("kafka.reply_partition", "1")
          .Set("producer.batches_ahead", "10")
          .Set("producer.check_interval_ms", "50")
          .Set("producer.streams", "[{tag: sf, mode: snowflake, batch_size: 1000}]"));
  auto started = producer.Start();
  ASSERT_TRUE(started) << started.error();
  // The producer's worker id shows in the snowflake IDs it publishes (checked below).
  auto gateway_worker = WorkerIdOf(g.port);
  ASSERT_TRUE(gateway_worker) << gateway_worker.error();

  // The gateway serves while a consumer group (this test) keeps consuming the ids topic, so the
  // producer keeps publishing.
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string topic = StreamTopic(ids_topic, "sf", IdBatch::Mode::kSnowflake);  // its stream
  kafka::Properties props{{"bootstrap.servers", broker_.bootstrap}};
  auto group = kafka::GroupOffsets::Create(props, ids_topic + ".consumers");
  ASSERT_TRUE(group) << group.error().message;
  auto reader = kafka::PartitionReader::Create(props);
  ASSERT_TRUE(reader) << reader.error().message;
  std::vector<int64_t> gateway_ids;
  {
    IdLoad load({.name = "gw-shared", .port = g.port});
    const auto start = SteadyClock::now();
    int commits = 0;
    while (SecondsSince(start) < 4) {
      std::vector<kafka::TopicPartition> ends;
      for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
        auto marks = (*reader)->Watermarks(topic, p, kKafkaTimeout);
        ASSERT_TRUE(marks) << marks.error().message;
        ends.push_back({topic, p, marks->second});
      }
      ASSERT_TRUE((*group)->Commit(ends)) << "committing the group's offsets";
      ++commits;
      // The consumer's pace (not a synchronisation): everything published is consumed every 100 ms.
      std::this_thread::sleep_for(milliseconds(100));
    }
    load.Stop();
    gateway_ids = load.Ids();
    std::cout << "[ operator ] " << load.Summary() << "; " << commits << " group commits\n";
  }
  EXPECT_TRUE(producer.Stop()) << "the producer did not exit 0 on SIGTERM";

  std::vector<int64_t> producer_ids;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    auto end = (*reader)->ReadToEnd(
        topic, p, 0,
        [&](const kafka::Message& m) {
          if (!m.value) return;
          auto batch = DecodeBatch(*m.value);
          ASSERT_TRUE(batch) << batch.error();
          if (batch->mode == IdBatch::Mode::kSnowflake) Append(producer_ids, batch->ids);
        },
        kKafkaTimeout);
    ASSERT_TRUE(end) << end.error().message;
  }
  ASSERT_FALSE(producer_ids.empty()) << producer.Logs();
  ASSERT_FALSE(gateway_ids.empty());
  std::set<int64_t> gateway_workers = WorkersOf(gateway_ids);
  std::set<int64_t> producer_workers = WorkersOf(producer_ids);
  std::cout << "[ operator ] gateway worker ids " << Joined(gateway_workers)
            << ", producer worker ids " << Joined(producer_workers) << "; producer published "
            << producer_ids.size() << " snowflake IDs\n";
  EXPECT_EQ(producer_workers.size(), 1u) << "one producer run, one worker id";
  EXPECT_FALSE(producer_workers.contains(*gateway_worker))
      << "the gateway and the producer with node.id host-1 both claimed worker id "
      << *gateway_worker;
  std::set<int64_t> shared;
  std::set_intersection(gateway_workers.begin(), gateway_workers.end(), producer_workers.begin(),
                        producer_workers.end(), std::inserter(shared, shared.end()));
  EXPECT_TRUE(shared.empty()) << "worker ids used by both: " << Joined(shared);
  std::vector<int64_t> all = gateway_ids;
  Append(all, producer_ids);
  EXPECT_EQ(ReportDuplicates("same node.id, gateway + producer", all), 0);
}

// --- 2. A wrong partition count -----------------------------------------------------------------

// kafka.partitions: 3 while the topics have 4: the gateway refuses to start (exit 2) and names
// the key and both numbers; a gateway without kafka.partitions takes the count from the topics.
TEST_F(OperatorMistakesTest, GatewayWithAWrongPartitionCountRefusesAndOneWithoutTheKeyServes) {
  Cluster cluster(broker_, "op-parts-gw",
                  {{"segment.auto_create", "true"}, {"segment.default_step", "100"}});
  auto nodes = cluster.StartNodes(2, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw_a = *nodes->gateways.front();

  Node& wrong = cluster.AddGateway("gw-three", 1);
  Rewrite(cluster, wrong,
          cluster.Config("gw-three", wrong.state)
              .Set("kafka.partitions", "3")
              .Set("kafka.reply_partition", "1"));
  auto refused = StartExpectingExit(wrong, seconds(30));
  ASSERT_TRUE(refused) << refused.error();
  std::cout << "[ operator ] kafka.partitions 3 on 4 partitions: " << refused->status.ToString()
            << " after " << refused->seconds << " s: " << LastLine(refused->err) << "\n";
  EXPECT_FALSE(refused->was_ready) << "the gateway served before it exited";
  EXPECT_TRUE(refused->status.exited && refused->status.code == 2) << refused->status.ToString();
  const std::string said = refused->err + refused->out;
  EXPECT_TRUE(SaysWithNumbers(said, "kafka.partitions", {3, 4}))
      << "no line naming kafka.partitions, 3 and 4:\n"
      << said;

  Node& unset = cluster.AddGateway("gw-unset", 2);
  Rewrite(cluster, unset,
          cluster.Config("gw-unset", unset.state)
              .Erase("kafka.partitions")
              .Set("kafka.reply_partition", "2"));
  ASSERT_TRUE(StartNode(unset)) << "a gateway without kafka.partitions did not start: "
                                << cluster.Logs();
  const auto tags = SpreadTags("unset", 2);
  IdLoad a(SegmentLoad(gw_a, tags));
  IdLoad b(SegmentLoad(unset, tags));
  ASSERT_TRUE(a.WaitForReplies(300, seconds(30))) << a.Summary();
  ASSERT_TRUE(b.WaitForReplies(300, seconds(30))) << b.Summary();
  a.Stop();
  b.Stop();
  std::cout << "[ operator ] " << a.Summary() << "; " << b.Summary() << "\n";
  EXPECT_EQ(a.errors(), 0) << a.Summary();
  EXPECT_EQ(b.errors(), 0) << b.Summary();
  EXPECT_EQ(ReportSegmentDuplicates("gateway without kafka.partitions", {&a, &b}, tags), 0);
}

// An allocator client that routes by 3 partitions while the topics have 4 (it does not check the
// metadata itself): every request that lands on a partition that does not own its tag gets an
// error, never a segment; none of its segments overlaps what the real gateways served.
TEST_F(OperatorMistakesTest, AllocatorAnswersARequestOnTheWrongPartitionWithAnError) {
  Cluster cluster(broker_, "op-parts-alloc",
                  {{"segment.auto_create", "true"}, {"segment.default_step", "100"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  const auto tags = SpreadTags("route", 3);
  IdLoad a(SegmentLoad(*nodes->gateways[0], tags));
  IdLoad b(SegmentLoad(*nodes->gateways[1], tags));
  ASSERT_TRUE(a.WaitForReplies(200, seconds(30))) << a.Summary();

  cluster::KafkaClientOptions options;
  options.props = {{"bootstrap.servers", broker_.bootstrap}};
  options.topics =
      cluster::ClusterTopics::For(cluster.prefix(), /*partitions=*/3, Cluster::kReplyPartitions);
  options.node_id = "misrouting-client";
  options.reply_partition = 3;
  auto client = cluster::KafkaAllocatorClient::Start(options, SystemClock::Instance());
  ASSERT_TRUE(client) << client.error().message;

  struct Served {
    std::string tag;
    int64_t start = 0;
    int64_t end = 0;
  };
  std::vector<Served> wrong_segments, right_segments;
  int wrong_requests = 0, refused = 0, other_errors = 0;
  std::string first_other_error, first_refusal;
  for (int round = 0; round < 3; ++round) {
    for (const auto& tag : tags) {
      const bool misrouted = kafka::PartitionFor(tag, 3) != kafka::PartitionFor(tag, 4);
      constexpr char kNoAnswer[] = "no answer within 30 s";
      auto r = Await<allocator::Segment>(seconds(30), kNoAnswer, [&](auto done) {
        (*client)->AllocateSegment(tag, 0, std::move(done));
      });
      ASSERT_FALSE(!r && r.error().message == kNoAnswer) << tag;
      if (misrouted) ++wrong_requests;
      if (r) {
        (misrouted ? wrong_segments : right_segments).push_back({tag, r->start, r->end});
      } else if (misrouted && r.error().code == Code::kFailedPrecondition &&
                 r.error().message.find(kArrivedOnPartition) != std::string::npos) {
        ++refused;
        if (first_refusal.empty()) first_refusal = r.error().message;
      } else {
        ++other_errors;
        if (first_other_error.empty()) first_other_error = tag + ": " + r.error().message;
      }
    }
  }
  (*client)->Stop();
  // The real gateways go on after the misrouted requests.
  const int64_t replies_before = a.ok();
  ASSERT_TRUE(a.WaitForReplies(replies_before + 200, seconds(30))) << a.Summary();
  a.Stop();
  b.Stop();

  int64_t overlapping = 0;
  int64_t checked = 0;
  for (const auto& tag : tags) {
    auto ids = a.Ids(tag);
    Append(ids, b.Ids(tag));
    checked += static_cast<int64_t>(ids.size());
    for (int64_t id : ids) {
      for (const auto& s : wrong_segments) {
        if (s.tag == tag && id >= s.start && id < s.end) ++overlapping;
      }
      for (const auto& s : right_segments) {
        if (s.tag == tag && id >= s.start && id < s.end) ++overlapping;
      }
    }
  }
  std::cout << "[ operator ] client routing by 3 of 4 partitions: " << wrong_requests
            << " misrouted requests, " << refused << " refused (\"" << first_refusal << "\"), "
            << wrong_segments.size() << " answered with a segment, " << other_errors
            << " other errors" << (first_other_error.empty() ? "" : " (" + first_other_error + ")")
            << "; " << right_segments.size() << " segments on the right partition; " << a.Summary()
            << "; " << b.Summary() << "\n";
  std::cout << "[ operator ] misrouted client: checked " << checked << " gateway IDs against "
            << wrong_segments.size() + right_segments.size() << " client segments: " << overlapping
            << " IDs served twice" << std::endl;
  EXPECT_GT(wrong_requests, 0);
  EXPECT_TRUE(wrong_segments.empty())
      << wrong_segments.size() << " misrouted requests got a "
      << "segment, e.g. " << wrong_segments.front().tag << " [" << wrong_segments.front().start
      << ", " << wrong_segments.front().end << ")";
  EXPECT_EQ(refused, wrong_requests) << first_other_error;
  EXPECT_EQ(overlapping, 0);
  EXPECT_EQ(ReportSegmentDuplicates("gateways beside a misrouting client", {&a, &b}, tags), 0);
}

// --- 3. Partitions added to live topics ---------------------------------------------------------

TEST_F(OperatorMistakesTest, PartitionsAddedToLiveTopicsAreNeverServedAndNewNodesRefuse) {
  Cluster cluster(broker_, "op-parts-added",
                  {{"segment.auto_create", "true"}, {"segment.default_step", "100"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  const auto tags = SpreadTags("grow", 2);
  IdLoad a(SegmentLoad(*nodes->gateways[0], tags));
  IdLoad b(SegmentLoad(*nodes->gateways[1], tags));
  ASSERT_TRUE(a.WaitForReplies(200, seconds(30))) << a.Summary();

  for (const std::string& topic : {cluster.prefix() + ".requests", cluster.prefix() + ".state"}) {
    auto r = TopicAdmin(broker_, {"partitions", topic, "6"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto altered = SteadyClock::now();
  std::cout << "[ operator ] requests and state topics of " << cluster.prefix()
            << " now have 6 partitions" << std::endl;
  const int64_t replies_at_alter = a.ok() + b.ok();

  // A node started now refuses.
  Node& late_gw = cluster.AddGateway("gw-late", 2);
  Rewrite(cluster, late_gw,
          cluster.Config("gw-late", late_gw.state)
              .Erase("kafka.partitions")
              .Set("kafka.reply_partition", "2"));
  auto gw_refused = StartExpectingExit(late_gw, seconds(30));
  ASSERT_TRUE(gw_refused) << gw_refused.error();
  Node& late_alloc = cluster.AddAllocator("alloc-late");
  Rewrite(cluster, late_alloc,
          cluster.Config("alloc-late", late_alloc.state).Erase("kafka.partitions"));
  auto alloc_refused = StartExpectingExit(late_alloc, seconds(30));
  ASSERT_TRUE(alloc_refused) << alloc_refused.error();
  const std::vector<std::pair<std::string, const Exit*>> late = {{"gateway", &*gw_refused},
                                                                 {"allocator", &*alloc_refused}};
  for (const auto& [what, exit] : late) {
    const std::string said = exit->err + exit->out;
    std::cout << "[ operator ] " << what << " started after the change: " << exit->status.ToString()
              << "; "
              << (LinesWith(said, kPartitionsAdded).empty() ? said.substr(0, 300)
                                                            : LinesWith(said, kPartitionsAdded)[0])
              << "\n";
    EXPECT_TRUE(exit->status.exited && exit->status.code == 1)
        << what << ": " << exit->status.ToString();
    EXPECT_TRUE(SaysWithNumbers(said, kPartitionsAdded, {4, 6}))
        << what << ": no line with \"" << kPartitionsAdded << "\", 4 and 6:\n"
        << said;
  }

  // The running allocators notice, say so, and never serve partitions 4 and 5. The consumer group
  // hands out the new partitions once a member's metadata shows them: at librdkafka's periodic
  // refresh (topic.metadata.refresh.interval.ms, 5 min by default) or at a rebalance. If none
  // came by itself, an operator stops alloc-2 (SIGTERM): alloc-1 takes over what the group gives.
  std::vector<Node*> allocators = nodes->allocators;
  // What each allocator's /metrics said last about its partitions (alloc-2's before it stops).
  std::map<const Node*, std::map<int32_t, PartitionActivity>> partitions_of;
  auto observe = [&](const Node& n) {
    auto seen = AllocatorPartitions(n);
    EXPECT_TRUE(seen) << seen.error();
    if (seen) partitions_of[&n] = *seen;
  };
  auto noticed_by = [&] {
    for (Node* n : allocators) {
      if (n->Log().find(kPartitionsAdded) != std::string::npos) return true;
    }
    return false;
  };
  bool noticed = WaitUntil(noticed_by, seconds(20));
  std::string how = "by itself";
  if (!noticed) {
    how = "after alloc-2 was stopped (a rebalance)";
    Node& alloc2 = *allocators[1];
    observe(alloc2);
    alloc2.process->Terminate();
    auto s = alloc2.process->WaitExit(seconds(30));
    EXPECT_TRUE(s.exited && s.code == 0) << s.ToString();
    noticed = WaitUntil(noticed_by, seconds(60));
  }
  const double noticed_after_s = SecondsSince(altered);
  EXPECT_TRUE(noticed) << "no allocator logged \"" << kPartitionsAdded << "\", not even after a "
                       << "rebalance";
  // The running gateways keep serving.
  EXPECT_TRUE(WaitUntil([&] { return a.ok() + b.ok() >= replies_at_alter + 400; }, seconds(30)))
      << a.Summary() << "; " << b.Summary();
  a.Stop();
  b.Stop();
  for (Node* n : allocators) {
    if (!n->Exited()) observe(*n);
    for (const auto& [p, activity] : partitions_of[n]) {
      EXPECT_TRUE(p < 4 || (activity.takeovers == 0 && !activity.serving))
          << n->name << " took over partition " << p << " beyond the layout";
    }
    for (const auto& line : LinesWith(n->Log(), kPartitionsAdded)) {
      std::cout << "[ operator ] " << n->name << ": " << line << "\n";
      break;
    }
  }
  std::cout << "[ operator ] partitions added: noticed " << how << ", " << noticed_after_s
            << " s after the change; " << a.Summary() << "; " << b.Summary() << "\n";
  EXPECT_EQ(a.errors(), 0) << a.Summary();
  EXPECT_EQ(b.errors(), 0) << b.Summary();
  EXPECT_EQ(ReportSegmentDuplicates("partitions added to live topics", {&a, &b}, tags), 0);
}

// --- 4. The state topic deleted and recreated ---------------------------------------------------

TEST_F(OperatorMistakesTest, RecreatedStateTopicIsRefusedByOldAndFreshAllocators) {
  Cluster cluster(broker_, "op-phoenix",
                  {{"segment.auto_create", "true"},
                   {"segment.default_step", "100"},
                   {"segment.max_step", "200"}});
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& alloc = *nodes->allocators.front();
  Node& gw = *nodes->gateways.front();
  const auto tags = SpreadTags("phoenix", 1);
  IdLoad before(SegmentLoad(gw, tags));
  ASSERT_TRUE(before.WaitForReplies(400, seconds(30))) << before.Summary();
  before.Stop();

  alloc.process->Terminate();
  auto stopped = alloc.process->WaitExit(seconds(30));
  ASSERT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString();
  const std::string state_topic = cluster.prefix() + ".state";
  kafka::Properties props{{"bootstrap.servers", broker_.bootstrap}};
  std::map<int32_t, int64_t> old_end;
  {
    auto reader = kafka::PartitionReader::Create(props);
    ASSERT_TRUE(reader) << reader.error().message;
    for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
      auto marks = (*reader)->Watermarks(state_topic, p, kKafkaTimeout);
      ASSERT_TRUE(marks) << marks.error().message;
      old_end[p] = marks->second;
    }
  }
  auto described = TopicAdmin(broker_, {"describe", state_topic});
  ASSERT_EQ(described.exit_code, 0) << described.output;
  auto deleted = TopicAdmin(broker_, {"delete", state_topic});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  auto created = TopicAdmin(broker_, {"create", state_topic, std::to_string(Cluster::kPartitions),
                                      "cleanup.policy=compact"});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  auto recreated = TopicAdmin(broker_, {"describe", state_topic});
  ASSERT_EQ(recreated.exit_code, 0) << recreated.output;
  // Records beyond what the allocator had applied, so offsets alone cannot tell.
  {
    auto producer = kafka::Producer::Create(props);
    ASSERT_TRUE(producer) << producer.error().message;
    int64_t produced = 0;
    for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
      for (int64_t i = 0; i < old_end[p] + 10; ++i) {
        auto sent = (*producer)->Send(state_topic, p, "operator/filler-" + std::to_string(i),
                                      std::string("{}"), {});
        ASSERT_TRUE(sent) << sent.error().message;
        ++produced;
      }
    }
    auto flushed = (*producer)->Flush(kKafkaTimeout);
    ASSERT_TRUE(flushed) << flushed.error().message;
    std::cout << "[ operator ] state topic recreated (" << described.output.substr(0, 120) << " -> "
              << recreated.output.substr(0, 120) << "), " << produced
              << " filler records beyond the old end offsets\n";
  }

  // The old allocator on its state.path, and a fresh one.
  Node& fresh = cluster.AddAllocator("alloc-fresh");
  ASSERT_TRUE(Spawn(alloc)) << cluster.Logs();
  ASSERT_TRUE(Spawn(fresh)) << cluster.Logs();
  auto refused = [](const Node& n) {
    return n.Log().find(kRecreated) != std::string::npos ||
           !n.process->WaitExit(milliseconds(0)).timed_out;
  };
  const bool both = WaitUntil([&] { return refused(alloc) && refused(fresh); }, seconds(60));
  // The gateway asks for segments meanwhile: it must never get one from recreated state.
  IdLoad after(SegmentLoad(gw, tags));
  WaitUntil([&] { return after.ok() + after.unavailable() >= 200; }, seconds(10));
  after.Stop();
  for (Node* n : {&alloc, &fresh}) {
    auto s = n->process->WaitExit(milliseconds(0));
    auto lines = LinesWith(n->Log(), kRecreated);
    // A run that exited serves nothing; a running one says on its /metrics.
    std::expected<std::set<int32_t>, std::string> served = std::set<int32_t>();
    if (s.timed_out) {
      if (auto ready = WaitReady(*n, SteadyClock::now() + seconds(10)); ready) {
        served = ServedPartitions(*n);
      } else {
        served = std::unexpected(ready.error());
      }
    }
    std::cout << "[ operator ] " << n->name << ": "
              << (s.timed_out ? std::string("still running") : s.ToString()) << "; "
              << (lines.empty() ? std::string("no line with \"recreated\"") : lines.front())
              << "; serves " << (served ? std::to_string(served->size()) : "?") << " partitions\n";
    EXPECT_FALSE(lines.empty()) << n->name << " said nothing about a recreated state topic";
    if (!s.timed_out) {
      EXPECT_TRUE(s.exited && s.code == 1) << n->name << ": " << s.ToString();
    }
    ASSERT_TRUE(served) << served.error();
    EXPECT_TRUE(served->empty()) << n->name << " serves partitions of the recreated state topic";
  }
  EXPECT_TRUE(both) << "not both allocators refused within 60 s";
  std::cout << "[ operator ] " << before.Summary() << "; after: " << after.Summary() << "\n";
  EXPECT_EQ(ReportSegmentDuplicates("state topic recreated", {&before, &after}, tags), 0);
}

// --- 4b. The requests topic deleted and created again ------------------------------------------

// The allocators record in the state topic how far they answered each requests partition. An
// operator who deletes the requests topic and creates it again starts its offsets over: an
// allocator resuming at the recorded position would take every new request for an answered one
// and drop it until the offsets caught up (dozens of requests per partition here, each costing a
// gateway its request timeout). It serves from the new topic's end instead, says so, and no ID is
// served twice across the recreation.
TEST_F(OperatorMistakesTest, RecreatedRequestsTopicIsServedAtOnce) {
  Cluster cluster(broker_, "op-requests",
                  {{"segment.auto_create", "true"},
                   {"segment.default_step", "10"},
                   {"segment.max_step", "10"}});
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& alloc = *nodes->allocators.front();
  Node& gw = *nodes->gateways.front();
  const auto tags = SpreadTags("requests", 1);
  // Batches of 40 from segments of 10: four requests per answer, about 40 per partition.
  IdLoad before(SegmentLoad(gw, tags));
  ASSERT_TRUE(WaitUntil([&] { return before.ok() >= 40; }, seconds(60))) << before.Summary();
  before.Stop();
  for (Node* n : {&gw, &alloc}) {
    n->process->Terminate();
    auto stopped = n->process->WaitExit(seconds(30));
    ASSERT_TRUE(stopped.exited && stopped.code == 0) << n->name << ": " << stopped.ToString();
  }
  const std::string requests_topic = cluster.prefix() + ".requests";
  auto deleted = TopicAdmin(broker_, {"delete", requests_topic});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  auto created =
      TopicAdmin(broker_, {"create", requests_topic, std::to_string(Cluster::kPartitions)});
  ASSERT_EQ(created.exit_code, 0) << created.output;

  ASSERT_TRUE(Spawn(alloc)) << cluster.Logs();
  ASSERT_TRUE(WaitReady(alloc, SteadyClock::now() + seconds(60))) << cluster.Logs();
  ASSERT_TRUE(Spawn(gw)) << cluster.Logs();
  ASSERT_TRUE(WaitReady(gw, SteadyClock::now() + seconds(60))) << cluster.Logs();
  IdLoad after(SegmentLoad(gw, tags));
  const bool served = WaitUntil([&] { return after.ok() >= 40; }, seconds(20));
  after.Stop();
  std::cout << "[ operator ] requests topic recreated: before " << before.Summary() << "; after "
            << after.Summary() << "\n";
  EXPECT_TRUE(served) << "not served within 20 s of the restart: " << after.Summary() << "\n"
                      << cluster.Logs();
  EXPECT_FALSE(LinesWith(alloc.Log(), "is past its end").empty())
      << "the allocator did not say its recorded positions were past the new topic's end";
  EXPECT_EQ(ReportSegmentDuplicates("requests topic recreated", {&before, &after}, tags), 0);
}

// --- 5. An allocator with another topic prefix on a cluster allocator's state.path ---------------

TEST_F(OperatorMistakesTest, AllocatorWithAnotherTopicPrefixOnAClusterStatePathRefuses) {
  Cluster cluster(broker_, "op-prefix",
                  {{"segment.auto_create", "true"}, {"segment.default_step", "100"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& alloc1 = *nodes->allocators[0];
  Node& alloc2 = *nodes->allocators[1];
  const auto tags = SpreadTags("prefix", 2);
  IdLoad a(SegmentLoad(*nodes->gateways[0], tags));
  IdLoad b(SegmentLoad(*nodes->gateways[1], tags));
  ASSERT_TRUE(a.WaitForReplies(200, seconds(30))) << a.Summary();

  alloc2.process->Terminate();
  auto stopped = alloc2.process->WaitExit(seconds(30));
  ASSERT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString();
  ASSERT_TRUE(cluster.WaitBalanced({&alloc1}, seconds(60))) << cluster.Logs();

  Node& other = cluster.AddAllocator("alloc-other-prefix");
  Rewrite(cluster, other,
          cluster.Config("alloc-other-prefix", alloc2.state)
              .Set("kafka.topic_prefix", cluster.prefix() + "-other"));
  auto refused = StartExpectingExit(other, seconds(30));
  ASSERT_TRUE(refused) << refused.error();
  const std::string said = refused->err + refused->out;
  auto lines = LinesWith(said, kHoldsStateOf);
  std::cout << "[ operator ] allocator with prefix " << cluster.prefix() << "-other on "
            << alloc2.name << "'s state.path: " << refused->status.ToString() << " after "
            << refused->seconds << " s; " << (lines.empty() ? said.substr(0, 300) : lines.front())
            << "\n";
  EXPECT_TRUE(refused->status.exited && refused->status.code == 1) << refused->status.ToString();
  EXPECT_NE(said.find(kHoldsStateOf), std::string::npos) << said;

  // The cluster's gateways keep serving.
  const int64_t replies = a.ok() + b.ok();
  EXPECT_TRUE(WaitUntil([&] { return a.ok() + b.ok() >= replies + 300; }, seconds(30)))
      << a.Summary() << "; " << b.Summary();
  a.Stop();
  b.Stop();
  std::cout << "[ operator ] " << a.Summary() << "; " << b.Summary() << "\n";
  EXPECT_EQ(a.errors(), 0) << a.Summary();
  EXPECT_EQ(b.errors(), 0) << b.Summary();
  EXPECT_EQ(ReportSegmentDuplicates("allocator with another topic prefix", {&a, &b}, tags), 0);
}

// --- 6. snowflake.time_unit_ms of a second and more --------------------------------------------

class TimeUnitTest : public OperatorMistakesTest, public ::testing::WithParamInterface<int64_t> {};

// Two gateways (one of them restarted after a kill -9) serve for three renew intervals and more:
// no lease is revoked, no request answered 503 after that, no ID twice.
TEST_P(TimeUnitTest, LeasesHoldWithALongTimeUnit) {
  if (e2e::Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  const int64_t unit_ms = GetParam();
  auto keys = ShortLeases(6000);
  keys["snowflake.time_unit_ms"] = std::to_string(unit_ms);
  Cluster cluster(broker_, "op-unit-" + std::to_string(unit_ms), keys);
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& g1 = *nodes->gateways[0];
  // g2's clock is 0.5 s ahead (libfaketime): within the 1 s skew the registry accepts, as two
  // NTP-synchronised hosts may be. A renewal that reported the end of the current tick would be
  // ahead of the allocator's clock by up to unit + 0.5 s, beyond the skew bound. g2 also crashes
  // and comes back on its own state.path (a same-node claim sets a floor ahead of the clock).
  e2e::OffsetFile offset(cluster.dir());
  offset.Set("+0.5");
  Node& g2 = cluster.AddGateway("gw-ahead", 1);
  ASSERT_TRUE(StartNode(g2, offset.Environment())) << cluster.Logs();
  g2.process->KillAndWait();
  ASSERT_TRUE(StartNode(g2, offset.Environment())) << cluster.Logs();
  // At most ~1,000 IDs a second each: well inside 4,096 a tick.
  IdLoad l1({.name = g1.name, .port = g1.port, .count = 50, .pause = milliseconds(50)});
  IdLoad l2({.name = g2.name, .port = g2.port, .count = 50, .pause = milliseconds(50)});
  const auto start = SteadyClock::now();
  // Three renew intervals and a tick at least, then one more interval that must be all 200s.
  // The scenario's length (time passing is what it tests, not a synchronisation).
  const auto settled = milliseconds(3 * kRenewIntervalMs + unit_ms + 500);
  std::this_thread::sleep_until(start + settled);
  const int64_t ok_settled = l1.ok() + l2.ok();
  const int64_t unavailable_settled = l1.unavailable() + l2.unavailable();
  std::this_thread::sleep_until(start + settled + milliseconds(2 * kRenewIntervalMs));
  l1.Stop();
  l2.Stop();
  std::cout << "[ operator ] time_unit_ms " << unit_ms << ": " << l1.Summary() << "; "
            << l2.Summary() << "; after " << settled.count()
            << " ms: " << l1.ok() + l2.ok() - ok_settled << " replies, "
            << l1.unavailable() + l2.unavailable() - unavailable_settled << " 503s\n";
  for (Node* g : {&g1, &g2}) {
    auto lost = LinesWith(g->Log(), kLostLine);
    EXPECT_TRUE(lost.empty()) << g->name << ": " << lost.size() << " lines, e.g. " << lost.front();
  }
  EXPECT_GT(l1.ok() + l2.ok(), ok_settled) << "nothing served after three renew intervals";
  EXPECT_EQ(l1.unavailable() + l2.unavailable(), unavailable_settled)
      << "503s after three renew intervals";
  EXPECT_EQ(l1.errors() + l2.errors(), 0) << l1.Summary() << "; " << l2.Summary();
  std::vector<int64_t> all = l1.Ids();
  Append(all, l2.Ids());
  EXPECT_EQ(ReportDuplicates("time_unit_ms " + std::to_string(unit_ms), all), 0);
}

INSTANTIATE_TEST_SUITE_P(OperatorMistakes, TimeUnitTest, ::testing::Values(1000, 2000),
                         [](const auto& info) {
                           return "Unit" + std::to_string(info.param) + "ms";
                         });

// --- 7. A clock jumped forward during a broker outage, kill -9, the worker id recycled
// ------------

TEST_F(OperatorMistakesTest, ClockJumpedForwardInAnOutageThenKillThenRecycleNeverRepeats) {
  if (e2e::Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  // Long enough for the broker's shutdown to fit in what is left of the lease after the last
  // renewal (ttl - margin): the jump must come while the gateway still issues.
  constexpr int64_t kTtlMs = 15000;
  auto keys = ShortLeases(kTtlMs);
  keys["workers.claim_timeout_ms"] = "60000";  // the heir claims while the allocator recovers
  // 4 worker ids (41 + 2 + 20 bits): an expired id is recycled only once every id has been used.
  keys["snowflake.timestamp_bits"] = "41";
  keys["snowflake.worker_bits"] = "2";
  keys["snowflake.sequence_bits"] = "20";
  auto worker_of = [](int64_t id) { return (id >> 20) & 3; };
  auto timestamp_of = [](int64_t id) { return (id >> 22) + 1288834974657; };
  Cluster cluster(broker_, "op-jump", keys);
  auto nodes = cluster.StartNodes(1, 0);
  ASSERT_TRUE(nodes) << nodes.error();
  e2e::OffsetFile offset(cluster.dir());
  Node& jumper = cluster.AddGateway("gw-jumper", 0);
  ASSERT_TRUE(StartNode(jumper, offset.Environment())) << cluster.Logs();
  auto claimed = WorkerIdOf(jumper.port);
  ASSERT_TRUE(claimed) << claimed.error();
  const int64_t x = *claimed;

  std::vector<int64_t> jumper_ids;
  int64_t jump_at_ms = 0;
  double issued_after_jump_s = 0;
  auto killed = SteadyClock::now();
  {
    // The outage: the broker stopped (a frozen one would still take the renewals sent meanwhile
    // from its socket buffers once thawed, and their jumped timestamps block the id).
    BrokerRestartGuard guard(broker_);
    IdLoad load({.name = "gw-jumper", .port = jumper.port, .pause = milliseconds(1)});
    ASSERT_TRUE(WaitUntil([&] { return load.ok() >= 100; }, seconds(30))) << load.Summary();
    auto stopped_broker = broker_.Stop();
    ASSERT_TRUE(stopped_broker) << stopped_broker.error();
    offset.Set("+60");
    jump_at_ms = e2e::WallClockMs();
    const auto jumped = SteadyClock::now();
    // It may issue (with its clock a minute ahead) until its lease margin runs out; then it answers
    // only 503: no reply for 1.5 s while the 503s go on.
    int64_t ok_seen = load.ok();
    int64_t unavailable_seen = load.unavailable();
    auto ok_changed = SteadyClock::now();
    bool stopped = WaitUntil(
        [&] {
          if (load.ok() != ok_seen) {
            ok_seen = load.ok();
            ok_changed = SteadyClock::now();
            unavailable_seen = load.unavailable();
          }
          return SteadyClock::now() - ok_changed >= milliseconds(1500) &&
                 load.unavailable() > unavailable_seen;
        },
        milliseconds(kTtlMs + 10000));
    issued_after_jump_s = std::chrono::duration<double>(ok_changed - jumped).count();
    load.Stop();
    jumper.process->KillAndWait();
    killed = SteadyClock::now();
    std::cout << "[ operator ] " << load.Summary() << "; last ID " << issued_after_jump_s
              << " s after the jump\n";
    EXPECT_TRUE(stopped) << "the jumped gateway never stopped issuing";
    jumper_ids = load.Ids();
    auto restarted = broker_.Start();
    ASSERT_TRUE(restarted) << restarted.error();
  }
  int64_t jumper_max_ms = 0, ahead = 0;
  for (int64_t id : jumper_ids) {
    jumper_max_ms = std::max(jumper_max_ms, timestamp_of(id));
    if (timestamp_of(id) > jump_at_ms + 30000) ++ahead;
  }
  std::cout << "[ operator ] the jumped gateway issued " << jumper_ids.size() << " IDs, " << ahead
            << " of them stamped more than 30 s ahead; its last timestamp is "
            << jumper_max_ms - jump_at_ms << " ms after the jump\n";

  // Another gateway recycles worker id X after the lease TTL and serves until the wall clock has
  // passed every timestamp the jumped gateway issued.
  // Three gateways take the never used ids 1, 2 and 3; one of them watches the registry until X
  // is free (its lease may run longer than TTL after the kill: a renewal that reached the broker
  // before it stopped is handled after its restart, and extends the lease from then); then the
  // heir's claim gets the only expired id, X.
  Node& probe = cluster.AddGateway("gw-probe", 2);
  ASSERT_TRUE(StartNode(probe)) << cluster.Logs();
  // (Reply partitions below 3: AddGateway sets the standalone key snowflake.worker_id to one more.)
  ASSERT_TRUE(StartNode(cluster.AddGateway("gw-fill-2", 1))) << cluster.Logs();
  ASSERT_TRUE(StartNode(cluster.AddGateway("gw-fill-3", 2))) << cluster.Logs();
  std::string registry;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto view = GetWorkers(probe.port);
        if (!view) return false;
        registry = view->body;
        return view->leased == 3;
      },
      seconds(90)))
      << "worker id " << x << " still leased " << SecondsSince(killed)
      << " s after the kill: " << registry;
  const double freed_after_s = SecondsSince(killed);
  Node& heir = cluster.AddGateway("gw-heir", 1);
  ASSERT_TRUE(StartNode(heir)) << cluster.Logs();
  auto heir_worker = WorkerIdOf(heir.port);
  ASSERT_TRUE(heir_worker) << heir_worker.error();
  ASSERT_EQ(*heir_worker, x) << "the crashed gateway's worker id was not recycled: this "
                                "run tested nothing";
  std::vector<int64_t> heir_ids;
  {
    // Idle (no IDs) until the heir's timestamps reach what the jumped gateway issued.
    const int64_t from_ms = std::max<int64_t>(0, jumper_max_ms - 5000);
    WaitUntil([&] { return e2e::WallClockMs() >= from_ms; }, seconds(90));
    IdLoad load({.name = "gw-heir", .port = heir.port, .pause = milliseconds(1)});
    const bool passed = WaitUntil(
        [&] { return e2e::WallClockMs() > jumper_max_ms + 1000 && load.ok() >= 100; }, seconds(90));
    load.Stop();
    EXPECT_TRUE(passed) << load.Summary();
    std::cout << "[ operator ] worker id " << x << " free " << freed_after_s
              << " s after the kill; " << load.Summary() << "\n";
    heir_ids = load.Ids();
  }
  for (int64_t id : heir_ids) ASSERT_EQ(worker_of(id), x) << id;
  std::vector<int64_t> all = jumper_ids;
  Append(all, heir_ids);
  EXPECT_EQ(ReportDuplicates("clock +60 s in an outage, kill -9, worker id recycled", all), 0);
}

}  // namespace
}  // namespace kleaf::integration::mistakes
