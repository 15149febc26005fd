// Issue 17 against the real binary: the compose routes bound exactly the IDs issued between two
// times (snowflake, UUIDv7, ULID), `kleaf compose` agrees with them, and the UUIDv7s and ULIDs
// kleaf serves are read correctly by an implementation that is not kleaf's (Python's `uuid`
// module and a Crockford decoder written for the test: check_uuid7_ulid.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;

constexpr int64_t kWorkerId = 619;

// An RFC 3339 text of `ms` at UTC+08:00 ("2026-11-24T18:00:00.123+08:00").
std::string Rfc3339PlusEight(int64_t ms) {
  const int64_t local = ms + 8 * 3600 * 1000;
  std::time_t secs = static_cast<std::time_t>(local / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof(out), "%s.%03d+08:00", buf, static_cast<int>(local % 1000));
  return out;
}

int64_t CrockfordPrefix(const std::string& text, size_t chars) {
  const std::string alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  int64_t value = 0;
  for (size_t i = 0; i < chars; ++i)
    value = value * 32 + static_cast<int64_t>(alphabet.find(text[i]));
  return value;
}

// One kind of ID as the test reads it: its route, the millisecond it carries, and its order.
struct Kind {
  std::string name;
  std::function<int64_t(const std::string&)> timestamp_ms;
  std::function<bool(const std::string&, const std::string&)> less;
};

std::vector<Kind> Kinds() {
  return {
      {"snowflake",
       [](const std::string& id) { return SplitDefaultSnowflake(std::stoll(id)).timestamp_ms; },
       [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); }},
      // The first 48 bits: 12 hex digits around the first dash.
      {"uuid7",
       [](const std::string& id) {
         return std::stoll(id.substr(0, 8) + id.substr(9, 4), nullptr, 16);
       },
       std::less<std::string>()},
      // 26 characters are 130 bits: the first 10 are 2 zero bits and the 48-bit timestamp.
      {"ulid", [](const std::string& id) { return CrockfordPrefix(id, 10); },
       std::less<std::string>()},
  };
}

std::vector<std::string> Fetch(HttpClient& client, const std::string& kind, int count) {
  auto reply = client.Get("/api/v1/" + kind + "/range?count=" + std::to_string(count));
  EXPECT_TRUE(reply) << reply.error();
  if (!reply) return {};
  EXPECT_EQ(reply->status, 200) << reply->body;
  json j = json::parse(reply->body, nullptr, false);
  std::vector<std::string> ids;
  if (!j.is_object() || !j["ids"].is_array()) {
    ADD_FAILURE() << reply->body;
    return ids;
  }
  for (const auto& id : j["ids"]) ids.push_back(id.get<std::string>());
  EXPECT_EQ(ids.size(), static_cast<size_t>(count));
  return ids;
}

std::string Composed(HttpClient& client, const std::string& kind, const std::string& time) {
  auto reply = client.Get("/api/v1/" + kind + "/compose/" + time);
  EXPECT_TRUE(reply) << reply.error();
  if (!reply) return "";
  EXPECT_EQ(reply->status, 200) << time << ": " << reply->body;
  json j = json::parse(reply->body, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.size() == 1 && j["id"].is_string()) << reply->body;
  return j.is_object() && j["id"].is_string() ? j["id"].get<std::string>() : "";
}

class Id128E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ =
        dir_.WriteFile("kleaf.yaml", TestConfig(dir_.path() / "state")
                                         .Set("snowflake.worker_id", std::to_string(kWorkerId))
                                         .Yaml());
    auto server = StartStandalone(config_);
    ASSERT_TRUE(server) << server.error();
    server_ = std::move(*server);
  }

  TempDir dir_;
  std::filesystem::path config_;
  Server server_;
};

// Three groups of IDs, each issued in later milliseconds than the one before (the test asks for
// single IDs until the server's millisecond has moved on: no sleeps); composing the first
// millisecond of the middle group and the one after it must select exactly the middle group.
TEST_F(Id128E2eTest, ComposedBoundsSelectExactlyTheIdsIssuedBetweenThem) {
  HttpClient client(server_.port);
  for (const Kind& kind : Kinds()) {
    SCOPED_TRACE(kind.name);
    std::vector<std::string> before = Fetch(client, kind.name, 200);
    ASSERT_FALSE(before.empty());
    auto newest_ms = [&](const std::vector<std::string>& ids) {
      int64_t newest = 0;
      for (const auto& id : ids) newest = std::max(newest, kind.timestamp_ms(id));
      return newest;
    };
    // Moves on to the next group once an ID is later than `last_ms`; earlier ones stay in `group`.
    auto next_group = [&](std::vector<std::string>& group, int64_t last_ms) {
      std::vector<std::string> next;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (next.empty() && std::chrono::steady_clock::now() < deadline) {
        for (const auto& id : Fetch(client, kind.name, 1)) {
          (kind.timestamp_ms(id) > last_ms ? next : group).push_back(id);
        }
      }
      EXPECT_FALSE(next.empty()) << "the server's millisecond did not move on";
      return next;
    };
    const int64_t before_ms = newest_ms(before);
    std::vector<std::string> middle = next_group(before, before_ms);
    for (int i = 0; i < 3; ++i) {
      auto more = Fetch(client, kind.name, 300);
      middle.insert(middle.end(), more.begin(), more.end());
    }
    const int64_t middle_ms = newest_ms(middle);
    std::vector<std::string> after = next_group(middle, middle_ms);
    auto more = Fetch(client, kind.name, 200);
    after.insert(after.end(), more.begin(), more.end());

    // The lower bound as RFC 3339 with an offset, the upper one as epoch milliseconds.
    const std::string low = Composed(client, kind.name, Rfc3339PlusEight(before_ms + 1));
    const std::string high = Composed(client, kind.name, std::to_string(middle_ms + 1));
    ASSERT_FALSE(low.empty() || high.empty());
    std::set<std::string> selected;
    for (const auto* group : {&before, &middle, &after}) {
      for (const auto& id : *group) {
        if (!kind.less(id, low) && kind.less(id, high)) selected.insert(id);
      }
    }
    EXPECT_EQ(selected, std::set<std::string>(middle.begin(), middle.end()))
        << before.size() << " before, " << middle.size() << " middle, " << after.size() << " after";
  }
}

TEST_F(Id128E2eTest, CliComposeAgreesWithTheRoutes) {
  HttpClient client(server_.port);
  const std::string time = "2026-11-24T10:00:00.123+08:00";
  for (const std::string kind : {"snowflake", "uuid7", "ulid"}) {
    SCOPED_TRACE(kind);
    CommandResult run = RunKleaf({"compose", time, "--kind", kind, "--config", config_.string()});
    ASSERT_TRUE(run.status.exited && run.status.code == 0) << run.status.ToString() << run.err;
    json cli = json::parse(run.out, nullptr, false);
    ASSERT_TRUE(cli.is_object()) << run.out;
    EXPECT_EQ(cli.value("id", ""), Composed(client, kind, time));
    // Escaped as a client library might send it.
    EXPECT_EQ(cli.value("id", ""), Composed(client, kind, "2026-11-24T10%3A00%3A00.123%2B08%3A00"));
  }
  CommandResult plain = RunKleaf({"compose", "1795485600123"});
  ASSERT_TRUE(plain.status.exited && plain.status.code == 0) << plain.err;
  EXPECT_EQ(json::parse(plain.out, nullptr, false).value("id", ""),
            Composed(client, "snowflake", time));
  for (const std::string bad : {"yesterday", "2000-01-01T00:00:00Z"}) {
    CommandResult refused = RunKleaf({"compose", bad});
    EXPECT_TRUE(refused.status.exited && refused.status.code == 2)
        << bad << ": " << refused.status.ToString() << refused.out;
    EXPECT_NE(refused.err.find("time"), std::string::npos) << refused.err;
  }
}

TEST_F(Id128E2eTest, ComposeOutsideTheLayoutIsABadRequestNamingTheRange) {
  HttpClient client(server_.port);
  for (const std::string time : {"2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"}) {
    auto reply = client.Get("/api/v1/snowflake/compose/" + time);
    ASSERT_TRUE(reply) << reply.error();
    EXPECT_EQ(reply->status, 400) << reply->body;
    json j = json::parse(reply->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << reply->body;
    EXPECT_EQ(j["error"].value("code", ""), "invalid_argument");
    EXPECT_NE(j["error"].value("message", "").find("2010-11-04T01:42:54.657Z"), std::string::npos)
        << reply->body;
  }
  auto malformed = client.Get("/api/v1/uuid7/compose/noon");
  ASSERT_TRUE(malformed) << malformed.error();
  EXPECT_EQ(malformed->status, 400) << malformed->body;
}

// Python's `uuid` module reads the UUIDv7s (version, variant, canonical text), a Crockford decoder
// written from the ULID specification reads the ULIDs; both check the timestamp against the time
// of the request, the order and the worker id bits.
TEST_F(Id128E2eTest, AnIndependentImplementationReadsTheUuid7sAndUlids) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not installed (scripts/install-deps.sh --test installs it)";
  }
  HttpClient client(server_.port);
  const int64_t from_ms = WallClockMs();
  std::string uuids;
  std::string ulids;
  for (int i = 0; i < 4; ++i) {
    for (const auto& id : Fetch(client, "uuid7", 1000)) uuids += id + "\n";
    for (const auto& id : Fetch(client, "ulid", 1000)) ulids += id + "\n";
  }
  const int64_t to_ms = WallClockMs();
  const std::string script = std::string(KLEAF_E2E_SOURCE_DIR) + "/check_uuid7_ulid.py";
  auto run = [&](const std::string& uuid_text, const std::string& ulid_text) {
    const auto uuid_file = dir_.WriteFile("uuid7.txt", uuid_text);
    const auto ulid_file = dir_.WriteFile("ulid.txt", ulid_text);
    const auto output = dir_.path() / "check.out";
    const std::string command = "python3 '" + script + "' --uuid7 '" + uuid_file.string() +
                                "' --ulid '" + ulid_file.string() + "' --from-ms " +
                                std::to_string(from_ms) + " --to-ms " + std::to_string(to_ms) +
                                " --worker " + std::to_string(kWorkerId) + " > '" +
                                output.string() + "' 2>&1";
    const int status = std::system(command.c_str());
    return std::make_pair(status, ReadFile(output));
  };
  auto [status, output] = run(uuids, ulids);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("checked 4000 UUIDv7s and 4000 ULIDs: 0 problems"), std::string::npos)
      << output;

  // The checker can fail: a UUIDv4, and a ULID from 2016 after today's.
  auto [bad_status, bad_output] =
      run(uuids + "0190a6f2-3c4d-4e5f-8a6b-7c8d9e0f1a2b\n", ulids + "01ARZ3NDEKTSV4RRFFQ69G5FAV\n");
  EXPECT_NE(bad_status, 0) << bad_output;
  EXPECT_NE(bad_output.find("version 4"), std::string::npos) << bad_output;
  EXPECT_NE(bad_output.find("does not follow"), std::string::npos) << bad_output;
}

}  // namespace
}  // namespace kleaf::e2e
