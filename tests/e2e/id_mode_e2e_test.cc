// Obfuscated tags with the real binary (issue 17): millions of IDs across kill -9 restarts are
// unique, positive and unordered; the permutation's key, read back from the store after the
// run, decodes them to counters, and appears in no answer of any route and no log line.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "allocator/id_format.h"
#include "state/store.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;

constexpr int kRounds = 3;  // the first start, then a restart after each kill -9
constexpr int64_t kIdsPerTagPerRound = 400000;
constexpr int64_t kBatch = 10000;

// Every ID of `tag` fetched in batches of kBatch, in the order served.
void Fetch(HttpClient& client, const std::string& tag, int64_t n, std::vector<int64_t>& out) {
  for (int64_t got = 0; got < n; got += kBatch) {
    auto reply = client.Get("/api/v1/segment/" + tag + "?count=" + std::to_string(kBatch));
    ASSERT_TRUE(reply) << reply.error();
    ASSERT_EQ(reply->status, 200) << reply->body;
    auto ids = IdsOf(*reply, false, tag);
    ASSERT_TRUE(ids) << ids.error();
    out.insert(out.end(), ids->begin(), ids->end());
  }
}

double IncreasingPairs(const std::vector<int64_t>& ids) {
  size_t up = 0;
  for (size_t i = 1; i < ids.size(); ++i) up += ids[i] > ids[i - 1];
  return static_cast<double>(up) / static_cast<double>(ids.size() - 1);
}

TEST(IdModeE2eTest, ObfuscatedIdsStayUniqueAcrossKillNineAndTheKeyIsNeverShown) {
  TempDir dir;
  const auto state_dir = dir.path() / "state";
  // Tags created on first use get obfuscated_time (the config's default mode); "orders" is
  // created obfuscated through the admin API. Trace logs: the key must not be in any line.
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(state_dir)
                                                .Set("log.level", "trace")
                                                .Set("segment.auto_create", "true")
                                                .Set("segment.default_id_mode", "obfuscated_time")
                                                .Set("segment.default_step", "5000")
                                                .Set("segment.max_step", "50000")
                                                .Yaml());
  std::map<std::string, std::vector<int64_t>> served;  // per tag, in the order served
  std::string answers;                                 // every API answer and log line
  const Headers admin = Bearer(kAdminToken);

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    HttpClient client(server->port);
    if (round == 0) {
      auto put =
          client.Put("/api/v1/tags/orders", R"({"step":5000,"id_mode":"obfuscated"})", admin);
      ASSERT_TRUE(put) << put.error();
      ASSERT_EQ(put->status, 200) << put->body;
      EXPECT_EQ(json::parse(put->body).value("id_mode", ""), "obfuscated");
      answers += put->body;
    }
    // A live obfuscated tag's mode cannot change (IDs of two modes could be equal).
    auto change = client.Put("/api/v1/tags/orders", R"({"id_mode":"plain"})", admin);
    ASSERT_TRUE(change) << change.error();
    EXPECT_EQ(change->status, 409) << change->body;

    for (const std::string tag : {"orders", "events"}) {
      Fetch(client, tag, kIdsPerTagPerRound, served[tag]);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const std::string target : {"/api/v1/tags", "/api/v1/tags/orders", "/api/v1/tags/events",
                                     "/db", "/cache", "/api/v1/status", "/metrics", "/",
                                     "/api/segment/get/orders", "/api/segment/get/events"}) {
      auto reply = client.Get(target, admin);
      ASSERT_TRUE(reply) << target << ": " << reply.error();
      EXPECT_EQ(reply->status, 200) << target << ": " << reply->body;
      answers += reply->body;
    }
    ExitStatus status = server->process->KillAndWait();
    EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
    answers += server->process->Stdout();
    answers += server->process->Stderr();
  }

  // The records as the store holds them: the keys, and the counters the IDs must decode to.
  auto store = state::Store::Open(state_dir.string());
  ASSERT_TRUE(store) << store.error().message;
  const int64_t hour_now = (WallClockMs() - allocator::kTimePrefixEpochMs) / 3600000;
  for (const auto& [tag, ids] : served) {
    SCOPED_TRACE(tag);
    auto record = (*store)->GetTag(tag);
    ASSERT_TRUE(record && record->has_value());
    const state::TagRecord& r = **record;
    EXPECT_EQ(r.id_mode,
              tag == "orders" ? state::IdMode::kObfuscated : state::IdMode::kObfuscatedTime);
    ASSERT_EQ(r.id_key.size(), 32u);
    EXPECT_EQ(answers.find(r.id_key), std::string::npos) << "the key of " << tag << " was shown";
    auto format = allocator::IdFormat::Of(r);
    ASSERT_TRUE(format && *format);

    ASSERT_EQ(ids.size(), static_cast<size_t>(kRounds * kIdsPerTagPerRound));
    std::unordered_set<int64_t> unique(ids.begin(), ids.end());
    EXPECT_EQ(unique.size(), ids.size()) << "duplicates among the IDs of " << tag;
    std::unordered_set<int64_t> counters;
    for (int64_t id : ids) {
      ASSERT_GT(id, 0);
      auto counter = (*format)->Unmap(id);
      ASSERT_TRUE(counter) << counter.error().message;
      ASSERT_GE(*counter, r.id_base);
      ASSERT_LT(*counter, r.max_id) << "ID " << id << " is no image of a reserved counter";
      counters.insert(*counter);
      if (r.id_mode == state::IdMode::kObfuscatedTime) {
        const int64_t hour = id >> allocator::kTimeCounterBits;
        ASSERT_TRUE(hour == hour_now || hour == hour_now - 1) << id;
      }
    }
    EXPECT_EQ(counters.size(), ids.size());
    if (r.id_mode == state::IdMode::kObfuscated) {
      // Served one after another, yet up or down like coin flips (sd about 0.0005 here).
      EXPECT_NEAR(IncreasingPairs(ids), 0.5, 0.01);
    }
  }
}

}  // namespace
}  // namespace kleaf::e2e
