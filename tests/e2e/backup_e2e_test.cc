// Backing up a running `kleaf standalone` (`kleaf state backup DIR`: a RocksDB checkpoint the node
// takes) under load, and restoring it as docs/operations.md ("Backing up and restoring a
// standalone node") says: copy the backup to a new state.path, export it, import it with --bump
// N. Every segment ID and sequence value of the restored node must be above every one served
// before and after the backup was taken. And refused backups: a DIR that is not empty, no admin
// token, a wrong one, a cluster node's config; a running node's store cannot be exported directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/id_stream.h"

namespace kleaf::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

constexpr int kSeqClients = 2;
constexpr uint64_t kKeysPerClient = 60;  // keys c, c + 2, ...: 6 sections of 20 keys
constexpr int64_t kMaxStep = 640;
constexpr int64_t kSpaceStep = 20;

// Clients that ask for values of their own keys of "inbox" until stopped, each request after the
// previous one's answer; every value must be above the last one its key got.
class SeqLoad {
 public:
  explicit SeqLoad(uint16_t port) {
    for (int c = 0; c < kSeqClients; ++c) threads_.emplace_back([this, port, c] { Run(port, c); });
  }
  ~SeqLoad() { Stop(); }
  // The server is about to be killed: errors from now on are not failures.
  void ExpectServerGone() { server_gone_ = true; }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Waits (bounded) until `n` values were served in all.
  bool WaitForValues(int64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= n || running_ == 0; }) && total_ >= n;
  }
  int64_t total() {
    std::lock_guard lock(mu_);
    return total_;
  }
  // After Stop(): the highest value per key, and what went wrong.
  const std::map<uint64_t, uint64_t>& highest() const { return highest_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void Run(uint16_t port, int c) {
    {
      std::lock_guard lock(mu_);
      ++running_;
    }
    HttpClient http(port, seconds(5));
    std::mt19937_64 random(static_cast<uint64_t>(c) * 7919 + 3);
    while (!stop_.load()) {
      const uint64_t key = static_cast<uint64_t>(c) + (random() % kKeysPerClient) * kSeqClients;
      auto reply = http.Get("/api/v1/seq/inbox/" + std::to_string(key));
      std::lock_guard lock(mu_);
      if (!reply || reply->status != 200) {
        if (server_gone_.load()) break;
        failures_.push_back(reply ? std::to_string(reply->status) + " " + reply->body
                                  : reply.error());
        break;
      }
      const uint64_t value = std::stoull(json::parse(reply->body)["seq"].get<std::string>());
      auto& high = highest_[key];
      if (value <= high) {
        failures_.push_back("key " + std::to_string(key) + ": " + std::to_string(value) +
                            " after " + std::to_string(high));
      }
      high = std::max(high, value);
      ++total_;
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    --running_;
    cv_.notify_all();
  }

  std::atomic<bool> stop_{false};
  std::atomic<bool> server_gone_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t total_ = 0;
  int running_ = 0;
  std::map<uint64_t, uint64_t> highest_;
  std::vector<std::string> failures_;
  std::vector<std::thread> threads_;
};

void ExpectExit(const CommandResult& r, int code, const std::string& in_stderr) {
  EXPECT_TRUE(r.status.exited && r.status.code == code) << r.status.ToString() << "\nstdout:\n"
                                                        << r.out << "\nstderr:\n"
                                                        << r.err;
  EXPECT_NE(r.err.find(in_stderr), std::string::npos) << r.err;
}

TEST(BackupE2eTest, ARestoredBackupServesAboveEverythingServedBeforeAndAfterIt) {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  const auto node_config = TestConfig(state)
                               .Set("segment.default_step", "10")
                               .Set("segment.max_step", std::to_string(kMaxStep));
  auto config = dir.WriteFile("kleaf.yaml", node_config.Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  // The command line reaches the node at http.listen: the port it took.
  auto cli_config =
      dir.WriteFile("cli.yaml", TestConfig(node_config)
                                    .Set("http.listen", "127.0.0.1:" + std::to_string(server->port))
                                    .Yaml());
  {
    HttpClient admin(server->port);
    auto tag = admin.Put("/api/v1/tags/orders", R"({"step":10})", Bearer(kAdminToken));
    ASSERT_TRUE(tag && tag->status == 200) << (tag ? tag->body : tag.error());
    auto space =
        admin.Put("/api/v1/spaces/inbox", R"({"section_size":20,"step":20})", Bearer(kAdminToken));
    ASSERT_TRUE(space && space->status == 200) << (space ? space->body : space.error());
  }

  IdStream ids(server->port, 2, {{IdRoute::Kind::kSegment, "orders"}}, 50);
  SeqLoad seqs(server->port);
  ASSERT_TRUE(ids.WaitForIds(2000, seconds(30))) << ids.total() << " IDs";
  ASSERT_TRUE(seqs.WaitForValues(2000, seconds(30))) << seqs.total() << " values";
  // Every section has a record before the backup: a section first used after it is not in it
  // (docs/operations.md says so).
  auto sections_used = [&] {
    HttpClient probe(server->port);
    for (uint64_t section = 0; section < kSeqClients * kKeysPerClient / 20; ++section) {
      auto current =
          probe.Get("/api/v1/seq/inbox/" + std::to_string(section * 20 + 19) + "/current");
      if (!current || current->status != 200 ||
          json::parse(current->body)["seq"].get<std::string>() == "0") {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(sections_used());

  // The backup, while both loads run.
  const fs::path backup = dir.path() / "backups" / "b1";
  fs::create_directories(backup.parent_path());
  auto backed = RunKleaf({"state", "backup", backup.string(), "--config", cli_config.string()}, {},
                         seconds(60));
  ASSERT_TRUE(backed.status.exited && backed.status.code == 0) << backed.status.ToString() << "\n"
                                                               << backed.out << backed.err;
  EXPECT_NE(backed.out.find("into " + backup.string()), std::string::npos) << backed.out;
  ASSERT_TRUE(fs::exists(backup / "CURRENT")) << "not a RocksDB directory";

  // Refused, with nothing lost: the backup is left as it was, no directory is created.
  const auto backup_files = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(backup)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  const auto files_before = backup_files();
  ExpectExit(RunKleaf({"state", "backup", backup.string(), "--config", cli_config.string()}), 1,
             "exists and is not an empty directory");
  EXPECT_EQ(backup_files(), files_before);
  const fs::path other = dir.path() / "backups" / "b2";
  auto no_token = dir.WriteFile("no-token.yaml",
                                TestConfig(dir.path() / "elsewhere")
                                    .Erase("admin.token")
                                    .Set("http.listen", "127.0.0.1:" + std::to_string(server->port))
                                    .Yaml());
  ExpectExit(RunKleaf({"state", "backup", other.string(), "--config", no_token.string()}), 1,
             "no admin token");
  auto wrong_token = dir.WriteFile(
      "wrong-token.yaml", TestConfig(node_config)
                              .Set("admin.token", "not-the-admin-token-0123")
                              .Set("http.listen", "127.0.0.1:" + std::to_string(server->port))
                              .Yaml());
  ExpectExit(RunKleaf({"state", "backup", other.string(), "--config", wrong_token.string()}), 1,
             "401");
  auto cluster = dir.WriteFile(
      "cluster.yaml", TestConfig(node_config).Set("kafka.bootstrap", "127.0.0.1:9").Yaml());
  ExpectExit(RunKleaf({"state", "backup", other.string(), "--config", cluster.string()}), 2,
             "kleaf state export");
  EXPECT_FALSE(fs::exists(other));
  // The running node holds its store: an export of it says to export a backup instead.
  ExpectExit(RunKleaf({"state", "export", (dir.path() / "live.json").string(), "--standalone",
                       "--config", config.string()}),
             1, "kleaf state backup");

  // Serving goes on after the backup: these IDs and values are not in it.
  const int64_t ids_at_backup = ids.total();
  const int64_t values_at_backup = seqs.total();
  ASSERT_TRUE(ids.WaitForIds(ids_at_backup + 2000, seconds(30))) << ids.total() << " IDs";
  ASSERT_TRUE(seqs.WaitForValues(values_at_backup + 2000, seconds(30)))
      << seqs.total() << " values";
  ids.ExpectServerGone();
  seqs.ExpectServerGone();
  ExitStatus status = server->process->KillAndWait();  // the node is lost
  EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
  ids.Stop();
  seqs.Stop();
  for (const auto& f : ids.failures()) ADD_FAILURE() << f;
  for (const auto& f : seqs.failures()) ADD_FAILURE() << f;
  const auto& served = ids.ids().at(IdStream::KeyOf({IdRoute::Kind::kSegment, "orders"}));
  ASSERT_FALSE(served.empty());
  const int64_t highest_id = *std::max_element(served.begin(), served.end());

  // The restore, as documented: N above the IDs handed out since the backup plus two segments of
  // max_step, and above the values of any one section handed out since plus its step. Counted
  // here from the whole run, which is more.
  const int64_t bump = std::max<int64_t>(static_cast<int64_t>(served.size()) + 2 * kMaxStep,
                                         seqs.total() + kSpaceStep) +
                       1;
  const fs::path restored = dir.path() / "restored";
  fs::copy(backup, restored, fs::copy_options::recursive);
  auto restored_config = dir.WriteFile(
      "restored.yaml",
      TestConfig(restored).Set("segment.default_step", "10").Set("segment.max_step", "640").Yaml());
  const auto exported = dir.path() / "backup.json";
  auto exported_run = RunKleaf(
      {"state", "export", exported.string(), "--standalone", "--config", restored_config.string()});
  ASSERT_TRUE(exported_run.status.exited && exported_run.status.code == 0)
      << exported_run.status.ToString() << "\n"
      << exported_run.out << exported_run.err;
  EXPECT_NE(exported_run.out.find("exported 1 tags, 1 spaces and 6 sections"), std::string::npos)
      << exported_run.out;
  auto imported = RunKleaf({"state", "import", exported.string(), "--standalone", "--bump",
                            std::to_string(bump), "--config", restored_config.string()});
  ASSERT_TRUE(imported.status.exited && imported.status.code == 0)
      << imported.status.ToString() << "\n"
      << imported.out << imported.err;
  EXPECT_NE(imported.out.find("1 raised"), std::string::npos) << imported.out;
  EXPECT_NE(imported.out.find("6 sections raised"), std::string::npos) << imported.out;

  auto restarted = StartStandalone(restored_config);
  ASSERT_TRUE(restarted) << restarted.error();
  HttpClient http(restarted->port);
  for (int i = 0; i < 5; ++i) {
    auto reply = http.Get("/api/v1/segment/orders?count=20");
    ASSERT_TRUE(reply && reply->status == 200) << (reply ? reply->body : reply.error());
    auto got = IdsOf(*reply, false, "orders");
    ASSERT_TRUE(got) << got.error();
    for (int64_t id : *got) EXPECT_GT(id, highest_id) << "an ID served before comes again";
  }
  ASSERT_EQ(seqs.highest().size(), kSeqClients * kKeysPerClient) << "keys missed by the load";
  for (const auto& [key, high] : seqs.highest()) {
    auto reply = http.Get("/api/v1/seq/inbox/" + std::to_string(key));
    ASSERT_TRUE(reply && reply->status == 200) << (reply ? reply->body : reply.error());
    const uint64_t value = std::stoull(json::parse(reply->body)["seq"].get<std::string>());
    EXPECT_GT(value, high) << "key " << key << ": a value at or below one served before";
  }
  restarted->process->Terminate();
  EXPECT_TRUE(restarted->process->WaitExit(kExitTimeout).exited);
}

}  // namespace
}  // namespace kleaf::e2e
