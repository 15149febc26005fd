// Segment IDs from many keep-alive clients, with kill -9 in the middle of the stream and restarts
// on the same state: unique, increasing per connection, and above everything served before (I2).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/id_stream.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

constexpr int kRounds = 4;  // the first start, then a restart after each kill -9
constexpr int64_t kIdsPerRound = 4000;

TEST(SegmentRestartE2eTest, IdsStayUniqueAndAboveEverythingServedAcrossKillNine) {
  TempDir dir;
  // A small step: many segment fetches (each a synced write) per round, batches spanning segments.
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("segment.default_step", "10")
                                                .Set("segment.max_step", "640")
                                                .Yaml());
  const std::vector<IdRoute> routes = {{IdRoute::Kind::kSegment, "orders"},
                                       {IdRoute::Kind::kSegment, "users"}};
  std::map<std::string, std::set<int64_t>> served;  // every ID served so far, per key
  int64_t unavailable = 0;

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    if (round == 0) {
      HttpClient admin(server->port);
      for (const auto& route : routes) {
        auto put = admin.Put("/api/v1/tags/" + route.tag, R"({"step":10})", Bearer(kAdminToken));
        ASSERT_TRUE(put) << put.error();
        ASSERT_EQ(put->status, 200) << put->body;
      }
    }

    IdStream stream(server->port, 4, routes, 50);
    ASSERT_TRUE(stream.WaitForIds(kIdsPerRound, seconds(30)))
        << "only " << stream.total() << " IDs; failures: "
        << (stream.failures().empty() ? "" : stream.failures().front());
    // Kill while the clients are still streaming.
    stream.ExpectServerGone();
    ExitStatus status = server->process->KillAndWait();
    EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
    stream.Stop();

    for (const auto& f : stream.failures()) ADD_FAILURE() << f;
    EXPECT_EQ(stream.max_connections_per_client(), 1) << "keep-alive connections were not kept";
    unavailable += stream.unavailable();
    for (const auto& route : routes) {
      const std::string key = IdStream::KeyOf(route);
      auto it = stream.ids().find(key);
      ASSERT_NE(it, stream.ids().end()) << "no IDs for " << key;
      const auto& fresh = it->second;
      auto& before = served[key];
      if (!before.empty()) {
        // I2: nothing below what an earlier run served may come back after a crash.
        int64_t lowest = *std::min_element(fresh.begin(), fresh.end());
        EXPECT_GT(lowest, *before.rbegin())
            << key << ": an ID at or below one served before the kill";
      }
      int64_t duplicates = 0;
      for (int64_t id : fresh) {
        if (!before.insert(id).second && duplicates++ == 0) {
          ADD_FAILURE() << key << ": ID " << id << " served twice";
        }
      }
      EXPECT_EQ(duplicates, 0) << key;
    }
  }
  // 503s are allowed under load, but they must stay the exception.
  EXPECT_LT(unavailable, 20);
  for (const auto& [key, ids] : served) {
    EXPECT_GE(static_cast<int64_t>(ids.size()), kRounds * 500) << key;
  }
}

}  // namespace
}  // namespace kleaf::e2e
