// Two datacenters (issue 17): two kleaf clusters on two Kafka brokers of this machine, datacenter
// 0 and 1 of 2, issuing the same tags at once in segment, snowflake and uuid7 modes never hand out
// the same ID; a client preferring datacenter 0 keeps getting IDs from datacenter 1 when datacenter
// 0's gateway dies; the operator who gets the datacenter keys wrong is refused at start; and a
// `kleaf producer` in each datacenter publishes only its datacenter's IDs.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kleaf/batch_consumer.h"
#include "kleaf/http_client.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/producer/producer_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A second broker on a free port, started by compose/kafka.sh for this test and removed with
// its data when the test ends, whatever happened.
class SecondBroker {
 public:
  explicit SecondBroker(const KafkaBroker& first) : dir_(tmp_.path() / "kafka") {
    broker_.script = first.script;
    broker_.dir = dir_.string();
  }
  ~SecondBroker() {
    if (started_) RunScript({broker_.script, "stop", "--dir", broker_.dir, "--clean"}, seconds(60));
  }
  std::expected<void, std::string> Start() {
    if (broker_.script.empty()) return std::unexpected("no KLEAF_TEST_KAFKA_SCRIPT");
    auto port = RunScript({broker_.script, "free-port"}, seconds(10));
    if (port.exit_code != 0) return std::unexpected("free-port: " + port.output);
    broker_.port = port.output.substr(0, port.output.find_first_of("\r\n"));
    broker_.bootstrap = "127.0.0.1:" + broker_.port;
    started_ = true;
    return broker_.Start();
  }
  const KafkaBroker& broker() const { return broker_; }

 private:
  e2e::TempDir tmp_;
  std::filesystem::path dir_;
  KafkaBroker broker_;
  bool started_ = false;
};

// `count` IDs of `mode` ("segment", "snowflake", "uuid7") of `tag` from the gateway at `port`, as
// text, asking again on a 503 (a segment not ready on a loaded machine) for at most 10 s.
std::expected<std::vector<std::string>, std::string> Fetch(uint16_t port, const std::string& mode,
                                                           const std::string& tag, int count) {
  e2e::HttpClient http(port);
  const std::string target = "/api/v1/" + mode + "/" + tag + "?count=" + std::to_string(count);
  auto reply = http.Get(target);
  for (const auto give_up = SteadyClock::now() + seconds(10);
       reply && reply->status == 503 && SteadyClock::now() < give_up;) {
    reply = http.Get(target);
  }
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected(target + ": " + std::to_string(reply->status) + " " + reply->body);
  }
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (!j.is_object() || !j.contains("ids")) return std::unexpected("no ids: " + reply->body);
  std::vector<std::string> ids;
  for (const auto& id : j["ids"]) ids.push_back(id.get<std::string>());
  return ids;
}

// Datacenter 0 and 1 of 2: a second broker beside the first, and one cluster per broker, not
// started, on one topic prefix (the peer check reads the other side's layout topic), each
// listing the other's broker as its peer.
class DatacenterTest : public KafkaTest {
 protected:
  void SetUp() override {
    KafkaTest::SetUp();
    if (IsSkipped()) return;
    began_ = SteadyClock::now();
    second_ = std::make_unique<SecondBroker>(broker_);
    auto started = second_->Start();
    ASSERT_TRUE(started) << "second broker: " << started.error();
    std::cout << "[ datacenter ] second broker on " << second().bootstrap << " after "
              << SecondsSince(began_) << " s\n";
    prefix_ =
        "kleaf-it-dc-" + std::to_string(::getpid()) + "-" + std::to_string(e2e::WallClockMs());
    auto config = [&](int index, const std::string& peer) {
      return std::map<std::string, std::string>{{"kafka.topic_prefix", prefix_},
                                                {"datacenter.count", "2"},
                                                {"datacenter.index", std::to_string(index)},
                                                {"datacenter.peers", "[\"" + peer + "\"]"},
                                                {"segment.auto_create", "true"},
                                                {"segment.default_step", "100"}};
    };
    dc_[0] = std::make_unique<Cluster>(broker_, "dc0", config(0, second().bootstrap));
    dc_[1] = std::make_unique<Cluster>(second(), "dc1", config(1, broker_.bootstrap));
  }

  Cluster& dc(int index) { return *dc_[index]; }
  const KafkaBroker& second() const { return second_->broker(); }
  // The broker of datacenter `index`.
  const KafkaBroker& broker_of(int index) const { return index == 0 ? broker_ : second(); }

  SteadyClock::time_point began_;
  // kafka.topic_prefix of both clusters (not Cluster::prefix(): the key overrides it).
  std::string prefix_;
  // Declared before the clusters, so that their nodes are gone before the broker stops.
  std::unique_ptr<SecondBroker> second_;
  std::array<std::unique_ptr<Cluster>, 2> dc_;
};

TEST_F(DatacenterTest, TwoDatacentersNeverShareAnIdAndTheClientFailsOverBetweenThem) {
  const auto began = began_;
  Cluster& dc0 = dc(0);
  Cluster& dc1 = dc(1);

  // The tired operator copies datacenter 0's config to datacenter 1's first node: the peer check
  // sees datacenter 0's layout on the first broker and refuses before anything is recorded.
  // (Datacenter 0 first: the check can only see a peer that recorded its layout.)
  auto dc0_nodes = dc0.StartNodes(1, 1);
  ASSERT_TRUE(dc0_nodes) << dc0_nodes.error();
  Node& copied = dc1.AddNode("copied", Node::Role::kAllocator, {{"datacenter.index", "0"}});
  auto refused_copy = StartExpectingExit(copied, seconds(40));
  ASSERT_TRUE(refused_copy) << refused_copy.error();
  const std::string copy_said = refused_copy->err + refused_copy->out;
  std::cout << "[ datacenter ] copied config: " << refused_copy->status.ToString() << ": "
            << LinesWith(copy_said, "datacenter.index").size() << " line(s) naming the key\n";
  EXPECT_FALSE(refused_copy->was_ready);
  EXPECT_TRUE(refused_copy->status.exited && refused_copy->status.code == 2)
      << refused_copy->status.ToString();
  EXPECT_NE(copy_said.find("datacenter.index: 0 is also the index of the cluster at "
                           "datacenter.peers[0]"),
            std::string::npos)
      << copy_said;

  auto dc1_nodes = dc1.StartNodes(1, 1);
  ASSERT_TRUE(dc1_nodes) << dc1_nodes.error();
  Node& gw0 = *dc0_nodes->gateways.front();
  Node& gw1 = *dc1_nodes->gateways.front();
  std::cout << "[ datacenter ] both clusters up after " << SecondsSince(began) << " s\n";

  // The same tags, issued by both datacenters at once.
  std::set<std::string> seen[2];
  std::string errors[2];
  std::vector<std::thread> load;
  for (int dc = 0; dc < 2; ++dc) {
    load.emplace_back([&, dc] {
      const uint16_t port = dc == 0 ? gw0.port : gw1.port;
      for (int round = 0; round < 10 && errors[dc].empty(); ++round) {
        for (const char* mode : {"segment", "snowflake", "uuid7"}) {
          auto ids = Fetch(port, mode, "order", 100);
          if (!ids) {
            errors[dc] = ids.error();
            return;
          }
          for (auto& id : *ids) {
            if (!seen[dc].insert(std::string(mode) + ":" + id).second) {
              errors[dc] = std::string(mode) + " ID twice in one datacenter: " + id;
            }
          }
        }
      }
    });
  }
  for (auto& t : load) t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  ASSERT_EQ(seen[0].size(), 3000u);
  ASSERT_EQ(seen[1].size(), 3000u);
  int common_ids = 0;
  for (const auto& id : seen[0]) common_ids += seen[1].contains(id) ? 1 : 0;
  EXPECT_EQ(common_ids, 0) << "IDs handed out by both datacenters";
  // Why: datacenter d's segment IDs are d modulo 2, its worker ids in its half of 0-1023.
  for (int dc = 0; dc < 2; ++dc) {
    for (const auto& entry : seen[dc]) {
      const auto colon = entry.find(':');
      const std::string mode = entry.substr(0, colon);
      if (mode == "uuid7") continue;
      const int64_t id = std::stoll(entry.substr(colon + 1));
      if (mode == "segment") {
        EXPECT_EQ(id % 2, dc) << "segment ID " << id << " of datacenter " << dc;
      } else {
        const int64_t worker = e2e::SplitDefaultSnowflake(id).worker_id;
        EXPECT_EQ(worker / 512, dc) << "snowflake ID " << id << " of worker " << worker;
      }
    }
  }
  std::cout << "[ datacenter ] 3000 IDs from each datacenter (segment, snowflake, uuid7): "
            << common_ids << " in common\n";

  // A client in datacenter 0 prefers its gateway, and fails over to datacenter 1 when it dies.
  HttpClient::Options options;
  options.gateways = {{"127.0.0.1", gw1.port, 1}, {"127.0.0.1", gw0.port, 0}};
  options.local_datacenter = 0;
  options.request_timeout = std::chrono::milliseconds(2000);
  auto client = HttpClient::Create(options);
  ASSERT_TRUE(client) << client.error().message;
  for (int i = 0; i < 5; ++i) {
    auto id = (*client)->NextSegment("order");
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_EQ(*id % 2, 0) << "from datacenter 1 while datacenter 0's gateway runs";
  }
  auto stopped = Stop(gw0);
  EXPECT_TRUE(stopped.exited) << stopped.ToString();
  std::set<int64_t> after;
  for (int i = 0; i < 20; ++i) {
    auto id = (*client)->NextSegment("order");
    ASSERT_TRUE(id) << "after datacenter 0's gateway stopped: " << id.error().message;
    EXPECT_EQ(*id % 2, 1) << "datacenter 0's gateway is gone";
    EXPECT_TRUE(after.insert(*id).second);
    auto uuid = (*client)->NextUuid7("order");
    ASSERT_TRUE(uuid) << uuid.error().message;
  }
  std::cout << "[ datacenter ] client with local_datacenter 0: 20 IDs from datacenter 1 after "
            << "its gateway stopped (" << (*client)->stats().failovers << " failovers)\n";

  // A node of datacenter 1's cluster configured as datacenter 0 (no peers listed): the layout
  // datacenter 1 recorded refuses it, naming the keys and the values to set.
  Node& wrong = dc1.AddNode(
      "wrong-index", Node::Role::kGateway,
      {{"datacenter.index", "0"}, {"datacenter.peers", "[]"}, {"kafka.reply_partition", "3"}});
  auto refused = StartExpectingExit(wrong, seconds(40));
  ASSERT_TRUE(refused) << refused.error();
  const std::string said = refused->err + refused->out;
  std::cout << "[ datacenter ] wrong index: " << refused->status.ToString() << " after "
            << refused->seconds << " s\n";
  EXPECT_FALSE(refused->was_ready);
  EXPECT_TRUE(refused->status.exited && refused->status.code == 2) << refused->status.ToString();
  EXPECT_NE(said.find("datacenter.index: this node is configured as datacenter 0 of 2, but this "
                      "cluster's layout"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("set datacenter.index: 1 and datacenter.count: 2"), std::string::npos)
      << said;
  std::cout << "[ datacenter ] done after " << SecondsSince(began) << " s\n";
}

// `kleaf producer` in two datacenters: a producer in each publishes a segment stream and a
// snowflake stream of one tag, and a BatchConsumer in each takes a few thousand IDs of both. Every
// segment batch lists its IDs (counter c as c * 2 + d in datacenter d, datacenter.h), so every
// segment ID of datacenter d is d modulo 2 and every snowflake ID carries a worker id of d's half
// of 0-1023; no ID is taken twice in or across the datacenters, and each was published there. A
// consumer's claim deletes its batches from the topic (the claim floor, docs/ids-topic.md), so the
// producers publish first, what they published is read, and the consumers take IDs after that.
TEST_F(DatacenterTest, ProducersOfBothDatacentersPublishOnlyTheirOwnIds) {
  for (int d : {0, 1}) {
    auto nodes = dc(d).StartNodes(1, 0);
    ASSERT_TRUE(nodes) << "datacenter " << d << ": " << nodes.error();
  }
  constexpr int64_t kBatch = 100;
  // Per datacenter and mode: within what the producer publishes in its first round (6 x 4
  // partitions x 100), with room for the batches the consumer claims ahead.
  constexpr size_t kEach = 1500;
  const std::array<IdBatch::Mode, 2> modes{IdBatch::Mode::kSegment, IdBatch::Mode::kSnowflake};
  std::array<std::unique_ptr<ProducerNode>, 2> producers;
  std::array<std::unique_ptr<BatchConsumer>, 2> consumers;
  for (int d : {0, 1}) {
    producers[d] = std::make_unique<ProducerNode>(
        dc(d), "prod-dc" + std::to_string(d), 6,
        "[{tag: order, mode: segment, batch_size: " + std::to_string(kBatch) +
            "}, {tag: order, mode: snowflake, batch_size: " + std::to_string(kBatch) + "}]");
    auto started = producers[d]->Start();
    ASSERT_TRUE(started) << "datacenter " << d << ": " << started.error();
    const auto worker = producers[d]->WorkerId();
    ASSERT_TRUE(worker.has_value()) << producers[d]->Logs();
    EXPECT_EQ(*worker / 512, d) << "the producer of datacenter " << d << " leased worker id "
                                << *worker;
    ASSERT_TRUE(producers[d]->WaitRounds(1, seconds(30))) << producers[d]->Logs();
    EXPECT_TRUE(producers[d]->Stop()) << "datacenter " << d;
  }

  // What each producer published, read_committed (as the consumers read).
  std::array<std::array<std::set<int64_t>, 2>, 2> published;  // [datacenter][mode]
  for (int d : {0, 1}) {
    const std::string ids_topic = prefix_ + ".ids";
    for (const auto& p : ReadAll(broker_of(d).bootstrap,
                                 StreamTopics(ids_topic, {"order/segment", "order/snowflake"}),
                                 Cluster::kPartitions)) {
      const bool segment = p.batch.mode == IdBatch::Mode::kSegment;
      if (segment) {
        EXPECT_EQ(p.batch.start, 0) << "a range, not a listed batch: " << p.value;
        EXPECT_EQ(p.batch.end, 0) << "a range, not a listed batch: " << p.value;
        EXPECT_LE(p.batch.size(), kBatch) << p.value;
      }
      EXPECT_FALSE(p.batch.ids.empty()) << p.value;
      published[d][segment ? 0 : 1].insert(p.batch.ids.begin(), p.batch.ids.end());
    }
    for (int m : {0, 1}) ASSERT_GE(published[d][m].size(), kEach + 2 * kBatch);
  }

  for (int d : {0, 1}) {
    BatchConsumer::Options options;
    options.bootstrap = broker_of(d).bootstrap;
    options.topic = prefix_ + ".ids";
    options.group_id = options.topic + ".consumers";
    options.streams = {{"order", modes[0]}, {"order", modes[1]}};
    auto consumer = BatchConsumer::Create(options);
    ASSERT_TRUE(consumer) << consumer.error().message;
    consumers[d] = std::move(*consumer);
  }
  std::cout << "[ datacenter ] a producer and a consumer in each datacenter after "
            << SecondsSince(began_) << " s\n";

  std::array<std::array<std::vector<int64_t>, 2>, 2> taken;  // [datacenter][mode]
  auto done = [&] {
    for (const auto& by_mode : taken) {
      for (const auto& ids : by_mode) {
        if (ids.size() < kEach) return false;
      }
    }
    return true;
  };
  for (const auto deadline = SteadyClock::now() + seconds(90);
       !done() && SteadyClock::now() < deadline;) {
    for (int d : {0, 1}) {
      for (size_t m = 0; m < modes.size(); ++m) {
        if (taken[d][m].size() >= kEach) continue;
        auto ids = consumers[d]->Take("order", modes[m], kBatch, milliseconds(100));
        if (ids) taken[d][m].insert(taken[d][m].end(), ids->begin(), ids->end());
      }
    }
  }
  for (int d : {0, 1}) {
    std::cout << "[ datacenter ] datacenter " << d << " took " << taken[d][0].size()
              << " segment and " << taken[d][1].size() << " snowflake IDs\n";
    EXPECT_EQ(consumers[d]->stats().malformed_batches, 0) << "datacenter " << d;
  }
  ASSERT_TRUE(done()) << consumers[0]->stats().last_error << " / "
                      << consumers[1]->stats().last_error;
  for (int d : {0, 1}) consumers[d]->Close();

  // Each ID taken once over both datacenters, from its datacenter's residue class or worker
  // ids, and published there. Counted, with the first few shown.
  std::array<std::map<int64_t, int>, 2> taken_by;  // per mode: ID -> datacenter
  int twice = 0, foreign = 0, unpublished = 0;
  for (int d : {0, 1}) {
    for (size_t m = 0; m < modes.size(); ++m) {
      for (int64_t id : taken[d][m]) {
        const auto [it, fresh] = taken_by[m].emplace(id, d);
        if (!fresh && ++twice <= 5) {
          ADD_FAILURE() << ModeName(modes[m]) << " ID " << id << " taken by datacenter "
                        << it->second << " and " << d;
        }
        const int64_t of = m == 0 ? id % 2 : e2e::SplitDefaultSnowflake(id).worker_id / 512;
        if (of != d && ++foreign <= 5) {
          ADD_FAILURE() << ModeName(modes[m]) << " ID " << id << " of datacenter " << of
                        << " taken in datacenter " << d;
        }
        if (!published[d][m].contains(id) && ++unpublished <= 5) {
          ADD_FAILURE() << ModeName(modes[m]) << " ID " << id << " never published in datacenter "
                        << d;
        }
      }
    }
  }
  EXPECT_EQ(twice, 0);
  EXPECT_EQ(foreign, 0);
  EXPECT_EQ(unpublished, 0);
  EXPECT_GE(taken_by[0].size() + taken_by[1].size(), 4 * kEach);
  std::cout << "[ datacenter ] " << taken_by[0].size() + taken_by[1].size()
            << " distinct IDs taken (" << taken_by[0].size() << " segment, " << taken_by[1].size()
            << " snowflake): " << twice << " twice, " << foreign << " of the other datacenter, "
            << unpublished << " unpublished; done after " << SecondsSince(began_) << " s\n";
}

}  // namespace
}  // namespace kleaf::integration
