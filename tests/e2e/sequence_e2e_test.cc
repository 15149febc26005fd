// Per-key sequences of `kleaf standalone` (I5) under kill -9: clients that each own a set of keys
// ask for single keys and fan-outs over keep-alive connections while the server is killed and
// restarted on the same state. Each client's requests for a key are sequential, so every value it
// receives must be above every value it received for that key before, in any earlier run.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr int kRounds = 4;  // the first start, then a restart after each kill -9
constexpr int kClients = 4;
constexpr uint64_t kKeysPerClient = 150;  // keys c, c + 4, ...: 6 sections of 100 keys in all
constexpr int64_t kValuesPerRound = 20000;

// One client: its keys' last values (kept across runs) and what went wrong.
struct SeqClient {
  uint64_t index = 0;
  std::map<uint64_t, uint64_t> last;  // key -> the last value received
  std::vector<std::string> failures;
  int64_t values = 0;

  uint64_t Key(uint64_t i) const { return index + i * kClients; }
  // Checks a value received for `key` and remembers it.
  void Saw(uint64_t key, const std::string& text) {
    const uint64_t value = std::stoull(text);
    ++values;
    if (auto it = last.find(key); it != last.end() && value <= it->second) {
      failures.push_back("key " + std::to_string(key) + ": " + std::to_string(value) + " after " +
                         std::to_string(it->second));
    }
    last[key] = value;
  }
};

// Sends requests for `c`'s keys until `stop`: a single key, or a fan-out of 10 of them (a key may
// repeat). Errors after `killed` are the kill's; before it, they are failures.
void RunClient(uint16_t port, SeqClient& c, const std::atomic<bool>& stop,
               const std::atomic<bool>& killed, std::atomic<int64_t>& total) {
  HttpClient http(port, seconds(5));
  std::mt19937_64 random(c.index * 7919 + 1);
  auto pick = [&] { return c.Key(random() % kKeysPerClient); };
  while (!stop.load()) {
    const bool fan_out = random() % 4 == 0;
    std::vector<uint64_t> keys;
    std::expected<HttpReply, std::string> reply;
    if (fan_out) {
      json list = json::array();
      for (int i = 0; i < 10; ++i) {
        keys.push_back(pick());
        list.push_back(std::to_string(keys.back()));
      }
      reply = http.Request("POST", "/api/v1/seq/inbox", json{{"keys", list}}.dump(), {});
    } else {
      keys.push_back(pick());
      reply = http.Get("/api/v1/seq/inbox/" + std::to_string(keys.back()));
    }
    if (!reply || reply->status != 200) {
      if (!killed.load()) {
        c.failures.push_back(reply ? "status " + std::to_string(reply->status) + ": " + reply->body
                                   : reply.error());
      }
      if (killed.load() || !reply) return;
      continue;
    }
    const json body = json::parse(reply->body);
    if (fan_out) {
      for (size_t i = 0; i < keys.size(); ++i) c.Saw(keys[i], body["seqs"][i]["seq"]);
    } else {
      c.Saw(keys.front(), body["seq"]);
    }
    total += static_cast<int64_t>(keys.size());
  }
}

TEST(SequenceE2eTest, EachKeysValuesGoUpAcrossKillNineAndRestarts) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  std::vector<SeqClient> clients(kClients);
  for (int i = 0; i < kClients; ++i) clients[i].index = static_cast<uint64_t>(i);

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    HttpClient admin(server->port);
    if (round == 0) {
      // Small sections and steps: many section raises (each a synced write) per round.
      auto put = admin.Put("/api/v1/spaces/inbox", R"({"section_size":100,"step":20})",
                           Bearer(kAdminToken));
      ASSERT_TRUE(put) << put.error();
      ASSERT_EQ(put->status, 200) << put->body;
    } else {
      // What a sync check reads after a crash is never below a value received before it.
      for (auto& c : clients) {
        for (const auto& [key, value] : c.last) {
          if (key % 17 != 0) continue;
          auto current = admin.Get("/api/v1/seq/inbox/" + std::to_string(key) + "/current");
          ASSERT_TRUE(current) << current.error();
          ASSERT_EQ(current->status, 200) << current->body;
          EXPECT_GE(std::stoull(json::parse(current->body)["seq"].get<std::string>()), value)
              << "key " << key << ": current went back after the kill";
        }
      }
    }

    std::atomic<bool> stop{false};
    std::atomic<bool> killed{false};
    std::atomic<int64_t> total{0};
    std::vector<std::thread> threads;
    for (auto& c : clients) {
      threads.emplace_back([&, port = server->port] { RunClient(port, c, stop, killed, total); });
    }
    const auto deadline = std::chrono::steady_clock::now() + seconds(30);
    while (total.load() < kValuesPerRound && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a counter
    }
    EXPECT_GE(total.load(), kValuesPerRound) << "too few values within 30 s";
    // Kill while the clients are still asking.
    killed = true;
    ExitStatus status = server->process->KillAndWait();
    EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
    stop = true;
    for (auto& t : threads) t.join();
  }
  for (const auto& c : clients) {
    for (const auto& f : c.failures) ADD_FAILURE() << "client " << c.index << ": " << f;
    EXPECT_GE(c.values, kRounds * 100) << "client " << c.index;
    EXPECT_EQ(c.last.size(), kKeysPerClient) << "client " << c.index << " missed keys";
  }
}

}  // namespace
}  // namespace kleaf::e2e
