// compose/local-cluster.sh as a newcomer runs it: `up` brings a broker, 2 allocators, 2 gateways
// and a producer up on 127.0.0.1; both gateways serve IDs; `down` stops everything cleanly.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <random>
#include <regex>
#include <set>

#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

bool PortFree(int port) {
  return RunScript({"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port)},
                   seconds(5))
             .exit_code != 0;
}

// A base port N such that N..N+12 look free, below Linux's ephemeral ports (32768 and up by
// default): the local cluster binds them one after the other, and one in the ephemeral range that
// was free when looked at can meanwhile become the source port of any process's outgoing
// connection (it did once, with the kafka-compat tests' brokers and clients running beside this
// test: "cannot listen on 127.0.0.1:34604: Address already in use").
int FreePortBase() {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 50; ++attempt) {
    int base = 15000 + static_cast<int>(rng() % 17000);  // 15000..31999; N + 12 < 32768
    bool free = true;
    for (int p = base; p <= base + 12 && free; ++p) free = PortFree(p);
    if (free) return base;
  }
  return 0;
}

std::set<pid_t> Pids(const std::filesystem::path& dir) {
  std::set<pid_t> pids;
  if (!std::filesystem::exists(dir / "pids")) return pids;
  for (const auto& f : std::filesystem::directory_iterator(dir / "pids")) {
    pids.insert(std::stoi(e2e::ReadFile(f.path())));
  }
  return pids;
}

TEST(LocalClusterIntegrationTest, UpServesIdsFromBothGatewaysAndDownStopsEverything) {
  if (!KafkaBroker::FromEnvironment()) GTEST_SKIP() << kNoBrokerMessage;
  const std::string script = std::string(KLEAF_SOURCE_DIR) + "/compose/local-cluster.sh";
  const std::string kafka_sh = std::string(KLEAF_SOURCE_DIR) + "/compose/kafka.sh";
  e2e::TempDir tmp;
  const auto dir = tmp.path() / "cluster";
  const int base = FreePortBase();
  ASSERT_NE(base, 0) << "no 13 free ports in a row";
  auto kafka_port = RunScript({kafka_sh, "free-port"}, seconds(10));
  ASSERT_EQ(kafka_port.exit_code, 0) << kafka_port.output;
  std::string kport = kafka_port.output.substr(0, kafka_port.output.find_first_of("\r\n"));
  ::setenv("KLEAF_BINARY", KLEAF_BINARY, 1);

  struct Down {
    std::string script, dir;
    ~Down() { RunScript({script, "down", "--dir", dir}, seconds(120)); }  // whatever happened
  } down{script, dir.string()};

  auto up = RunScript({script, "up", "--dir", dir.string(), "--port-base", std::to_string(base),
                       "--kafka-port", kport},
                      seconds(240));
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("kleaf local cluster is up"), std::string::npos) << up.output;
  const auto pids = Pids(dir);
  EXPECT_EQ(pids.size(), 5u) << "2 allocators, 2 gateways, 1 producer";

  // Both gateways serve segment and snowflake IDs of the tag `up` created, never the same one.
  std::set<int64_t> segment, snowflake;
  for (int gw = 0; gw < 2; ++gw) {
    const auto port = static_cast<uint16_t>(base + gw);
    for (int i = 0; i < 20; ++i) {
      // As a client does: a 503 "retry" (the compose configs wait only 100 ms for a segment,
      // which a loaded machine can miss) is asked again, for at most 10 s.
      auto ids = FetchIds(port, "order", 1);
      for (const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
           !ids && ids.error().find("retry") != std::string::npos &&
           std::chrono::steady_clock::now() < give_up;) {
        ids = FetchIds(port, "order", 1);
      }
      ASSERT_TRUE(ids) << "gateway " << gw << ": " << ids.error();
      EXPECT_TRUE(segment.insert(ids->front()).second) << "segment ID twice: " << ids->front();
    }
    e2e::HttpClient client(port);
    auto reply = client.Get("/api/v1/snowflake/order?count=50");
    ASSERT_TRUE(reply && reply->status == 200) << (reply ? reply->body : reply.error());
    auto ids = e2e::IdsOf(*reply, false, "order");
    ASSERT_TRUE(ids) << ids.error();
    for (int64_t id : *ids) EXPECT_TRUE(snowflake.insert(id).second) << "snowflake ID twice";
  }

  // Every node becomes ready (allocators once their partitions are restored).
  ScriptResult status;
  EXPECT_TRUE(WaitUntil(
      [&] {
        status = RunScript({script, "status", "--dir", dir.string()}, seconds(30));
        return status.exit_code == 0 && Count(status.output, "/readyz 200") == 5;
      },
      std::chrono::seconds(60)))
      << status.output;
  EXPECT_EQ(Count(status.output, "running"), 6) << status.output;

  // The producer keeps batches of "order" on the ids topic.
  e2e::HttpClient producer(static_cast<uint16_t>(base + 12));
  auto metrics = producer.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("kleaf_producer_batches_published_total{tag=\"order\",mode=\"segment\"}"),
            std::string::npos)
      << metrics->body;
  // ... on the topic the banner's kcat line reads.
  const auto t = up.output.find(" -t ");
  ASSERT_NE(t, std::string::npos) << "no kcat line in the banner:\n" << up.output;
  const std::string topic = up.output.substr(t + 4, up.output.find(' ', t + 4) - (t + 4));
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto offsets = RunScript({kafka_sh, "tool", "get-offsets", "--bootstrap-server",
                                  "127.0.0.1:" + kport, "--topic", topic},
                                 seconds(60));
        // "<topic>:<partition>:<end offset>" per partition: some end above 0.
        return offsets.exit_code == 0 &&
               std::regex_search(offsets.output, std::regex(":[0-9]+:[1-9][0-9]*"));
      },
      std::chrono::seconds(60)))
      << "the banner's topic " << topic << " holds no batch";

  auto stopped = RunScript({script, "down", "--dir", dir.string()}, seconds(120));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  for (pid_t pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "pid " << pid << " still runs after down";
  auto after = RunScript({script, "status", "--dir", dir.string()}, seconds(30));
  EXPECT_EQ(after.exit_code, 3) << after.output;
  // Clean stops: each gateway released its worker id; nobody was killed.
  for (const char* gw : {"gw-1", "gw-2"}) {
    std::string log = e2e::ReadFile(dir / "logs" / (std::string(gw) + ".err"));
    EXPECT_NE(log.find("released worker id"), std::string::npos) << gw << ":\n" << log;
  }
  EXPECT_EQ(stopped.output.find("killing"), std::string::npos) << stopped.output;
}

}  // namespace
}  // namespace kleaf::integration
