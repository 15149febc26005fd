// SIGTERM while clients are busy: kleaf exits 0 within a deadline, and a restart continues above
// every ID it issued (segment and snowflake).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/id_stream.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

constexpr int kRounds = 3;

TEST(ShutdownE2eTest, SigtermUnderLoadExitsZeroAndRestartContinuesAbove) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("segment.default_step", "20")
                                                .Set("segment.max_step", "1000")
                                                .Set("segment.auto_create", "true")
                                                .Yaml());
  const std::vector<IdRoute> routes = {{IdRoute::Kind::kSegment, "orders"},
                                       {IdRoute::Kind::kSnowflake, "orders"},
                                       {IdRoute::Kind::kSegment, "users"}};
  std::map<std::string, std::set<int64_t>> served;

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    IdStream stream(server->port, 4, routes, 100);
    ASSERT_TRUE(stream.WaitForIds(5000, seconds(30)))
        << "only " << stream.total() << " IDs; failures: "
        << (stream.failures().empty() ? "" : stream.failures().front());

    stream.ExpectServerGone();
    const auto sent = std::chrono::steady_clock::now();
    server->process->Terminate();
    ExitStatus status = server->process->WaitExit(seconds(10));
    const auto took = std::chrono::steady_clock::now() - sent;
    ASSERT_FALSE(status.timed_out) << "kleaf did not stop within 10 s of SIGTERM under load";
    EXPECT_TRUE(status.exited) << status.ToString();
    EXPECT_EQ(status.code, 0) << server->process->Stderr();
    // Nothing was in flight for long: the stop should not need the whole grace period.
    EXPECT_LT(took, seconds(5))
        << "SIGTERM took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    stream.Stop();

    for (const auto& f : stream.failures()) ADD_FAILURE() << f;
    for (const auto& route : routes) {
      const std::string key = IdStream::KeyOf(route);
      auto it = stream.ids().find(key);
      ASSERT_NE(it, stream.ids().end()) << key;
      auto& before = served[key];
      if (!before.empty()) {
        EXPECT_GT(*std::min_element(it->second.begin(), it->second.end()), *before.rbegin())
            << key << ": an ID at or below one issued before SIGTERM";
      }
      int64_t duplicates = 0;
      for (int64_t id : it->second) {
        if (!before.insert(id).second && duplicates++ == 0) {
          ADD_FAILURE() << key << ": " << id << " twice";
        }
      }
      EXPECT_EQ(duplicates, 0) << key;
    }
  }
}

TEST(ShutdownE2eTest, SigtermWhenIdleExitsZeroQuickly) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  // An idle keep-alive connection must not hold the shutdown for the idle timeout.
  HttpClient client(server->port);
  auto reply = client.Get("/healthz");
  ASSERT_TRUE(reply) << reply.error();
  const auto sent = std::chrono::steady_clock::now();
  server->process->Terminate();
  ExitStatus status = server->process->WaitExit(seconds(10));
  const auto took = std::chrono::steady_clock::now() - sent;
  EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  EXPECT_LT(took, seconds(2)) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                              << " ms";
}

}  // namespace
}  // namespace kleaf::e2e
