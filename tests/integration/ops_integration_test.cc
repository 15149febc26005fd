// Operator endpoints against a real broker: /readyz of an allocator flips to 503 while the broker
// is down and back to 200 once it returns, a gateway's only once it has nothing left to hand out;
// allocator /metrics counts the segments it allocates; gateway /metrics times the Kafka round
// trips.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "tests/e2e/http_client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

struct Answer {
  int status = 0;
  std::string body;
};

Answer Get(uint16_t port, const std::string& target) {
  e2e::HttpClient client(port, seconds(5));
  auto r = client.Get(target);
  if (!r) return {0, r.error()};
  return {r->status, r->body};
}

class OpsIntegrationTest : public KafkaTest {};

TEST_F(OpsIntegrationTest, AllocatorMetricsCountSegmentsAndGatewayMetricsTimeKafka) {
  Cluster cluster(broker_, "ops-metrics",
                  {{"segment.max_step", "10"}, {"segment.default_step", "10"}});
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  const Node& alloc = *nodes->allocators[0];
  const Node& gw = *nodes->gateways[0];
  ASSERT_NE(alloc.port, 0) << "the allocator printed no URL";
  ASSERT_TRUE(Ok(PutTag(gw.port, "ops-seg", R"({"step":10})")));

  auto before = ScrapeMetrics(alloc.port);
  ASSERT_TRUE(before) << before.error();
  const double allocated_before = before->Sum("kleaf_allocator_segments_allocated_total");
  // 95 IDs in segments of 10: at least 9 more segments (the gateway also preloads).
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Ok(FetchIds(gw.port, "ops-seg", 19)));
  auto after = ScrapeMetrics(alloc.port);
  ASSERT_TRUE(after) << after.error();
  const double allocated =
      after->Sum("kleaf_allocator_segments_allocated_total") - allocated_before;
  std::cout << "ops: the allocator counted " << allocated << " segments for 95 IDs" << std::endl;
  EXPECT_GE(allocated, 9);
  EXPECT_LE(allocated, 12);
  EXPECT_GT(after->Sum("kleaf_allocator_commit_seconds_count"), 0);
  EXPECT_GT(after->Sum("kleaf_allocator_partitions_serving"), 0);
  // The only allocator serves every partition: it took each over.
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    const std::string partition = "partition=\"" + std::to_string(p) + "\"";
    EXPECT_EQ(after->Value("kleaf_allocator_partition_serving", partition).value_or(0), 1)
        << partition;
    EXPECT_GE(after->Value("kleaf_allocator_partition_takeovers_total", partition).value_or(0), 1)
        << partition;
  }
  // One committed transaction per batch, at least one batch per segment; no other outcome on a
  // healthy cluster, but every outcome's series is there (at 0) for alerts.
  EXPECT_GE(after->Value("kleaf_allocator_transactions_total", "outcome=\"committed\"").value_or(0),
            1);
  for (const char* outcome : {"aborted", "unknown", "fatal"}) {
    EXPECT_EQ(after
                  ->Value("kleaf_allocator_transactions_total",
                          std::string("outcome=\"") + outcome + "\"")
                  .value_or(-1),
              0)
        << outcome;
  }
  EXPECT_EQ(after->Value("kleaf_allocator_fenced_total").value_or(-1), 0);
  EXPECT_EQ(after->Value("kleaf_allocator_rebalances_total", "event=\"revoked\"").value_or(-1), 0);
  EXPECT_GE(after->Value("kleaf_allocator_rebalances_total", "event=\"assigned\"").value_or(0), 1);
  // Every partition's segment counter exists from the start, the last one included.
  const std::string last = "partition=\"" + std::to_string(Cluster::kPartitions - 1) + "\"";
  EXPECT_TRUE(before->Value("kleaf_allocator_segments_allocated_total", last).has_value());
  EXPECT_TRUE(before->Value("process_open_fds").has_value());
  EXPECT_EQ(Get(alloc.port, "/healthz").status, 200);
  EXPECT_EQ(Get(alloc.port, "/api/v1/segment/x").status, 404) << "allocators serve ops routes only";
  // The allocator's own HTTP answers, per route: two scrapes since `before` rendered (itself and
  // `after`) and the two requests just made (a path it does not serve counts as "other", not as a
  // label of its own). Each series was there in `before`, at its count so far.
  auto requests = ScrapeMetrics(alloc.port);
  ASSERT_TRUE(requests) << requests.error();
  for (const auto& [labels, added] : std::vector<std::pair<std::string, double>>{
           {R"(route="/metrics",method="GET",status="200")", 2},
           {R"(route="/healthz",method="GET",status="200")", 1},
           {R"(route="other",method="GET",status="404")", 1}}) {
    const double was = before->Value("kleaf_http_requests_total", labels).value_or(0);
    EXPECT_EQ(requests->Value("kleaf_http_requests_total", labels).value_or(-1), was + added)
        << labels;
  }
  EXPECT_TRUE(before->Value("kleaf_http_request_seconds_count", R"(route="/readyz")").has_value());
  Answer g = Get(gw.port, "/metrics");
  ASSERT_EQ(g.status, 200);
  auto gateway_metrics = ScrapeMetrics(gw.port);
  ASSERT_TRUE(gateway_metrics) << gateway_metrics.error();
  EXPECT_NE(g.body.find(R"(kleaf_kafka_request_seconds_count{op="allocate"} )"), std::string::npos);
  EXPECT_GE(gateway_metrics->Sum("kleaf_segment_fetch_seconds_count"), 9);
  EXPECT_NE(g.body.find("kleaf_worker_lease_held 1\n"), std::string::npos) << g.body;
  EXPECT_NE(g.body.find("\nkleaf_worker_clock_offset_seconds "), std::string::npos) << g.body;
  EXPECT_EQ(gateway_metrics->Sum("kleaf_ids_issued_total"), 95);
  auto status = nlohmann::json::parse(Get(gw.port, "/api/v1/status").body);
  EXPECT_EQ(status["worker"]["source"], "registry");
  ASSERT_TRUE(status["worker"]["clock_offset_ms"].is_number_integer()) << status.dump();
  // One host, one clock: zero lies within the estimate's error bound (half its round trip).
  EXPECT_LE(std::abs(status["worker"]["clock_offset_ms"].get<int64_t>()),
            status["worker"]["clock_offset_error_ms"].get<int64_t>() + 5)
      << status["worker"].dump();
}

// While the broker is down the allocator turns unready (it cannot serve anything), and the
// gateway stays ready as long as it can hand out IDs: here until its worker lease (30 s) runs out,
// since it holds no buffered segment; its /readyz lists Kafka as failing meanwhile. Both are ready
// again once the broker is back.
TEST_F(OpsIntegrationTest, ReadyzFollowsTheBrokerOnTheAllocatorAndWhatItCanServeOnTheGateway) {
  ASSERT_FALSE(broker_.script.empty() || broker_.dir.empty() || broker_.port.empty())
      << "this test stops and restarts the broker: it needs KLEAF_TEST_KAFKA_SCRIPT, _DIR and "
         "_PORT";
  Cluster cluster(broker_, "ops-ready", ShortLeases(30000));
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  const Node& alloc = *nodes->allocators[0];
  const Node& gw = *nodes->gateways[0];
  auto both = [&](int status) {
    return Get(alloc.port, "/readyz").status == status && Get(gw.port, "/readyz").status == status;
  };
  ASSERT_TRUE(WaitUntil([&] { return both(200); }, seconds(60)))
      << "allocator: " << Get(alloc.port, "/readyz").body
      << "\ngateway: " << Get(gw.port, "/readyz").body;
  auto check = [](const std::string& body, const std::string& name) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("checks")) return nlohmann::json();
    for (const auto& c : j["checks"]) {
      if (c["name"] == name) return c;
    }
    return nlohmann::json();
  };

  {
    BrokerRestartGuard guard(broker_);
    auto stopped = broker_.Stop();
    ASSERT_TRUE(stopped) << stopped.error();
    const auto down = SteadyClock::now();
    const bool allocator_down =
        WaitUntil([&] { return Get(alloc.port, "/readyz").status == 503; }, seconds(30));
    std::cout << "ops: the allocator's /readyz answered 503 " << SecondsSince(down)
              << " s after the broker stopped" << std::endl;
    Answer a = Get(alloc.port, "/readyz");
    ASSERT_TRUE(allocator_down) << "allocator: " << a.body;
    // The gateway's own probe fails once no metadata answer came for 5 s.
    Answer g;
    const bool kafka_failing = WaitUntil(
        [&] {
          g = Get(gw.port, "/readyz");
          return check(g.body, "kafka")["ok"] == false;
        },
        seconds(30));
    std::cout << "ops: the gateway's /readyz listed Kafka as failing " << SecondsSince(down)
              << " s after the broker stopped" << std::endl;
    ASSERT_TRUE(kafka_failing) << "gateway: " << g.body;
    EXPECT_NE(a.body.find("Kafka unreachable"), std::string::npos) << a.body;
    // The gateway still holds its lease: ready, serving snowflake IDs, Kafka listed as failing.
    EXPECT_EQ(g.status, 200) << g.body;
    EXPECT_EQ(check(g.body, "kafka")["required"], false) << g.body;
    EXPECT_NE(g.body.find("Kafka unreachable"), std::string::npos) << g.body;
    EXPECT_EQ(check(g.body, "serving")["ok"], true) << g.body;
    {
      e2e::HttpClient client(gw.port, seconds(5));
      auto id = client.Get("/api/v1/snowflake/ops-ready");
      ASSERT_TRUE(id) << id.error();
      EXPECT_EQ(id->status, 200) << id->body;
    }
    // Once the lease has run out it has nothing to hand out (no segment buffered): unready.
    const bool gateway_down =
        WaitUntil([&] { return Get(gw.port, "/readyz").status == 503; }, seconds(60));
    std::cout << "ops: the gateway's /readyz answered 503 " << SecondsSince(down)
              << " s after the broker stopped" << std::endl;
    g = Get(gw.port, "/readyz");
    ASSERT_TRUE(gateway_down) << "gateway: " << g.body;
    EXPECT_EQ(check(g.body, "worker_lease")["ok"], false) << g.body;
    EXPECT_NE(g.body.find("cannot hand out IDs"), std::string::npos) << g.body;
    // Liveness is not readiness: both still answer /healthz.
    EXPECT_EQ(Get(alloc.port, "/healthz").status, 200);
    EXPECT_EQ(Get(gw.port, "/healthz").status, 200);
    auto started = broker_.Start();
    ASSERT_TRUE(started) << started.error();
  }
  const auto up = SteadyClock::now();
  const bool back = WaitUntil([&] { return both(200); }, seconds(90));
  std::cout << "ops: /readyz answered 200 on both " << SecondsSince(up)
            << " s after the broker was back" << std::endl;
  EXPECT_TRUE(back) << "allocator: " << Get(alloc.port, "/readyz").body
                    << "\ngateway: " << Get(gw.port, "/readyz").body;
}

}  // namespace
}  // namespace kleaf::integration
