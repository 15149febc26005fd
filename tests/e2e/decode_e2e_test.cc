// `kleaf decode` and the decode route against the test vectors of docs/architecture.md, and with a
// config that changes the layout.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;

struct Vector {
  std::string id;
  std::string time;
  int64_t worker;
  int64_t sequence;
};

// docs/architecture.md, "Test vectors" (Leaf/Twitter layout).
const std::vector<Vector> kVectors = {
    {"1256557484213448722", "2020-05-02T12:13:44.602Z", 619, 18},
    {"1541815603606036480", "2022-06-28T16:07:40.105Z", 378, 0},
    {"1233161576649121792", "2020-02-27T22:46:45.564Z", 334, 0},
};

std::string IsoUtc(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

json DecodeWithCli(const std::vector<std::string>& args) {
  CommandResult run = RunKleaf(args);
  EXPECT_TRUE(run.status.exited && run.status.code == 0)
      << run.status.ToString() << "\n" << run.err;
  json j = json::parse(run.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << "stdout is not a JSON object: " << run.out;
  return j;
}

TEST(DecodeE2eTest, CliDecodesTheDesignTestVectors) {
  for (const auto& v : kVectors) {
    SCOPED_TRACE(v.id);
    json j = DecodeWithCli({"decode", v.id});
    EXPECT_EQ(j.value("id", ""), v.id);
    EXPECT_EQ(j.value("worker_id", int64_t{-1}), v.worker);
    EXPECT_EQ(j.value("sequence", int64_t{-1}), v.sequence);
    EXPECT_EQ(j.value("time", ""), v.time);
    const int64_t id = std::stoll(v.id);
    EXPECT_EQ(j.value("timestamp_ms", int64_t{0}), (id >> 22) + 1288834974657);
  }
}

TEST(DecodeE2eTest, ConfiguredLayoutChangesTheDecoding) {
  TempDir dir;
  constexpr int64_t kEpoch = 1262304000000;  // 2010-01-01T00:00:00Z
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("snowflake.timestamp_bits", "39")
                                                .Set("snowflake.worker_bits", "13")
                                                .Set("snowflake.sequence_bits", "11")
                                                .Set("snowflake.epoch_ms", std::to_string(kEpoch))
                                                .Set("snowflake.time_unit_ms", "10")
                                                .Yaml());
  const Vector& v = kVectors.front();
  const int64_t id = std::stoll(v.id);
  const int64_t want_ms = (id >> 24) * 10 + kEpoch;
  const int64_t want_worker = (id >> 11) & 0x1FFF;
  const int64_t want_sequence = id & 0x7FF;

  json cli = DecodeWithCli({"decode", v.id, "--config", config.string()});
  EXPECT_EQ(cli.value("timestamp_ms", int64_t{0}), want_ms) << cli.dump();
  EXPECT_EQ(cli.value("time", ""), IsoUtc(want_ms)) << cli.dump();
  EXPECT_EQ(cli.value("worker_id", int64_t{-1}), want_worker) << cli.dump();
  EXPECT_EQ(cli.value("sequence", int64_t{-1}), want_sequence) << cli.dump();
  EXPECT_NE(cli.value("time", ""), v.time);
  EXPECT_NE(cli.value("worker_id", int64_t{-1}), v.worker);

  // A server with that layout decodes the same way, and its own IDs round-trip.
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  auto reply = client.Get("/api/v1/snowflake/decode/" + v.id);
  ASSERT_TRUE(reply) << reply.error();
  ASSERT_EQ(reply->status, 200) << reply->body;
  json http = json::parse(reply->body, nullptr, false);
  EXPECT_EQ(http, cli) << reply->body;

  auto issued = client.Get("/api/snowflake/get/any");
  ASSERT_TRUE(issued) << issued.error();
  auto ids = IdsOf(*issued, true, "any");
  ASSERT_TRUE(ids) << ids.error();
  auto own = client.Get("/api/v1/snowflake/decode/" + std::to_string(ids->front()));
  ASSERT_TRUE(own) << own.error();
  json mine = json::parse(own->body, nullptr, false);
  EXPECT_EQ(mine.value("worker_id", int64_t{-1}), 0) << own->body;
  EXPECT_LT(std::llabs(mine.value("timestamp_ms", int64_t{0}) - WallClockMs()), 60000) << own->body;
  EXPECT_EQ(mine.value("timestamp_ms", int64_t{1}) % 10, kEpoch % 10) << "not on the 10 ms grid";
}

TEST(DecodeE2eTest, BadIdsAreRejected) {
  for (const std::string bad : {"-1", "abc", "12x", "99999999999999999999", ""}) {
    SCOPED_TRACE(bad);
    CommandResult run = RunKleaf({"decode", bad});
    EXPECT_TRUE(run.status.exited && run.status.code != 0) << run.status.ToString() << run.out;
  }
}

TEST(DecodeE2eTest, DecodeRouteMatchesTheVectors) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  for (const auto& v : kVectors) {
    auto reply = client.Get("/api/v1/snowflake/decode/" + v.id);
    ASSERT_TRUE(reply) << reply.error();
    ASSERT_EQ(reply->status, 200) << reply->body;
    json j = json::parse(reply->body, nullptr, false);
    EXPECT_EQ(j.value("id", ""), v.id);
    EXPECT_EQ(j.value("time", ""), v.time);
    EXPECT_EQ(j.value("worker_id", int64_t{-1}), v.worker);
    EXPECT_EQ(j.value("sequence", int64_t{-1}), v.sequence);
  }
  for (const std::string bad : {"-1", "abc", "99999999999999999999"}) {
    auto reply = client.Get("/api/v1/snowflake/decode/" + bad);
    ASSERT_TRUE(reply) << reply.error();
    EXPECT_EQ(reply->status, 400) << bad << ": " << reply->body;
  }
}

}  // namespace
}  // namespace kleaf::e2e
