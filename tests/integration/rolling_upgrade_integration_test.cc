// A rolling restart (issue 29, item 5), done as docs/operations.md ("Upgrading") says: every node
// of a running cluster (two allocators, two gateways, the producer) stopped with SIGTERM and
// started again, one at a time, allocators first, then gateways, then the producer, each step
// waiting for the checks the section names before the next. Meanwhile clients whose `HttpClient`
// lists both gateways draw segment IDs of three tags, snowflake IDs and sequence values without a
// pause, and a BatchConsumer takes IDs of the producer's streams. Not one client call may fail, no
// ID may be handed out twice (across clients, gateways and the stream), and each key's sequence
// values must go up.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kleaf/batch_consumer.h"
#include "kleaf/http_client.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"
#include "tests/integration/producer/producer_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> kSegmentTags = {"roll-a", "roll-b", "roll-c"};
constexpr char kSnowflakeTag[] = "roll-sf";
constexpr char kSpace[] = "roll";
constexpr int kClients = 4;
constexpr uint64_t kKeysPerClient = 8;  // each client owns its keys: its values of one must rise
// The producer's streams: a segment stream of a tag the clients draw too (one ID space for both
// paths) and a snowflake stream (its worker id beside the gateways').
constexpr char kStreamTag[] = "roll-a";
constexpr int64_t kOpsPerStep = 300;  // client calls that must complete after every step
// A stopped allocator leaves the group, so the other one serves its partitions well before the
// session timeout (kafka.session_timeout_ms, 6 s in Cluster::Config) would have moved them: 0.5 to
// 1.3 s measured. An exit without the leave (as after `kill -9`) took 6.3 to 6.7 s; the clients'
// calls still succeed then (10 s per call), so this bound is what tells a handover from an expiry.
constexpr milliseconds kHandover{5000};

// What the clients received, and every call that failed.
struct Drawn {
  std::map<std::string, std::vector<int64_t>> segments;  // per tag
  std::vector<int64_t> snowflakes;
  std::map<uint64_t, std::vector<uint64_t>> seqs;  // per key, in the order received
  std::vector<std::string> failures;               // the first few, with when and what
  int64_t failed = 0;
};

// kClients threads, each with its own HttpClient over both gateways, calling in turn: segment IDs
// (one, then five) of each tag, snowflake IDs, the next value of one of its keys.
class Clients {
 public:
  explicit Clients(std::vector<GatewayAddress> gateways) : start_(SteadyClock::now()) {
    for (int i = 0; i < kClients; ++i) {
      HttpClient::Options options;
      options.gateways = gateways;  // the defaults otherwise: 2 s per attempt, 10 s per call
      auto client = HttpClient::Create(options);
      EXPECT_TRUE(client) << client.error().message;
      if (!client) return;
      clients_.push_back(std::move(*client));
    }
    for (int i = 0; i < kClients; ++i) threads_.emplace_back([this, i] { Run(i); });
  }
  ~Clients() { Stop(); }

  int64_t completed() const { return completed_.load(); }
  int64_t failed() const { return failed_.load(); }
  bool WaitForMore(int64_t n, milliseconds timeout) const {
    const int64_t base = completed();
    return WaitUntil([&] { return completed() - base >= n; }, timeout);
  }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // After Stop().
  Drawn Result() const {
    Drawn all;
    for (const Drawn& d : drawn_) {
      for (const auto& [tag, ids] : d.segments) {
        auto& to = all.segments[tag];
        to.insert(to.end(), ids.begin(), ids.end());
      }
      all.snowflakes.insert(all.snowflakes.end(), d.snowflakes.begin(), d.snowflakes.end());
      for (const auto& [key, values] : d.seqs) all.seqs[key] = values;
      all.failed += d.failed;
      for (const auto& f : d.failures) {
        if (all.failures.size() < 20) all.failures.push_back(f);
      }
    }
    return all;
  }
  // The longest call of each kind ("segment", "snowflake", "seq"), in ms; after Stop().
  std::map<std::string, int64_t> LongestCalls() const {
    std::map<std::string, int64_t> out;
    for (const auto& longest : longest_) {
      for (const auto& [kind, ms] : longest) out[kind] = std::max(out[kind], ms);
    }
    return out;
  }
  int64_t failovers() const {
    int64_t n = 0;
    for (const auto& c : clients_) n += c->stats().failovers;
    return n;
  }

 private:
  void Run(int index) {
    HttpClient& client = *clients_[static_cast<size_t>(index)];
    Drawn& mine = drawn_[static_cast<size_t>(index)];
    auto& longest = longest_[static_cast<size_t>(index)];
    auto fail = [&](const std::string& call, const ClientError& e) {
      ++mine.failed;
      failed_.fetch_add(1);
      if (mine.failures.size() < 5) {
        mine.failures.push_back("client " + std::to_string(index) + " at " +
                                std::to_string(SecondsSince(start_)) + " s: " + call + ": " +
                                e.message);
      }
    };
    for (uint64_t i = 0;; ++i) {
      {
        // Paces the load (about 100 calls a second per client), not a synchronisation.
        std::unique_lock lock(mu_);
        if (stop_cv_.wait_for(lock, milliseconds(2), [&] { return stop_; })) return;
      }
      const uint64_t kind = i % 4;
      const auto call_start = SteadyClock::now();
      auto took = [&](const std::string& what) {
        const auto ms = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - call_start);
        longest[what] = std::max(longest[what], static_cast<int64_t>(ms.count()));
      };
      if (kind <= 1) {
        const std::string& tag = kSegmentTags[(i / 4) % kSegmentTags.size()];
        const int64_t count = kind == 0 ? 1 : 5;
        auto ids = client.Segments(tag, count);
        took("segment");
        if (!ids) {
          fail("segment " + tag, ids.error());
          continue;
        }
        auto& to = mine.segments[tag];
        to.insert(to.end(), ids->begin(), ids->end());
      } else if (kind == 2) {
        auto ids = client.Snowflakes(kSnowflakeTag, 3);
        took("snowflake");
        if (!ids) {
          fail("snowflake", ids.error());
          continue;
        }
        mine.snowflakes.insert(mine.snowflakes.end(), ids->begin(), ids->end());
      } else {
        const uint64_t key =
            static_cast<uint64_t>(index) * kKeysPerClient + (i / 4) % kKeysPerClient;
        auto value = client.NextSeq(kSpace, key);
        took("seq");
        if (!value) {
          fail("seq key " + std::to_string(key), value.error());
          continue;
        }
        mine.seqs[key].push_back(*value);
      }
      completed_.fetch_add(1);
    }
  }

  const SteadyClock::time_point start_;
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::array<Drawn, kClients> drawn_;                             // one per thread
  std::array<std::map<std::string, int64_t>, kClients> longest_;  // one per thread
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

// A BatchConsumer of the producer's two streams taking IDs of each in turn until stopped.
class StreamConsumer {
 public:
  explicit StreamConsumer(BatchConsumer::Options options) {
    auto c = BatchConsumer::Create(std::move(options));
    EXPECT_TRUE(c) << c.error().message;
    if (!c) return;
    consumer_ = std::move(*c);
    thread_ = std::thread([this] { Run(); });
  }
  ~StreamConsumer() { Stop(); }
  int64_t taken() const { return taken_.load(); }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (consumer_) consumer_->Close();
  }
  // After Stop().
  const std::vector<int64_t>& segments() const { return segments_; }
  const std::vector<int64_t>& snowflakes() const { return snowflakes_; }

 private:
  void Run() {
    for (uint64_t i = 0;; ++i) {
      {
        // Paces the consumer (a few thousand IDs a second at most), not a synchronisation.
        std::unique_lock lock(mu_);
        if (stop_cv_.wait_for(lock, milliseconds(5), [&] { return stop_; })) return;
      }
      const bool segment = i % 2 == 0;
      const auto mode = segment ? IdBatch::Mode::kSegment : IdBatch::Mode::kSnowflake;
      // Take waits for a batch for at most 100 ms: the loop sees a Stop() that soon.
      auto ids = consumer_->Take(kStreamTag, mode, 10, milliseconds(100));
      if (!ids) continue;  // nothing ahead right now (the producer restarting)
      auto& to = segment ? segments_ : snowflakes_;
      to.insert(to.end(), ids->begin(), ids->end());
      taken_.fetch_add(static_cast<int64_t>(ids->size()));
    }
  }

  std::unique_ptr<BatchConsumer> consumer_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::atomic<int64_t> taken_{0};
  std::vector<int64_t> segments_;
  std::vector<int64_t> snowflakes_;
  std::thread thread_;
};

// GET /readyz of 127.0.0.1:port answered 200.
bool Ready(uint16_t port) {
  e2e::HttpClient http(port, seconds(2));
  auto reply = http.Get("/readyz");
  return reply && reply->status == 200;
}

// The port of "…; http://127.0.0.1:PORT" in a ready line.
uint16_t PortOfReadyLine(const std::string& out) {
  const auto at = out.rfind(':');
  if (at == std::string::npos) return 0;
  return static_cast<uint16_t>(std::stoi(out.substr(at + 1)));
}

std::string Dups(const std::vector<int64_t>& ids) {
  const Duplicates d = FindDuplicates(ids);
  std::string out = std::to_string(d.count);
  for (int64_t id : d.examples) out += " " + std::to_string(id);
  return out;
}

class RollingUpgradeIntegrationTest : public KafkaTest {};

TEST_F(RollingUpgradeIntegrationTest, RestartingEveryNodeInTurnFailsNoCallAndRepeatsNoId) {
  const auto test_start = SteadyClock::now();
  Cluster cluster(broker_, "roll");
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  std::vector<Node*> allocators = nodes->allocators;
  std::vector<Node*> gateways = nodes->gateways;
  // Clients list gateways by address: a gateway keeps its port across its restart.
  for (Node* gw : gateways) {
    cluster.Reconfigure(*gw, {{"http.listen", "127.0.0.1:" + std::to_string(gw->port)}});
  }
  for (const auto& tag : kSegmentTags) {
    auto put = PutTag(gateways[0]->port, tag, R"({"step":1000})");
    ASSERT_TRUE(put) << put.error();
  }
  auto space = AdminCall(gateways[0]->port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                         R"({"section_size":4,"step":10})");
  ASSERT_TRUE(space) << space.error();

  // The producer with its own operator port, so that its /readyz can be checked.
  e2e::TestConfig producer_config =
      cluster.Config("prod-1", cluster.dir() / "prod-1-state")
          .Set("http.listen", "127.0.0.1:0")
          .Set("producer.batches_ahead", "2")
          .Set("producer.check_interval_ms", "100")
          .Set("producer.streams", std::string("[{tag: ") + kStreamTag +
                                       ", mode: segment, batch_size: 50}, {tag: " + kStreamTag +
                                       ", mode: snowflake, batch_size: 50}]");
  ProducerNode producer(cluster, "prod-1", producer_config);
  auto started = producer.Start();
  ASSERT_TRUE(started) << started.error();
  const uint16_t producer_port = PortOfReadyLine(producer.process().Stdout());
  ASSERT_NE(producer_port, 0) << producer.process().Stdout();

  const std::string ids_topic = cluster.prefix() + ".ids";
  BatchConsumer::Options consumer_options;
  consumer_options.bootstrap = broker_.bootstrap;
  consumer_options.topic = ids_topic;
  consumer_options.group_id = ids_topic + ".consumers";
  consumer_options.streams = {{kStreamTag, IdBatch::Mode::kSegment},
                              {kStreamTag, IdBatch::Mode::kSnowflake}};
  StreamConsumer stream(consumer_options);

  std::vector<GatewayAddress> addresses;
  for (const Node* gw : gateways) addresses.push_back({"127.0.0.1", gw->port});
  Clients clients(addresses);
  ASSERT_TRUE(clients.WaitForMore(kOpsPerStep, seconds(30)))
      << "no load: " << clients.completed() << " completed, " << clients.failed() << " failed";
  ASSERT_TRUE(WaitUntil([&] { return stream.taken() > 0; }, seconds(30)))
      << "the consumer took nothing of the producer's streams\n"
      << producer.Logs();
  std::cout << "load running after " << SecondsSince(test_start) << " s" << std::endl;

  auto sigterm = [&](Node& node) {
    const auto at = SteadyClock::now();
    const e2e::ExitStatus status = Stop(node, seconds(30));
    EXPECT_TRUE(status.exited && status.code == 0) << node.name << ": " << status.ToString() << "\n"
                                                   << LastLines(node.Log(), 40);
    std::cout << node.name << " stopped (SIGTERM) in " << SecondsSince(at) << " s" << std::endl;
  };

  // 1. Allocators, one at a time. The other one serves every partition before the stopped one
  //    starts again; then its /readyz is 200 and the two share the partitions.
  for (Node* a : allocators) {
    const auto step = SteadyClock::now();
    Node* other = a == allocators[0] ? allocators[1] : allocators[0];
    sigterm(*a);
    std::set<int32_t> served;
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto s = ServedPartitions(*other);
          if (s) served = *s;
          return s && served.size() == static_cast<size_t>(Cluster::kPartitions);
        },
        kHandover))
        << other->name << " serves " << served.size() << " partitions " << kHandover.count()
        << " ms after " << a->name << "'s SIGTERM: did it leave the group?";
    std::cout << other->name << " serves every partition " << SecondsSince(step) << " s after "
              << a->name << "'s SIGTERM" << std::endl;
    auto up = StartNode(*a);
    ASSERT_TRUE(up) << up.error();
    ASSERT_TRUE(WaitUntil([&] { return Ready(a->port); }, seconds(30)))
        << a->name << " not ready after its restart";
    auto balanced = cluster.WaitBalanced(allocators, seconds(30));
    ASSERT_TRUE(balanced) << balanced.error();
    for (Node* gw : gateways) {
      ASSERT_TRUE(WaitUntil([&] { return Ready(gw->port); }, seconds(30))) << gw->name;
    }
    ASSERT_TRUE(clients.WaitForMore(kOpsPerStep, seconds(30))) << "no load after " << a->name;
    std::cout << a->name << " restarted, partitions shared again, in " << SecondsSince(step)
              << " s; " << clients.completed() << " calls, " << clients.failed() << " failed"
              << std::endl;
  }

  // 2. Gateways, one at a time: clients go to the other one meanwhile.
  for (Node* gw : gateways) {
    const auto step = SteadyClock::now();
    const uint16_t port = gw->port;
    sigterm(*gw);
    auto up = StartNode(*gw);
    ASSERT_TRUE(up) << up.error();
    ASSERT_EQ(gw->port, port);
    ASSERT_TRUE(WaitUntil([&] { return Ready(gw->port); }, seconds(30)))
        << gw->name << " not ready after its restart";
    ASSERT_TRUE(clients.WaitForMore(kOpsPerStep, seconds(30))) << "no load after " << gw->name;
    std::cout << gw->name << " restarted and ready in " << SecondsSince(step) << " s; "
              << clients.completed() << " calls, " << clients.failed() << " failed" << std::endl;
  }

  // 3. The producer; the consumer goes on with the batches ahead, then with the new run's.
  {
    const auto step = SteadyClock::now();
    EXPECT_TRUE(producer.Stop()) << producer.Logs();
    std::cout << "producer stopped (SIGTERM) in " << SecondsSince(step) << " s" << std::endl;
    auto again = producer.Start();
    ASSERT_TRUE(again) << again.error();
    const uint16_t port = PortOfReadyLine(producer.process().Stdout());
    ASSERT_TRUE(WaitUntil([&] { return Ready(port); }, seconds(30)))
        << "producer not ready after its restart";
    const int64_t taken = stream.taken();
    ASSERT_TRUE(WaitUntil([&] { return stream.taken() > taken + 200; }, seconds(30)))
        << "the consumer took nothing after the producer's restart";
    std::cout << "producer restarted and ready in " << SecondsSince(step) << " s" << std::endl;
  }
  ASSERT_TRUE(clients.WaitForMore(kOpsPerStep, seconds(30))) << "no load at the end";

  clients.Stop();
  stream.Stop();
  const Drawn drawn = clients.Result();
  int64_t segment_ids = 0;
  for (const auto& [tag, ids] : drawn.segments) segment_ids += static_cast<int64_t>(ids.size());
  int64_t seq_values = 0;
  for (const auto& [key, values] : drawn.seqs) seq_values += static_cast<int64_t>(values.size());
  std::cout << "rolling restart done in " << SecondsSince(test_start)
            << " s: " << clients.completed() << " calls (" << segment_ids << " segment IDs, "
            << drawn.snowflakes.size() << " snowflake IDs, " << seq_values << " sequence values), "
            << drawn.failed << " failed, " << clients.failovers()
            << " failovers; the consumer took " << stream.segments().size() << " segment and "
            << stream.snowflakes().size() << " snowflake IDs of the streams; longest call:";
  for (const auto& [kind, ms] : clients.LongestCalls())
    std::cout << " " << kind << " " << ms << " ms";
  std::cout << std::endl;

  EXPECT_EQ(drawn.failed, 0);
  for (const auto& f : drawn.failures) ADD_FAILURE() << "failed call: " << f;

  // No ID twice: per segment tag, the stream's IDs of kStreamTag with the clients' ones; every
  // snowflake ID of the gateways and of the stream together.
  for (const auto& tag : kSegmentTags) {
    std::vector<int64_t> ids =
        drawn.segments.contains(tag) ? drawn.segments.at(tag) : std::vector<int64_t>{};
    EXPECT_FALSE(ids.empty()) << tag;
    if (tag == kStreamTag)
      ids.insert(ids.end(), stream.segments().begin(), stream.segments().end());
    EXPECT_EQ(FindDuplicates(ids).count, 0) << tag << " IDs twice: " << Dups(ids);
  }
  std::vector<int64_t> snowflakes = drawn.snowflakes;
  snowflakes.insert(snowflakes.end(), stream.snowflakes().begin(), stream.snowflakes().end());
  EXPECT_EQ(FindDuplicates(snowflakes).count, 0) << "snowflake IDs twice: " << Dups(snowflakes);
  EXPECT_FALSE(stream.segments().empty());
  EXPECT_FALSE(stream.snowflakes().empty());

  // Each key's values, in the order its one client received them, strictly increasing.
  EXPECT_EQ(drawn.seqs.size(), kClients * kKeysPerClient);
  for (const auto& [key, values] : drawn.seqs) {
    for (size_t i = 1; i < values.size(); ++i) {
      if (values[i] <= values[i - 1]) {
        ADD_FAILURE() << "key " << key << ": " << values[i] << " after " << values[i - 1];
        break;
      }
    }
  }

  // Every batch either run of the producer committed and the consumer did not claim (a claim
  // deletes its batches: the claim floor; the claimed IDs are in the checks above): none twice, no
  // ID in two of them.
  const auto published = ReadAll(broker_.bootstrap,
                                 StreamTopics(ids_topic, {std::string(kStreamTag) + "/segment",
                                                          std::string(kStreamTag) + "/snowflake"}),
                                 Cluster::kPartitions);
  std::set<std::string> values;
  std::vector<int64_t> published_segments;
  std::vector<int64_t> published_snowflakes;
  for (const auto& b : published) {
    EXPECT_TRUE(values.insert(b.value).second) << "batch published twice: " << b.value;
    if (b.batch.mode == IdBatch::Mode::kSegment) {
      for (int64_t id = b.batch.start; id < b.batch.end; ++id) published_segments.push_back(id);
    } else {
      published_snowflakes.insert(published_snowflakes.end(), b.batch.ids.begin(),
                                  b.batch.ids.end());
    }
  }
  // The clients' IDs of the stream's tag too: both paths take ranges of one tag.
  const std::vector<int64_t> no_ids;
  const auto& client_ids =
      drawn.segments.contains(kStreamTag) ? drawn.segments.at(kStreamTag) : no_ids;
  published_segments.insert(published_segments.end(), client_ids.begin(), client_ids.end());
  EXPECT_EQ(FindDuplicates(published_segments).count, 0) << Dups(published_segments);
  EXPECT_EQ(FindDuplicates(published_snowflakes).count, 0) << Dups(published_snowflakes);
  producer.Stop();
}

}  // namespace
}  // namespace kleaf::integration
