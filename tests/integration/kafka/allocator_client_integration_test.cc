// The gateway's side of request/reply (cluster::KafkaAllocatorClient, in this process) against a
// real `kleaf allocator` process: its idempotent request producer fails for good while requests
// are in flight (librdkafka's fatal error, as an out-of-order sequence after a disconnect would
// raise), is replaced by itself, and the client keeps getting segments and renewing its worker
// lease, each segment unique. And the allocator's side, in this process too: the transactional
// producer of a partition a running AllocatorNode serves fails for good; the node releases the
// partition and takes it over again with a new producer, by itself, and no segment is handed out
// twice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/await.h"
#include "base/clock.h"
#include "cluster/allocator_client.h"
#include "cluster/allocator_node.h"
#include "state/store.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Asks `allocator` for `n` segments of `tag` at once; each call's outcome comes in its own.
std::vector<PendingCall<allocator::Segment>> AllocateSegments(allocator::Allocator& allocator,
                                                              const std::string& tag, int n) {
  std::vector<PendingCall<allocator::Segment>> calls(static_cast<size_t>(n));
  for (auto& call : calls) allocator.AllocateSegment(tag, 0, call.Callback());
  return calls;
}

// Creates `tag` (or sets its step) with a step of 10, through `allocator`.
Result<state::TagRecord> PutStepOf10(allocator::Allocator& allocator, const std::string& tag,
                                     milliseconds bound) {
  return Await<state::TagRecord>(bound, "no answer", [&](auto done) {
    allocator.Run(
        allocator::op::PutTag{tag,
                              allocator::TagUpdate{.step = 10, .max_id = {}, .description = {}}},
        done);
  });
}

// Allocates `n` segments of `tag` at once and waits for them all; the first failure if any.
Result<std::vector<allocator::Segment>> AllocateAll(allocator::Allocator& allocator,
                                                    const std::string& tag, int n,
                                                    milliseconds bound) {
  std::vector<allocator::Segment> segments;
  for (auto& call : AllocateSegments(allocator, tag, n)) {
    auto s = call.WaitFor(bound);
    if (!s) return std::unexpected(s.error());
    segments.push_back(*s);
  }
  return segments;
}

// Sorted by start, each segment ends before the next begins; the number of overlaps (each one
// reported as a failure).
int Overlaps(std::vector<allocator::Segment> segments) {
  std::sort(segments.begin(), segments.end(), [](auto& a, auto& b) { return a.start < b.start; });
  int overlaps = 0;
  for (size_t i = 1; i < segments.size(); ++i) {
    if (segments[i].start < segments[i - 1].end) {
      ++overlaps;
      ADD_FAILURE() << "segments [" << segments[i - 1].start << ", " << segments[i - 1].end
                    << ") and [" << segments[i].start << ", " << segments[i].end << ") overlap";
    }
  }
  return overlaps;
}

// A gateway's client in this process, for the cluster whose topics are `topics`, reading its
// replies from `reply_partition`.
cluster::KafkaClientOptions InProcessClientOptions(const kafka::Properties& props,
                                                   const cluster::ClusterTopics& topics,
                                                   int32_t reply_partition) {
  cluster::KafkaClientOptions options;
  options.props = props;
  options.topics = topics;
  options.node_id = "gw-in-process";
  options.reply_partition = reply_partition;
  return options;
}

// How long one call of such a client may take: every attempt, plus a margin.
milliseconds CallBound(const cluster::KafkaClientOptions& options) {
  return options.request_timeout * options.attempts + seconds(4);
}

// The fresh topics of a 4-partition cluster that only this test's in-process allocators serve,
// with steps of 10.
struct InProcessCluster {
  std::string prefix;
  kafka::Properties props;
  cluster::ClusterTopics topics;

  cluster::AllocatorNodeOptions NodeOptions(const std::string& group) const {
    cluster::AllocatorNodeOptions options;
    options.props = props;
    options.topics = topics;
    options.rules.max_step = 10;
    options.rules.default_step = 10;
    options.group_id = prefix + "." + group;
    return options;
  }
};

Result<InProcessCluster> MakeInProcessCluster(const std::string& bootstrap,
                                              const std::string& name) {
  InProcessCluster cluster;
  cluster.prefix = "kleaf-it-" + name + "-" + std::to_string(::getpid()) + "-" +
                   std::to_string(SteadyClock::now().time_since_epoch().count());
  cluster.props = {{"bootstrap.servers", bootstrap}};
  cluster.topics = cluster::ClusterTopics::For(cluster.prefix, 4, 4);
  if (auto ensured = cluster::EnsureClusterTopics(cluster.props, cluster.topics, 1, seconds(30));
      !ensured) {
    return std::unexpected(ensured.error());
  }
  return cluster;
}

// Whether `node` joined its group and serves all 4 partitions within 60 s.
bool ServesAllWithinAMinute(cluster::AllocatorNode& node) {
  return WaitUntil(
      [&] {
        auto s = node.status();
        return s.member && s.pending == 0 && s.serving.size() == 4;
      },
      seconds(60));
}

class AllocatorClientIntegrationTest : public KafkaTest {};

TEST_F(AllocatorClientIntegrationTest, AFatalRequestProducerErrorIsRepairedAndRequestsGoOn) {
  Cluster cluster(broker_, "client-fatal",
                  {{"segment.max_step", "10"}, {"segment.default_step", "10"}});
  Node& alloc = cluster.AddAllocator("alloc-1");
  auto started = cluster.Start({&alloc});
  ASSERT_TRUE(started) << started.error();
  auto balanced = cluster.WaitBalanced({&alloc}, seconds(60));
  ASSERT_TRUE(balanced) << balanced.error();

  Clock& clock = SystemClock::Instance();
  const auto options =
      InProcessClientOptions({{"bootstrap.servers", broker_.bootstrap}},
                             cluster::ClusterTopics::For(cluster.prefix(), Cluster::kPartitions,
                                                         Cluster::kReplyPartitions),
                             Cluster::kReplyPartitions - 1);  // no gateway process reads it
  const auto call_bound = CallBound(options);
  auto client = cluster::KafkaAllocatorClient::Start(options, clock);
  ASSERT_TRUE(client) << client.error().message;
  auto& c = **client;

  const std::string tag = "fatal-producer";
  {
    auto r = PutStepOf10(c, tag, call_bound);
    ASSERT_TRUE(r) << r.error().message;
  }
  const allocator::Claimant me{
      .node_id = options.node_id, .holder = "holder-1", .previous_holder = {}};
  int64_t worker_id = -1, lease_until = 0;
  {
    auto r = Await<allocator::WorkerLeaseInfo>(call_bound, "no answer", [&](auto done) {
      c.ClaimWorker({.claimant = me, .node_now_ms = clock.NowMs()}, done);
    });
    ASSERT_TRUE(r) << r.error().message;
    worker_id = r->worker_id;
    lease_until = r->lease_until_ms;
  }
  auto allocate = [&](int n) { return AllocateSegments(c, tag, n); };
  auto first = AllocateAll(c, tag, 3, call_bound);
  ASSERT_TRUE(first) << first.error().message;
  std::vector<allocator::Segment> segments = std::move(*first);
  const int64_t end_before =
      std::max_element(segments.begin(), segments.end(), [](auto& a, auto& b) {
        return a.end < b.end;
      })->end;

  // Requests in flight when the producer fails: some of them are lost with the old handle (their
  // attempt times out and is sent again through the new one), none may be lost for good.
  auto in_flight = allocate(5);
  PendingCall<allocator::WorkerLeaseInfo> renew_in_flight;
  c.RenewWorker({.claimant = me,
                 .worker_id = worker_id,
                 .node_now_ms = 0,
                 .last_timestamp_ms = clock.NowMs()},
                renew_in_flight.Callback());
  const auto injected = SteadyClock::now();
  c.InjectProducerFatalErrorForTesting();
  ASSERT_TRUE(WaitUntil([&] { return c.producer_rebuilds() == 1; }, seconds(5)))
      << "the request producer was not replaced within 5 s of its fatal error";
  const double rebuilt_s = SecondsSince(injected);
  double slowest = 0;
  int in_flight_ok = 0;
  for (auto& call : in_flight) {
    auto s = call.WaitFor(call_bound);
    slowest = std::max(slowest, SecondsSince(injected));
    ASSERT_TRUE(s) << "a request in flight at the fatal error failed: " << s.error().message;
    segments.push_back(*s);
    ++in_flight_ok;
  }
  {
    auto r = renew_in_flight.WaitFor(call_bound);
    ASSERT_TRUE(r) << "the lease renewal in flight at the fatal error failed: "
                   << r.error().message;
    EXPECT_GE(r->lease_until_ms, lease_until);
    lease_until = r->lease_until_ms;
  }
  const double in_flight_s = SecondsSince(injected);

  // After the rebuild: new requests answered at once (no attempt lost), lease renewed again.
  const auto after_start = SteadyClock::now();
  for (auto& call : allocate(5)) {
    auto s = call.WaitFor(call_bound);
    ASSERT_TRUE(s) << "no segment after the rebuild: " << s.error().message;
    EXPECT_GE(s->start, end_before);
    segments.push_back(*s);
  }
  {
    auto r = Await<allocator::WorkerLeaseInfo>(call_bound, "no answer", [&](auto done) {
      c.RenewWorker({.claimant = me,
                     .worker_id = worker_id,
                     .node_now_ms = 0,
                     .last_timestamp_ms = clock.NowMs()},
                    done);
    });
    ASSERT_TRUE(r) << "no lease renewal after the rebuild: " << r.error().message;
    EXPECT_EQ(r->worker_id, worker_id);
    EXPECT_GE(r->lease_until_ms, lease_until);
  }
  const double after_s = SecondsSince(after_start);
  EXPECT_EQ(c.producer_rebuilds(), 1);

  // Every segment its own range.
  const int overlaps = Overlaps(segments);
  std::cout << "fatal request producer: replaced " << rebuilt_s << " s after the error; "
            << in_flight_ok
            << " segment requests and a lease renewal in flight all answered within " << in_flight_s
            << " s (slowest segment " << slowest << " s; bound " << call_bound.count()
            << " ms); 5 segments and a renewal after the rebuild in " << after_s << " s; "
            << segments.size() << " segments, " << overlaps << " overlapping" << std::endl;
  EXPECT_LT(after_s, 5.0) << "requests after the rebuild were retried: the new producer lost them";
  c.Stop();
}

// A partition's transactional producer fails for good under a running allocator (librdkafka's
// fatal error; cluster/allocator_node.cc: the next batch's begin or send sees it) with requests in
// flight: the node releases the partition and takes it over again with a new producer (whose
// init_transactions fences the broken one), within the bound below, re-reads the requests of the
// failed batch, and every request is answered, no segment twice.
TEST_F(AllocatorClientIntegrationTest, AFatalTxnProducerErrorIsRepairedByATakeOver) {
  e2e::TempDir dir;
  auto cluster = MakeInProcessCluster(broker_.bootstrap, "txn-fatal");
  ASSERT_TRUE(cluster) << cluster.error().message;
  const auto& topics = cluster->topics;
  auto store = state::Store::Open((dir.path() / "state").string());
  ASSERT_TRUE(store) << store.error().message;

  Clock& clock = SystemClock::Instance();
  cluster::AllocatorNode node(cluster->NodeOptions("allocators"), **store, clock);
  ASSERT_TRUE(node.Start());
  ASSERT_TRUE(ServesAllWithinAMinute(node))
      << "the allocator does not serve the 4 partitions within 60 s";

  const auto options = InProcessClientOptions(cluster->props, topics, 0);
  const auto call_bound = CallBound(options);
  auto client = cluster::KafkaAllocatorClient::Start(options, clock);
  ASSERT_TRUE(client) << client.error().message;
  auto& c = **client;

  const std::string tag = "fatal-txn";
  const int32_t p = topics.PartitionOf(tag);
  {
    auto r = PutStepOf10(c, tag, call_bound);
    ASSERT_TRUE(r) << r.error().message;
  }
  auto allocate = [&](int n) { return AllocateSegments(c, tag, n); };
  auto first = AllocateAll(c, tag, 3, call_bound);
  ASSERT_TRUE(first) << first.error().message;
  std::vector<allocator::Segment> segments = std::move(*first);
  int64_t end_before = 0;
  for (const auto& s : segments) end_before = std::max(end_before, s.end);

  const int64_t takeovers_before = node.status().takeovers;
  const auto injected = SteadyClock::now();
  node.InjectFatalErrorForTesting(p);
  // Requests right behind the failure: the batch that finds the producer broken is re-read after
  // the takeover (or its attempts time out and are sent again).
  auto in_flight = allocate(5);
  // The partition is released and served again by a new producer.
  constexpr double kRebuildBoundS = 15;  // 1 s retry delay, init_transactions, restore, load
  bool released = false;
  // The loop thread applies the injection at its next turn, possibly after it served the
  // requests above: one more request every 500 ms makes sure a batch meets the broken producer.
  std::deque<PendingCall<allocator::Segment>> more;
  auto last_sent = SteadyClock::now();
  const bool back = WaitUntil(
      [&] {
        if (SteadyClock::now() - last_sent > milliseconds(500)) {
          more.emplace_back();
          c.AllocateSegment(tag, 0, more.back().Callback());
          last_sent = SteadyClock::now();
        }
        auto s = node.status();
        const bool serving_p = std::find(s.serving.begin(), s.serving.end(), p) != s.serving.end();
        released = released || !serving_p;
        return s.takeovers > takeovers_before && serving_p;
      },
      milliseconds(static_cast<int64_t>(kRebuildBoundS * 1000)));
  const double rebuilt_s = SecondsSince(injected);
  ASSERT_TRUE(back) << "partition " << p << " not taken over again within " << kRebuildBoundS
                    << " s of its producer's fatal error (takeovers " << node.status().takeovers
                    << ", before " << takeovers_before << ")";
  EXPECT_EQ(node.status().takeovers, takeovers_before + 1);
  int answered = 0;
  for (auto& call : in_flight) {
    auto s = call.WaitFor(call_bound);
    ASSERT_TRUE(s) << "a request in flight at the fatal error failed: " << s.error().message;
    EXPECT_GE(s->start, end_before);
    segments.push_back(*s);
    ++answered;
  }
  for (auto& call : more) {
    auto s = call.WaitFor(call_bound);
    ASSERT_TRUE(s) << "a request sent during the takeover failed: " << s.error().message;
    EXPECT_GE(s->start, end_before);
    segments.push_back(*s);
    ++answered;
  }
  const double answered_s = SecondsSince(injected);
  for (auto& call : allocate(5)) {
    auto s = call.WaitFor(call_bound);
    ASSERT_TRUE(s) << "no segment after the takeover: " << s.error().message;
    EXPECT_GE(s->start, end_before);
    segments.push_back(*s);
  }
  const int overlaps = Overlaps(segments);
  std::cout << "fatal txn producer: partition " << p << (released ? " released and" : "")
            << " taken over again " << rebuilt_s << " s after the error (bound " << kRebuildBoundS
            << " s); " << answered
            << " requests sent before the takeover completed, all answered within " << answered_s
            << " s; " << segments.size() << " segments, " << overlaps << " overlapping"
            << std::endl;
  EXPECT_EQ(overlaps, 0);
  c.Stop();
  node.Stop();
}

// Where a takeover resumes reading requests: right after the last committed batch, as that batch
// recorded it in the state topic (cluster/allocator_node.cc, ProduceBatch), not as the group's
// committed offset says. The second allocator belongs to another group (its committed offsets are
// none: as after offsets.retention.minutes expired them) and has an empty store: it must resume
// where the first one stopped. Resuming earlier would run the tag's PUT and allocations again
// (their replies nobody waits for: each a gap); so the next segment starts exactly where the last
// one before ended.
TEST_F(AllocatorClientIntegrationTest, ATakeOverResumesRightAfterTheLastCommittedBatch) {
  e2e::TempDir dir;
  auto cluster = MakeInProcessCluster(broker_.bootstrap, "resume");
  ASSERT_TRUE(cluster) << cluster.error().message;
  Clock& clock = SystemClock::Instance();

  const auto options = InProcessClientOptions(cluster->props, cluster->topics, 0);
  const auto call_bound = CallBound(options);
  auto client = cluster::KafkaAllocatorClient::Start(options, clock);
  ASSERT_TRUE(client) << client.error().message;
  auto& c = **client;
  const std::string tag = "resume";

  int64_t end_before = 0;
  int batches = 0;
  {
    auto store = state::Store::Open((dir.path() / "first").string());
    ASSERT_TRUE(store) << store.error().message;
    cluster::AllocatorNode first(cluster->NodeOptions("first"), **store, clock);
    ASSERT_TRUE(first.Start());
    ASSERT_TRUE(ServesAllWithinAMinute(first))
        << "the first allocator does not serve 4 partitions in 60 s";
    auto r = PutStepOf10(c, tag, call_bound);
    ASSERT_TRUE(r) << r.error().message;
    // Several batches: some requests at once, some one after another.
    for (int round = 0; round < 5; ++round) {
      for (auto& call : AllocateSegments(c, tag, round + 1)) {
        auto s = call.WaitFor(call_bound);
        ASSERT_TRUE(s) << s.error().message;
        EXPECT_EQ(s->end - s->start, 10);
        end_before = std::max(end_before, s->end);
        ++batches;
      }
    }
    first.Stop();
  }

  auto store = state::Store::Open((dir.path() / "second").string());
  ASSERT_TRUE(store) << store.error().message;
  cluster::AllocatorNode second(cluster->NodeOptions("second"), **store, clock);
  ASSERT_TRUE(second.Start());
  ASSERT_TRUE(ServesAllWithinAMinute(second))
      << "the second allocator does not serve 4 partitions in 60 s";
  auto s = Await<allocator::Segment>(call_bound, "no answer",
                                     [&](auto done) { c.AllocateSegment(tag, 0, done); });
  ASSERT_TRUE(s) << s.error().message;
  std::cout << "resume: " << batches << " segments up to " << end_before
            << " from the first allocator; the second one's first segment starts at " << s->start
            << std::endl;
  EXPECT_EQ(s->start, end_before)
      << "the second allocator ran requests the first one had answered (or skipped some)";
  c.Stop();
  second.Stop();
}

}  // namespace
}  // namespace kleaf::integration
