// The wall clock set back or forward between runs (faketime): kleaf refuses to start instead of
// issuing snowflake IDs that could repeat (I3), and starts again once the clock is right.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

constexpr int64_t kDayMs = 24LL * 3600 * 1000;

// Issues `n` snowflake IDs one by one and returns them (fails the test on any error).
std::vector<int64_t> IssueSnowflakes(uint16_t port, int n) {
  HttpClient client(port);
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    auto reply = client.Get("/api/snowflake/get/clock");
    if (!reply) {
      ADD_FAILURE() << reply.error();
      break;
    }
    auto got = IdsOf(*reply, /*plain=*/true, "clock");
    if (!got) {
      ADD_FAILURE() << got.error();
      break;
    }
    ids.push_back(got->front());
  }
  return ids;
}

class ClockE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  }
};

TEST_F(ClockE2eTest, FaketimeShiftsTheClockKleafSees) {
  // Guards the next test against passing vacuously: under faketime +1d kleaf issues IDs a day
  // ahead, and afterwards a run on the true clock refuses the state that day-ahead run left.
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  {
    auto server = StartStandalone(config, FaketimePrefix("+1d"), FaketimeEnv());
    ASSERT_TRUE(server) << server.error();
    auto ids = IssueSnowflakes(server->port, 5);
    ASSERT_EQ(ids.size(), 5u);
    const int64_t shift = SplitDefaultSnowflake(ids.back()).timestamp_ms - WallClockMs();
    EXPECT_GT(shift, kDayMs - 60000) << "kleaf under faketime +1d did not see the shifted time";
    EXPECT_LT(shift, kDayMs + 60000);
    // The decode route of that server agrees.
    HttpClient client(server->port);
    auto decoded = client.Get("/api/v1/snowflake/decode/" + std::to_string(ids.back()));
    ASSERT_TRUE(decoded) << decoded.error();
    auto json = nlohmann::json::parse(decoded->body, nullptr, false);
    EXPECT_EQ(json.value("timestamp_ms", int64_t{0}),
              SplitDefaultSnowflake(ids.back()).timestamp_ms)
        << decoded->body;
    server->process->Terminate();
    server->process->WaitExit(kExitTimeout);
  }
  // The true clock is a day behind what the previous run persisted.
  ProcessOptions options;
  options.args = {"standalone", "--config", config.string()};
  auto process = KleafProcess::Start(options);
  ASSERT_TRUE(process) << process.error();
  ExitStatus status = (*process)->WaitExit(kExitTimeout);
  EXPECT_TRUE(status.exited && status.code != 0) << status.ToString();
  EXPECT_NE((*process)->Stderr().find("behind"), std::string::npos) << (*process)->Stderr();
}

TEST_F(ClockE2eTest, RestartWithClockSetBackRefusesToStartAndNormalRestartWorks) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  std::vector<int64_t> first;
  {
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    first = IssueSnowflakes(server->port, 50);
    ASSERT_EQ(first.size(), 50u);
    server->process->Terminate();
    ExitStatus status = server->process->WaitExit(kExitTimeout);
    ASSERT_TRUE(status.exited && status.code == 0) << status.ToString();
  }
  {
    // The same state, the clock ten minutes back.
    ProcessOptions options{.args = {"standalone", "--config", config.string()},
                           .prefix = FaketimePrefix("-10m"),
                           .env = FaketimeEnv()};
    auto process = KleafProcess::Start(options);
    ASSERT_TRUE(process) << process.error();
    ExitStatus status = (*process)->WaitExit(kExitTimeout);
    ASSERT_FALSE(status.timed_out) << "kleaf under a clock set back did not exit; stdout: "
                                   << (*process)->Stdout();
    EXPECT_TRUE(status.exited && status.code != 0) << status.ToString();
    const std::string err = (*process)->Stderr();
    EXPECT_NE(err.find("clock"), std::string::npos) << err;
    EXPECT_NE(err.find("behind"), std::string::npos) << err;
    EXPECT_EQ((*process)->Stdout().find("listening on"), std::string::npos)
        << "kleaf served with a clock behind its persisted snowflake timestamp";
  }
  {
    // The clock is right again: kleaf starts and continues above everything issued before.
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    auto next = IssueSnowflakes(server->port, 50);
    ASSERT_EQ(next.size(), 50u);
    EXPECT_GT(next.front(), first.back());
    server->process->Terminate();
    ExitStatus status = server->process->WaitExit(kExitTimeout);
    EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  }
}

TEST_F(ClockE2eTest, ClockSlightlyBehindAtStartupIsWaitedOut) {
  // Behind the persisted mark by less than snowflake.max_startup_wait_ms: wait, then serve above.
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  std::vector<int64_t> first;
  {
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    first = IssueSnowflakes(server->port, 20);
    ASSERT_EQ(first.size(), 20u);
    server->process->Terminate();
    ASSERT_TRUE(server->process->WaitExit(kExitTimeout).exited);
  }
  auto server = StartStandalone(config, FaketimePrefix("-3s"), FaketimeEnv());
  ASSERT_TRUE(server) << server.error();
  EXPECT_NE(server->process->Stderr().find("waiting"), std::string::npos)
      << "kleaf did not wait for its clock: " << server->process->Stderr();
  auto next = IssueSnowflakes(server->port, 20);
  ASSERT_EQ(next.size(), 20u);
  EXPECT_GT(next.front(), first.back());
}

TEST_F(ClockE2eTest, ClockSetBackWhileRunningGives503ThenRecovers) {
  if (Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  TempDir dir;
  OffsetFile clock(dir.path());
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("segment.auto_create", "true")
                                                .Yaml());
  auto server = StartStandalone(config, {}, clock.Environment());
  ASSERT_TRUE(server) << server.error();
  auto first = IssueSnowflakes(server->port, 20);
  ASSERT_EQ(first.size(), 20u);

  HttpClient client(server->port);
  // Each request is a fresh look at the clock; wait (by asking) until kleaf notices the change.
  auto ask_until = [&](int want_status, std::chrono::seconds timeout) -> HttpReply {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    HttpReply last;
    while (std::chrono::steady_clock::now() < deadline) {
      auto reply = client.Get("/api/snowflake/get/clock");
      if (!reply) {
        ADD_FAILURE() << reply.error();
        return last;
      }
      last = *reply;
      if (reply->status == want_status) return last;
      if (reply->status != 200 && reply->status != 503) {
        ADD_FAILURE() << "status " << reply->status << ": " << reply->body;
        return last;
      }
      if (reply->status == 200) {
        auto ids = IdsOf(*reply, true, "clock");
        if (ids && ids->front() <= first.back()) {
          ADD_FAILURE() << "ID " << ids->front() << " not above " << first.back();
        }
      }
    }
    return last;
  };

  clock.Set("-10m");
  HttpReply refused = ask_until(503, std::chrono::seconds(10));
  ASSERT_EQ(refused.status, 503) << "snowflake IDs still issued with the clock 10 minutes back: "
                                 << refused.body;
  auto body = nlohmann::json::parse(refused.body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << refused.body;
  EXPECT_EQ(body["error"].value("code", ""), "unavailable") << refused.body;
  EXPECT_NE(body["error"].value("message", "").find("backwards"), std::string::npos)
      << refused.body;
  EXPECT_FALSE(refused.Header("Retry-After").empty());
  // Segment IDs do not depend on the clock.
  auto segment = client.Get("/api/v1/segment/during-skew?count=5");
  ASSERT_TRUE(segment) << segment.error();
  EXPECT_EQ(segment->status, 200) << segment->body;

  clock.Set("+0");
  HttpReply back = ask_until(200, std::chrono::seconds(10));
  ASSERT_EQ(back.status, 200) << "snowflake IDs did not come back with the clock: " << back.body;
  auto ids = IdsOf(back, true, "clock");
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_GT(ids->front(), first.back());

  server->process->Terminate();
  ExitStatus status = server->process->WaitExit(kExitTimeout);
  EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
}

}  // namespace
}  // namespace kleaf::e2e
