// The broker freezes (SIGSTOP: connections stay open, nothing is answered) under a running
// cluster: every HTTP request still gets its answer within its bound (segments from the buffers,
// then 503s; admin calls 503 after the client's attempts), a gateway and an allocator started
// meanwhile give up within the bound of their startup waits instead of hanging, and once the
// broker thaws the cluster serves again by itself (segments, and snowflake IDs once the worker
// lease is renewed; the late allocator, started again, takes its share of the partitions over
// and restores them).
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/http_client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A gateway's request to the allocators: 3 attempts of 2 s (kafka.request_timeout_ms,
// kafka.request_attempts), plus the answer's way back.
constexpr double kAdminBoundS = 3 * 2.0 + 2.0;
// A segment request with both buffers empty waits segment.wait_ms (100 ms, the default; the
// tests' configs use 3 s) for a fetch, then answers 503: never the allocator round trip's 3 x 2 s.
// The rest of the bound is room for a loaded machine.
constexpr double kSegmentBoundS = 1.5;
// Node startup with no answer from Kafka: the cluster setup's one 30 s deadline (creating the
// topics and checking them and the layout share it: EnsureTopics used to wait 31 s to create and
// 30 s more to check), a gateway's reply partition watermarks (10 s), plus process start-up on a
// loaded machine. Measured: both nodes gave up after 30.1 s.
constexpr double kStartBoundS = 30 + 10 + 10;
constexpr auto kRecoveryDeadline = seconds(60);

class FrozenIntegrationTest : public KafkaTest {};

TEST_F(FrozenIntegrationTest, EveryRequestIsAnsweredInTimeWhileTheBrokerIsFrozenAndAllRecovers) {
  ASSERT_FALSE(broker_.dir.empty()) << "this test freezes the broker: it needs KLEAF_TEST_KAFKA_DIR";
  // Small segments: the buffers run dry during the freeze, so fetches happen and fail.
  Cluster cluster(broker_, "frozen",
                  {{"segment.max_step", "10"}, {"segment.default_step", "10"},
                   {"segment.wait_ms", "100"}});
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw = *nodes->gateways[0];
  const std::string tag = "frozen-seg";
  ASSERT_TRUE(Ok(PutTag(gw.port, tag, R"({"step":10})")));
  // The first segment may take longer than segment.wait_ms (100 ms) on a loaded machine: the
  // gateway then answers 503 until it arrives (seen once with two tests' brokers and nodes on two
  // cores). Served once, before the freeze, is what the rest of the test needs.
  std::string first_error;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto ids = FetchIds(gw.port, tag, 5);
        if (!ids) first_error = ids.error();
        return ids.has_value();
      },
      seconds(30)))
      << "no IDs before the freeze: " << first_error;
  Node& late = cluster.AddGateway("gw-late", 1);
  Node& late_alloc = cluster.AddAllocator("alloc-late");

  int64_t before_max = 0;
  {
    BrokerFreeze freeze(broker_);
    ASSERT_TRUE(freeze.found()) << "no pid file in " << broker_.dir;
    ASSERT_TRUE(freeze.Freeze());
    const auto frozen = SteadyClock::now();
    // Nodes started now must not hang on Kafka: they exit with a startup error in time.
    const auto start_bound = milliseconds(static_cast<int64_t>(kStartBoundS * 1000));
    auto late_start =
        std::async(std::launch::async, [&] { return cluster.Start({&late}, start_bound); });
    auto late_alloc_start =
        std::async(std::launch::async, [&] { return cluster.Start({&late_alloc}, start_bound); });

    auto admin_start = SteadyClock::now();
    auto admin = PutTag(gw.port, "frozen-admin", R"({"step":10})");
    const double admin_s = SecondsSince(admin_start);
    std::cout << "frozen: admin PUT answered in " << admin_s << " s" << std::endl;
    ASSERT_FALSE(admin) << "a tag was created on a frozen broker";
    EXPECT_NE(admin.error().find("status 503"), std::string::npos) << admin.error();
    EXPECT_LT(admin_s, kAdminBoundS);

    // Segment requests: served from the buffers, then 503 once they are empty; each in time.
    int served = 0, unavailable = 0;
    double slowest = 0;
    for (int i = 0; i < 20; ++i) {
      const auto t0 = SteadyClock::now();
      auto ids = FetchIds(gw.port, tag, 3);
      const double took = SecondsSince(t0);
      slowest = std::max(slowest, took);
      std::cout << "frozen: segment request " << i << ": " << (ids ? "200" : "503") << " in "
                << took << " s" << std::endl;
      if (ids) {
        ++served;
        before_max = std::max(before_max, *std::max_element(ids->begin(), ids->end()));
      } else {
        EXPECT_NE(ids.error().find("status 503"), std::string::npos) << ids.error();
        ++unavailable;
      }
    }
    std::cout << "frozen: " << served << " segment requests served, " << unavailable
              << " answered 503; slowest " << slowest << " s" << std::endl;
    EXPECT_GT(unavailable, 0) << "the buffers of step 10 outlasted 60 IDs?";
    EXPECT_LT(slowest, kSegmentBoundS);

    // Snowflake IDs: the worker lease renews through Kafka in the background; a request never
    // waits for it (served while the lease holds, else 503), so it is answered at once.
    double slowest_snowflake = 0;
    for (int i = 0; i < 10; ++i) {
      e2e::HttpClient client(gw.port, seconds(20));
      const auto t0 = SteadyClock::now();
      auto reply = client.Get("/api/snowflake/get/" + tag);
      slowest_snowflake = std::max(slowest_snowflake, SecondsSince(t0));
      ASSERT_TRUE(reply) << reply.error();
      EXPECT_TRUE(reply->status == 200 || reply->status == 503) << reply->status << reply->body;
    }
    EXPECT_LT(slowest_snowflake, kSegmentBoundS);

    auto started = late_start.get();
    const double late_s = SecondsSince(frozen);
    std::cout << "frozen: the gateway started during the freeze gave up after " << late_s << " s: "
              << (started ? std::string("ready?") : started.error()) << std::endl;
    ASSERT_FALSE(started) << "a gateway became ready on a frozen broker";
    EXPECT_NE(started.error().find("exited"), std::string::npos)
        << "it did not give up within " << kStartBoundS << " s: " << started.error();
    EXPECT_LT(late_s, kStartBoundS + kAdminBoundS);
    auto alloc_started = late_alloc_start.get();
    const double late_alloc_s = SecondsSince(frozen);
    std::cout << "frozen: the allocator started during the freeze gave up after " << late_alloc_s
              << " s" << std::endl;
    ASSERT_FALSE(alloc_started) << "an allocator became ready on a frozen broker";
    EXPECT_NE(alloc_started.error().find("exited"), std::string::npos)
        << "it did not give up within " << kStartBoundS << " s: " << alloc_started.error();
    EXPECT_LT(late_alloc_s, kStartBoundS + kAdminBoundS);
  }  // thawed; BrokerFreeze waited until the broker creates topics again

  // Recovery by itself: the running gateway and allocator serve a new tag, old tags continue above.
  const auto thawed = SteadyClock::now();
  std::string last_error;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = PutTag(gw.port, "frozen-fresh", R"({"step":10})");
        if (!r) last_error = r.error();
        return r.has_value();
      },
      kRecoveryDeadline))
      << "no new tag within " << kRecoveryDeadline.count() << " s of the thaw: " << last_error;
  std::optional<std::vector<int64_t>> after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto ids = FetchIds(gw.port, tag, 3);
        if (!ids) last_error = ids.error();
        if (ids) after = *ids;
        return ids.has_value();
      },
      kRecoveryDeadline))
      << last_error;
  EXPECT_GT(*std::min_element(after->begin(), after->end()), before_max);
  std::cout << "frozen: serving again " << SecondsSince(thawed) << " s after the thaw" << std::endl;
  // The worker lease (renewed every 3 s through Kafka; the freeze outlasted part or all of its
  // 30 s TTL) is renewed or claimed again by itself: snowflake IDs are served again.
  int last_status = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        e2e::HttpClient client(gw.port, seconds(20));
        auto reply = client.Get("/api/snowflake/get/" + tag);
        last_status = reply ? reply->status : 0;
        return last_status == 200;
      },
      kRecoveryDeadline))
      << "no snowflake ID within " << kRecoveryDeadline.count() << " s of the thaw (status "
      << last_status << ")";
  std::cout << "frozen: snowflake IDs again " << SecondsSince(thawed) << " s after the thaw"
            << std::endl;
  // The nodes that gave up start now that Kafka answers; the allocator takes partitions over.
  auto restarted = cluster.Start({&late_alloc, &late});
  ASSERT_TRUE(restarted) << restarted.error();
  auto balanced = cluster.WaitBalanced({nodes->allocators[0], &late_alloc}, kRecoveryDeadline);
  ASSERT_TRUE(balanced) << balanced.error();
  ASSERT_TRUE(cluster.CheckEveryPartitionAnswers(late)) << cluster.Logs();
  // Its first segment of the tag is fetched on the first request (which may answer 503 after
  // segment.wait_ms): ask until it is served.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto ids = FetchIds(late.port, tag, 3);
        if (!ids) last_error = ids.error();
        return ids.has_value();
      },
      seconds(30)))
      << last_error;
}

// The broker goes away (frozen with SIGSTOP, or stopped and started again) while an allocator
// takes over the partitions of another that was killed (kill -9): the moment the group hands the
// dead allocator's partitions to the survivor, before or while it fences their producers and
// restores their state. Throughout the outage the survivor's HTTP endpoints answer in time (its
// status comes from snapshots, never from its Kafka loop) and so do the gateway's segment
// requests; once the broker is back the survivor completes the takeover by itself, within the
// bound below, as its /readyz shows, and every ID served after is greater than every ID of its
// tag served before, with no ID served twice.
enum class Outage { kFrozen, kRestarted };

// How long the broker stays away (the probes run throughout it).
constexpr auto kOutage = seconds(8);
// An allocator's /healthz and /readyz, and a gateway's segment request, during the outage.
constexpr double kProbeBoundS = 1.5;
// From the broker's return to the survivor serving every partition: the dead member's session
// timeout (6 s in the tests' configs), a rebalance, a TakeOver whose init_transactions may have
// been waiting since before the outage (10 s per attempt), its restore, and room for a loaded
// machine.
constexpr double kTakeoverBoundS = 45;

void TakeOverWhileTheBrokerIsAway(const KafkaBroker& broker, Outage outage) {
  const bool frozen = outage == Outage::kFrozen;
  const char* what = frozen ? "frozen" : "restarted";
  Cluster cluster(
      broker, std::string("takeover-") + what,
      {{"segment.max_step", "10"}, {"segment.default_step", "10"}, {"segment.wait_ms", "100"}});
  auto nodes = cluster.StartNodes(2, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw = *nodes->gateways[0];
  Node& survivor = *nodes->allocators[0];
  Node& victim = *nodes->allocators[1];

  // One tag per partition, each served before the takeover.
  std::vector<std::string> tags;
  std::map<std::string, int64_t> max_before;
  std::set<std::pair<std::string, int64_t>> seen;  // segment IDs are unique per tag
  int duplicates = 0;
  auto record = [&](const std::string& tag, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      if (!seen.emplace(tag, id).second) {
        ++duplicates;
        ADD_FAILURE() << "ID " << id << " of " << tag << " served twice";
      }
    }
  };
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    const std::string tag =
        TagOnPartition(std::string("takeover-") + what, p, Cluster::kPartitions);
    ASSERT_TRUE(Ok(PutTag(gw.port, tag, R"({"step":10})")));
    // A tag's first segment is fetched on its first request, which answers 503 after
    // segment.wait_ms (100 ms) if the fetch takes longer (e.g. across the rebalance that the
    // second allocator's start caused): ask until it is served.
    std::optional<std::vector<int64_t>> ids;
    std::string last_error;
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto got = FetchIds(gw.port, tag, 5);
          if (!got) last_error = got.error();
          if (got) ids = *got;
          return got.has_value();
        },
        seconds(30)))
        << "no segment of " << tag << " within 30 s: " << last_error;
    record(tag, *ids);
    max_before[tag] = *std::max_element(ids->begin(), ids->end());
    tags.push_back(tag);
  }
  const auto moving = ServedPartitions(victim);
  ASSERT_TRUE(moving) << moving.error();
  ASSERT_FALSE(moving->empty()) << "the victim serves no partition";
  // The survivor's assignments so far: the takeover starts when one more comes.
  const auto assigned_before = AllocatorPartitions(survivor);
  ASSERT_TRUE(assigned_before) << assigned_before.error();
  auto assignments = [](const std::map<int32_t, PartitionActivity>& partitions, int32_t p) {
    auto it = partitions.find(p);
    return it == partitions.end() ? int64_t{0} : it->second.assignments;
  };

  victim.process->KillAndWait();
  const auto killed = SteadyClock::now();
  // The group hands the victim's partitions to the survivor after its session timeout (6 s).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto now = AllocatorPartitions(survivor);
        if (!now) return false;
        for (int32_t p : *moving) {
          if (assignments(*now, p) > assignments(*assigned_before, p)) return true;
        }
        return false;
      },
      seconds(30)))
      << "the survivor was not assigned the dead allocator's partitions within 30 s";
  std::cout << "takeover-" << what << ": partitions assigned to the survivor "
            << SecondsSince(killed) << " s after the kill -9" << std::endl;

  int probes = 0, segment_requests = 0, served = 0;
  double slowest_probe = 0, slowest_segment = 0;
  std::optional<BrokerFreeze> freeze;
  std::optional<BrokerRestartGuard> guard;
  if (frozen) {
    freeze.emplace(broker);
    ASSERT_TRUE(freeze->found()) << "no pid file in " << broker.dir;
    ASSERT_TRUE(freeze->Freeze());
  } else {
    guard.emplace(broker);
    const auto t0 = SteadyClock::now();
    auto stopped = broker.Stop();
    ASSERT_TRUE(stopped) << stopped.error();
    std::cout << "takeover-restarted: broker stopped in " << SecondsSince(t0) << " s" << std::endl;
  }
  const auto away = SteadyClock::now();
  while (SteadyClock::now() - away < kOutage) {
    for (const char* path : {"/healthz", "/readyz"}) {
      e2e::HttpClient client(survivor.port, seconds(10));
      const auto t0 = SteadyClock::now();
      auto reply = client.Get(path);
      const double took = SecondsSince(t0);
      ++probes;
      slowest_probe = std::max(slowest_probe, took);
      ASSERT_TRUE(reply) << "the survivor's " << path << " did not answer: " << reply.error();
      if (std::string(path) == "/healthz") {
        EXPECT_EQ(reply->status, 200) << reply->body;
      }
      EXPECT_LT(took, kProbeBoundS) << path << " took " << took << " s";
    }
    const std::string& tag = tags[static_cast<size_t>(segment_requests) % tags.size()];
    const auto t0 = SteadyClock::now();
    auto ids = FetchIds(gw.port, tag, 1);
    const double took = SecondsSince(t0);
    ++segment_requests;
    slowest_segment = std::max(slowest_segment, took);
    EXPECT_LT(took, kProbeBoundS) << "a segment request took " << took << " s";
    if (ids) {
      ++served;
      record(tag, *ids);
      EXPECT_GT(ids->front(), max_before[tag]) << tag;
      max_before[tag] = std::max(max_before[tag], ids->front());
    } else {
      EXPECT_NE(ids.error().find("status 503"), std::string::npos) << ids.error();
    }
  }
  std::cout << "takeover-" << what << ": during " << SecondsSince(away) << " s away: " << probes
            << " survivor probes, slowest " << slowest_probe << " s; " << segment_requests
            << " segment requests (" << served << " served, the rest 503), slowest "
            << slowest_segment << " s" << std::endl;

  if (frozen) {
    freeze->Thaw();  // waits until the broker creates topics again
  } else {
    auto started = broker.Start();
    ASSERT_TRUE(started) << started.error();
  }
  const auto back = SteadyClock::now();
  std::cout << "takeover-" << what << ": broker back " << SecondsSince(away)
            << " s after it went away" << std::endl;
  // Complete: the survivor's own word (ready, nothing pending, every partition served) and every
  // partition answering through the gateway. Both are needed: right after a thaw /readyz can
  // still show the partitions the survivor held before, while the coordinator, whose clock
  // jumped by the freeze, drops its membership (seen: UNKNOWN_MEMBER_ID at the next commit) and
  // the survivor rejoins and takes them over again.
  const std::string all = "0 assigned partition(s) not restored yet; serving {0,1,2,3}";
  std::string last;
  int checks = 0;
  const bool done = WaitUntil(
      [&] {
        ++checks;
        e2e::HttpClient client(survivor.port, seconds(5));
        auto reply = client.Get("/readyz");
        last = reply ? std::to_string(reply->status) + " " + reply->body : reply.error();
        if (!reply || reply->status != 200 || reply->body.find(all) == std::string::npos) {
          return false;
        }
        auto answers = cluster.CheckEveryPartitionAnswers(gw);
        if (!answers) last = "/readyz ready, but " + answers.error();
        return answers.has_value();
      },
      milliseconds(static_cast<int64_t>(kTakeoverBoundS * 1000)));
  const double takeover_s = SecondsSince(back);
  std::cout << "takeover-" << what << ": the survivor serves every partition " << takeover_s
            << " s after the broker came back (" << checks << " checks)" << std::endl;
  ASSERT_TRUE(done) << "the takeover did not complete within " << kTakeoverBoundS
                    << " s of the broker's return; last: " << last;

  // Every tag again, from the survivor's segments: above everything served before, never twice.
  int after = 0;
  for (const auto& tag : tags) {
    for (int round = 0; round < 6; ++round) {  // 30 IDs: beyond the buffers, new segments
      std::optional<std::vector<int64_t>> ids;
      std::string error;
      ASSERT_TRUE(WaitUntil(
          [&] {
            auto r = FetchIds(gw.port, tag, 5);
            if (r) ids = *r;
            if (!r) error = r.error();
            return r.has_value();
          },
          seconds(30)))
          << tag << " not served within 30 s of the takeover: " << error;
      EXPECT_GT(*std::min_element(ids->begin(), ids->end()), max_before[tag]) << tag;
      max_before[tag] = *std::max_element(ids->begin(), ids->end());
      record(tag, *ids);
      after += static_cast<int>(ids->size());
    }
  }
  std::cout << "takeover-" << what << ": " << seen.size() << " distinct IDs (" << after
            << " after the takeover), " << duplicates << " served twice" << std::endl;
  EXPECT_EQ(duplicates, 0);
}

TEST_F(FrozenIntegrationTest, AnAllocatorTakesOverADeadOnesPartitionsAcrossAFrozenBroker) {
  ASSERT_FALSE(broker_.dir.empty())
      << "this test freezes the broker: it needs KLEAF_TEST_KAFKA_DIR";
  TakeOverWhileTheBrokerIsAway(broker_, Outage::kFrozen);
}

TEST_F(FrozenIntegrationTest, AnAllocatorTakesOverADeadOnesPartitionsAcrossABrokerRestart) {
  ASSERT_FALSE(broker_.script.empty() || broker_.port.empty())
      << "this test restarts the broker: it needs KLEAF_TEST_KAFKA_SCRIPT and _PORT";
  TakeOverWhileTheBrokerIsAway(broker_, Outage::kRestarted);
}

}  // namespace
}  // namespace kleaf::integration
