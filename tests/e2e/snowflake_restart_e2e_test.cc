// Snowflake IDs from many keep-alive clients, kill -9 and an immediate restart on the same state:
// unique, increasing, carrying the configured worker id, and above every earlier ID (I3).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/id_stream.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

constexpr int kRounds = 4;
constexpr int64_t kIdsPerRound = 20000;
constexpr int64_t kWorkerId = 619;

TEST(SnowflakeRestartE2eTest, IdsStayUniqueAndIncreaseAcrossKillNineAndImmediateRestart) {
  TempDir dir;
  TestConfig config_values(dir.path() / "state");
  config_values.Set("snowflake.worker_id", std::to_string(kWorkerId));
  auto config = dir.WriteFile("kleaf.yaml", config_values.Yaml());
  const std::vector<IdRoute> routes = {{IdRoute::Kind::kSnowflake, "orders"},
                                       {IdRoute::Kind::kSnowflake, "users"}};
  std::set<int64_t> served;
  int64_t unavailable = 0;
  const int64_t test_start_ms = WallClockMs();

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    // Batches up to 400 also take the path that issues off the I/O thread (more than 256).
    IdStream stream(server->port, 4, routes, 400);
    ASSERT_TRUE(stream.WaitForIds(kIdsPerRound, seconds(30)))
        << "only " << stream.total() << " IDs; failures: "
        << (stream.failures().empty() ? "" : stream.failures().front());
    stream.ExpectServerGone();
    ExitStatus status = server->process->KillAndWait();
    EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
    stream.Stop();

    for (const auto& f : stream.failures()) ADD_FAILURE() << f;
    EXPECT_EQ(stream.max_connections_per_client(), 1) << "keep-alive connections were not kept";
    unavailable += stream.unavailable();
    auto it = stream.ids().find("snowflake");
    ASSERT_NE(it, stream.ids().end());
    const auto& fresh = it->second;
    if (!served.empty()) {
      int64_t lowest = *std::min_element(fresh.begin(), fresh.end());
      EXPECT_GT(lowest, *served.rbegin()) << "an ID at or below one served before the kill";
    }
    int64_t duplicates = 0, wrong_worker = 0, wrong_time = 0;
    const int64_t now_ms = WallClockMs();
    for (int64_t id : fresh) {
      if (!served.insert(id).second && duplicates++ == 0) ADD_FAILURE() << "ID " << id << " twice";
      SnowflakeParts parts = SplitDefaultSnowflake(id);
      if (parts.worker_id != kWorkerId && wrong_worker++ == 0) {
        ADD_FAILURE() << "ID " << id << " carries worker " << parts.worker_id;
      }
      // Issued during this test; reserve_ms is the most a timestamp may lead the clock by.
      if ((parts.timestamp_ms < test_start_ms - 1000 || parts.timestamp_ms > now_ms + 1000) &&
          wrong_time++ == 0) {
        ADD_FAILURE() << "ID " << id << " has time " << parts.timestamp_ms << ", test ran "
                      << test_start_ms << ".." << now_ms;
      }
    }
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(wrong_worker, 0);
    EXPECT_EQ(wrong_time, 0);
  }
  EXPECT_LT(unavailable, 20);
}

}  // namespace
}  // namespace kleaf::e2e
