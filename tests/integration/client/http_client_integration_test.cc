// HttpClient against real gateways: one of two gateways killed under load (no error reaches the
// caller, no duplicate), 4xx answered at once, and http_client_example against a standalone.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "kleaf/http_client.h"
#include "tests/integration/client/client_env.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class HttpClientIntegrationTest : public KafkaTest {};

TEST_F(HttpClientIntegrationTest, KeepsServingWhenOneOfTwoGatewaysIsKilled) {
  Cluster cluster(broker_, "client-http");
  auto nodes = cluster.StartNodes(1, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw_a = *nodes->gateways[0];
  Node& gw_b = *nodes->gateways[1];
  const std::string tag = "client-failover";
  ASSERT_TRUE(Ok(PutTag(gw_a.port, tag, R"({"step":100})")));

  HttpClient::Options options;
  options.gateways = {{"127.0.0.1", gw_a.port}, {"127.0.0.1", gw_b.port}};
  options.request_timeout = seconds(3);
  options.total_timeout = seconds(30);
  auto plain = HttpClient::Create(options);
  ASSERT_TRUE(plain) << plain.error().message;
  options.buffer_size = 50;
  auto buffered = HttpClient::Create(options);
  ASSERT_TRUE(buffered) << buffered.error().message;

  std::mutex mu;
  std::vector<int64_t> ids;
  std::vector<std::string> errors;
  std::atomic<int64_t> calls{0};
  std::atomic<bool> stop{false};
  auto worker = [&](HttpClient& client, int which) {
    for (int i = 0; !stop.load(); ++i) {
      ClientResult<std::vector<int64_t>> got;
      if (which == 0 && i % 2 == 1) {
        got = client.Segments(tag, 7);
      } else if (auto one = client.NextSegment(tag)) {
        got = std::vector<int64_t>{*one};
      } else {
        got = std::unexpected(one.error());
      }
      std::lock_guard lock(mu);
      if (got) {
        ids.insert(ids.end(), got->begin(), got->end());
      } else {
        errors.push_back(got.error().message);
      }
      ++calls;
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(worker, std::ref(**plain), 0);
  threads.emplace_back(worker, std::ref(**plain), 0);
  threads.emplace_back(worker, std::ref(**buffered), 1);
  EXPECT_TRUE(WaitUntil([&] { return calls.load() >= 300; }, seconds(30)));
  gw_a.process->Kill();  // the gateway the clients prefer (first in the list) goes away mid-load
  const int64_t at_kill = calls.load();
  EXPECT_TRUE(WaitUntil([&] { return calls.load() >= at_kill + 300; }, seconds(60)));
  stop.store(true);
  for (auto& t : threads) t.join();

  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  std::set<int64_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), ids.size()) << "duplicate IDs";
  EXPECT_GE(*unique.begin(), 0);
  EXPECT_GE((*plain)->stats().failovers + (*buffered)->stats().failovers, 1);

  // A 4xx is the caller's answer at once: one request, not a round of every gateway.
  const int64_t before = (*plain)->stats().requests;
  const auto t0 = SteadyClock::now();
  auto unknown = (*plain)->NextSegment("client-never-created");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ClientError::Kind::kRejected) << unknown.error().message;
  EXPECT_EQ(unknown.error().http_status, 404) << unknown.error().message;
  EXPECT_EQ((*plain)->stats().requests, before + 1);
  EXPECT_LT(SecondsSince(t0), 2.0);
  auto bad = (*plain)->Segments(tag, 0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ClientError::Kind::kInvalidArgument);
}

TEST(HttpClientExampleTest, PrintsIdsFromAStandaloneEvenWithADeadGatewayFirst) {
  e2e::TempDir dir;
  e2e::TestConfig config(dir.path() / "state");
  auto server = e2e::StartStandalone(dir.WriteFile("kleaf.yaml", config.Yaml()));
  ASSERT_TRUE(server) << server.error();
  ASSERT_TRUE(Ok(PutTag(server->port, "example", R"({"step":10})")));
  // Port 1 on loopback refuses connections: the example fails over to the standalone.
  const std::string gateways = "127.0.0.1:1,127.0.0.1:" + std::to_string(server->port);
  const std::string example = std::string(KLEAF_EXAMPLES_DIR) + "/http_client_example";
  for (const char* mode : {"segment", "snowflake"}) {
    auto run = RunScript({example, gateways, "example", "25", mode, "4"}, seconds(30));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto ids = PrintedIds(run.output);
    std::set<int64_t> unique(ids.begin(), ids.end());
    EXPECT_EQ(ids.size(), 25u) << run.output;
    EXPECT_EQ(unique.size(), 25u) << run.output;
  }
  auto missing = RunScript({example, gateways, "no-such-tag", "1"}, seconds(30));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("404"), std::string::npos) << missing.output;
}

// The IM example of a sequence space (examples/im_sync_example.cc): messages fanned out to their
// recipients' mailboxes by next values, devices syncing by current value; it checks every device
// shows exactly its messages in send order, and fails over past a dead gateway first.
TEST(ImSyncExampleTest, EveryDeviceShowsItsMessagesInOrder) {
  e2e::TempDir dir;
  e2e::TestConfig config(dir.path() / "state");
  auto server = e2e::StartStandalone(dir.WriteFile("kleaf.yaml", config.Yaml()));
  ASSERT_TRUE(server) << server.error();
  auto space = AdminCall(server->port, "PUT", "/api/v1/spaces/inbox", R"({"section_size":1000})");
  ASSERT_TRUE(space) << space.error();
  const std::string gateways = "127.0.0.1:1,127.0.0.1:" + std::to_string(server->port);
  const std::string example = std::string(KLEAF_EXAMPLES_DIR) + "/im_sync_example";
  auto run = RunScript({example, gateways, "inbox", "40"}, seconds(30));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("every device shows its 40 messages' share, in order"),
            std::string::npos)
      << run.output;
  EXPECT_GE(Count(run.output, "synced"), 4) << run.output;
  auto missing = RunScript({example, gateways, "no-such-space"}, seconds(30));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("404"), std::string::npos) << missing.output;
}

// UUIDv7s and ULIDs through the client library: text as the gateway wrote it, batches larger than
// one request split and joined in order, failover past a dead gateway.
TEST(HttpClientTimeOrderedTest, Uuid7sAndUlidsFromAStandaloneWithADeadGatewayFirst) {
  e2e::TempDir dir;
  e2e::TestConfig config(dir.path() / "state");
  auto server = e2e::StartStandalone(dir.WriteFile("kleaf.yaml", config.Yaml()));
  ASSERT_TRUE(server) << server.error();
  HttpClient::Options options;
  options.gateways = {{"127.0.0.1", 1}, {"127.0.0.1", server->port}};
  options.max_count_per_request = 1000;
  auto client = HttpClient::Create(options);
  ASSERT_TRUE(client) << client.error().message;

  const std::regex uuid7("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  const std::regex ulid("[0-7][0-9A-HJKMNP-TV-Z]{25}");
  struct Case {
    const std::regex& format;
    std::function<ClientResult<std::string>()> one;
    std::function<ClientResult<std::vector<std::string>>(int64_t)> many;
  };
  HttpClient& c = **client;
  for (const Case& kind : {Case{uuid7, [&] { return c.NextUuid7("wide"); },
                                [&](int64_t n) { return c.Uuid7s("wide", n); }},
                           Case{ulid, [&] { return c.NextUlid("wide"); },
                                [&](int64_t n) { return c.Ulids("wide", n); }}}) {
    auto first = kind.one();
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_TRUE(std::regex_match(*first, kind.format)) << *first;
    auto batch = kind.many(2500);  // three requests
    ASSERT_TRUE(batch) << batch.error().message;
    ASSERT_EQ(batch->size(), 2500u);
    std::string previous = *first;
    for (const std::string& id : *batch) {
      ASSERT_TRUE(std::regex_match(id, kind.format)) << id;
      ASSERT_LT(previous, id) << "not in issue order";
      previous = id;
    }
  }
  auto bad_tag = c.Uuid7s("bad tag", 1);
  ASSERT_FALSE(bad_tag);
  EXPECT_EQ(bad_tag.error().kind, ClientError::Kind::kInvalidArgument);
  auto bad_count = c.Ulids("wide", 0);
  ASSERT_FALSE(bad_count);
  EXPECT_EQ(bad_count.error().kind, ClientError::Kind::kInvalidArgument);
}

}  // namespace
}  // namespace kleaf::integration
