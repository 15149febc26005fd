// Beyond Leaf: after a graceful stop (SIGTERM) the unused rest of each segment is kept and the
// same node's next start continues with the next unused ID; after kill -9 the kept rest is never
// served twice.
#include <gtest/gtest.h>

#include <set>

#include "tests/e2e/e2e_env.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

// `n` single segment IDs of `tag`, one request each.
std::vector<int64_t> TakeIds(uint16_t port, const std::string& tag, int n) {
  HttpClient client(port);
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    auto reply = client.Get("/api/segment/get/" + tag);
    if (!reply) {
      ADD_FAILURE() << reply.error();
      break;
    }
    auto got = IdsOf(*reply, /*plain=*/true, tag);
    if (!got) {
      ADD_FAILURE() << got.error();
      break;
    }
    ids.push_back(got->front());
  }
  return ids;
}

class SegmentRestE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.WriteFile("kleaf.yaml", TestConfig(dir_.path() / "state")
                                               .Set("segment.default_step", "1000")
                                               .Set("segment.auto_create", "true")
                                               .Yaml());
  }
  Server Start() {
    auto server = StartStandalone(config_);
    EXPECT_TRUE(server) << server.error();
    return server ? std::move(*server) : Server{};
  }
  void Terminate(Server& server) {
    server.process->Terminate();
    ExitStatus status = server.process->WaitExit(seconds(10));
    EXPECT_TRUE(status.exited && status.code == 0) << status.ToString() << server.process->Stderr();
  }

  TempDir dir_;
  std::filesystem::path config_;
};

TEST_F(SegmentRestE2eTest, SigtermKeepsTheRestAndTheNextStartContinuesWithTheNextId) {
  Server first = Start();
  ASSERT_NE(first.port, 0);
  auto before = TakeIds(first.port, "orders", 30);
  ASSERT_EQ(before.size(), 30u);
  Terminate(first);

  Server second = Start();
  ASSERT_NE(second.port, 0);
  auto after = TakeIds(second.port, "orders", 30);
  ASSERT_EQ(after.size(), 30u);
  // Leaf would start the next segment (1001); kleaf goes on where it stopped.
  EXPECT_EQ(after.front(), before.back() + 1);
  std::set<int64_t> all(before.begin(), before.end());
  for (int64_t id : after) EXPECT_TRUE(all.insert(id).second) << "ID " << id << " twice";
  Terminate(second);
}

TEST_F(SegmentRestE2eTest, KillNineAfterResumingNeverServesTheKeptRestAgain) {
  Server first = Start();
  ASSERT_NE(first.port, 0);
  auto a = TakeIds(first.port, "orders", 10);
  Terminate(first);

  Server second = Start();
  ASSERT_NE(second.port, 0);
  auto b = TakeIds(second.port, "orders", 10);
  ASSERT_EQ(b.size(), 10u);
  EXPECT_EQ(b.front(), a.back() + 1);
  second.process->KillAndWait();

  Server third = Start();
  ASSERT_NE(third.port, 0);
  auto c = TakeIds(third.port, "orders", 10);
  ASSERT_EQ(c.size(), 10u);
  // The kept rest was deleted before it was served: after the crash it is a gap, and the third
  // run starts on a new segment above everything.
  EXPECT_GT(c.front(), b.back() + 1);
  std::set<int64_t> all;
  for (const auto* run : {&a, &b, &c}) {
    for (int64_t id : *run) EXPECT_TRUE(all.insert(id).second) << "ID " << id << " twice";
  }
  Terminate(third);
}

}  // namespace
}  // namespace kleaf::e2e
