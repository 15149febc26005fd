// Integration test support: the real Kafka broker that scripts/test.sh started, and kleaf clusters
// of real `kleaf allocator` and `kleaf gateway` processes on a topic prefix of their own, whose
// logs tell which allocator serves which partition.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"

namespace kleaf::integration {

using SteadyClock = std::chrono::steady_clock;

inline constexpr char kNoBrokerMessage[] =
    "KLEAF_TEST_KAFKA_BOOTSTRAP is not set: the integration tests need a real Kafka broker; run "
    "them through scripts/test.sh (it starts one with compose/kafka.sh and exports "
    "KLEAF_TEST_KAFKA_BOOTSTRAP, _PORT, _DIR and _SCRIPT)";

// The broker of scripts/test.sh, as its environment variables describe it.
struct KafkaBroker {
  std::string bootstrap;  // KLEAF_TEST_KAFKA_BOOTSTRAP, host:port
  std::string port;       // KLEAF_TEST_KAFKA_PORT
  std::string dir;        // KLEAF_TEST_KAFKA_DIR: the run directory of compose/kafka.sh
  std::string script;     // KLEAF_TEST_KAFKA_SCRIPT: compose/kafka.sh

  // nullopt when KLEAF_TEST_KAFKA_BOOTSTRAP is unset.
  static std::optional<KafkaBroker> FromEnvironment();

  // `kafka.sh stop --dir D` (SIGTERM, clean shutdown; the data stays).
  std::expected<void, std::string> Stop() const;
  // `kafka.sh start --port P --dir D`: returns once the broker answers a metadata request. Does
  // nothing but wait if it already runs.
  std::expected<void, std::string> Start() const;
};

// Restarts the broker when it goes out of scope, whatever happened in between: later tests need it.
class BrokerRestartGuard {
 public:
  explicit BrokerRestartGuard(const KafkaBroker& broker) : broker_(broker) {}
  ~BrokerRestartGuard();
  BrokerRestartGuard(const BrokerRestartGuard&) = delete;
  BrokerRestartGuard& operator=(const BrokerRestartGuard&) = delete;

 private:
  const KafkaBroker& broker_;
};

// Freezes the broker with SIGSTOP (as a long GC pause or a stalled disk would): connections stay
// open and nothing is answered. Thaws it (SIGCONT) at Thaw() or when it goes out of scope,
// whatever happened in between, and waits until it creates topics again (up to 60 s).
class BrokerFreeze {
 public:
  explicit BrokerFreeze(const KafkaBroker& broker);  // reads the broker's pid file
  ~BrokerFreeze() { Thaw(); }
  BrokerFreeze(const BrokerFreeze&) = delete;
  BrokerFreeze& operator=(const BrokerFreeze&) = delete;
  bool found() const { return pid_ > 0; }
  bool Freeze();  // false if the signal could not be sent
  void Thaw();    // once; then a no-op

 private:
  const KafkaBroker& broker_;
  int pid_ = 0;
  bool frozen_ = false;
};

// Runs `argv` (no shell) to completion with stdin from /dev/null; its exit code and what it printed
// (stdout and stderr together). Kills it at the deadline.
struct ScriptResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;
};
ScriptResult RunScript(const std::vector<std::string>& argv, std::chrono::seconds timeout);

// Evaluates `done` every 20 ms until it holds or `timeout` passes; its last value.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout);

double SecondsSince(SteadyClock::time_point start);

// How often `needle` occurs in `text`.
int Count(std::string_view text, std::string_view needle);

// "[allocator] partition N restored (K records, offsets A to B) in X ms; serving".
struct RestoreLine {
  int32_t partition = 0;
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;
  int64_t millis = 0;
};
std::vector<RestoreLine> Restores(std::string_view allocator_log);

// The partitions an allocator's log says it serves now: each "restored ...; serving" line adds
// its partition, each "no longer served" line removes it.
std::set<int32_t> ServedPartitions(std::string_view allocator_log);

// The lines of `log` that contain `needle`.
std::vector<std::string> LinesWith(std::string_view log, std::string_view needle);

// Needles of the allocator's log lines about partition p.
std::string RestoredNeedle(int32_t p);        // "[allocator] partition p restored"
std::string NoLongerServedNeedle(int32_t p);  // "[allocator] partition p no longer served"
std::string AssignedNeedle(int32_t p);        // "[allocator] partition p assigned"

// The first of `base`-0, `base`-1, ... that kleaf puts on partition p of `partitions`.
std::string TagOnPartition(const std::string& base, int32_t partition, int32_t partitions);

// A tag as the admin API shows it.
struct TagState {
  int64_t max_id = 0;
  int64_t step = 0;
  std::string description;
  bool operator==(const TagState&) const = default;
};
// Admin calls on a gateway (or standalone) at 127.0.0.1:port with the tests' admin token.
std::expected<std::map<std::string, TagState>, std::string> ListTags(uint16_t port);
std::expected<TagState, std::string> GetTag(uint16_t port, const std::string& tag);
std::expected<TagState, std::string> PutTag(uint16_t port, const std::string& tag,
                                            const std::string& body);
std::expected<void, std::string> DeleteTag(uint16_t port, const std::string& tag);
// One request for `count` IDs of `tag` (the Leaf-compatible route when count is 1).
std::expected<std::vector<int64_t>, std::string> FetchIds(uint16_t port, const std::string& tag,
                                                          int count);

// One kleaf process of a cluster, restartable on the same config and state.
struct Node {
  enum class Role { kAllocator, kGateway };
  std::string name;  // also its node.id
  Role role = Role::kAllocator;
  std::filesystem::path config;
  std::filesystem::path state;
  std::unique_ptr<e2e::KleafProcess> process;  // the current run
  uint16_t port = 0;  // HTTP port of the current run (allocators: ops routes)
  std::string earlier_logs;                    // stderr of the runs before the current one

  std::string Log() const { return process ? process->Stderr() : std::string(); }
};

// A kleaf cluster on its own topic prefix (so tests never see each other's topics), with its
// nodes' configs and state under one temp dir. Partitions: 4 requests/state, 4 replies. The
// destructor kills every node still running and, when the test failed, prints their logs.
class Cluster {
 public:
  static constexpr int32_t kPartitions = 4;
  static constexpr int32_t kReplyPartitions = 4;

  // `overrides` are config keys for every node (e.g. segment.max_step).
  Cluster(const KafkaBroker& broker, const std::string& name,
          std::map<std::string, std::string> overrides = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::string& prefix() const { return prefix_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // A config of this cluster for node `node_id` with state at `state`: bootstrap, prefix,
  // partition counts, session timeout 6 s, info logs (the allocator's ownership lines).
  e2e::TestConfig Config(const std::string& node_id, const std::filesystem::path& state) const;
  // Writes `config` as dir()/file and returns its path.
  std::filesystem::path WriteConfig(const std::string& file, const e2e::TestConfig& config) const;

  Node& AddAllocator(const std::string& name);
  Node& AddGateway(const std::string& name, int32_t reply_partition);

  // Starts every node given (again, if it ran before: same config and state) and waits until each
  // printed its ready line ("kleaf allocator running; http://...", "kleaf gateway listening on
  // http://...").
  std::expected<void, std::string> Start(
      const std::vector<Node*>& nodes,
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Waits until every partition is served by exactly one of `allocators` and each of them serves
  // at least one, by their logs.
  std::expected<void, std::string> WaitBalanced(const std::vector<Node*>& allocators,
                                                std::chrono::milliseconds timeout);
  // The allocator among `allocators` whose log says it serves p now; nullptr if none or several.
  Node* OwnerOf(int32_t p, const std::vector<Node*>& allocators) const;

  // Adds and starts `allocators` allocators (alloc-1, alloc-2, ...) one after the other, each time
  // waiting until the running ones share the partitions, then adds and starts `gateways` gateways
  // (gw-a on reply partition 0, gw-b on 1, ...) and checks that every partition answers.
  struct Nodes {
    std::vector<Node*> allocators;
    std::vector<Node*> gateways;
  };
  std::expected<Nodes, std::string> StartNodes(int allocators, int gateways);

  // Lists the tags through `gateway`: every partition's owner must answer (the logs can say a
  // partition is served by an allocator whose producer was fenced already).
  std::expected<void, std::string> CheckEveryPartitionAnswers(const Node& gateway);

  // Runs `kleaf <args>` to completion.
  e2e::CommandResult Run(std::vector<std::string> args,
                         std::chrono::milliseconds timeout = std::chrono::seconds(120)) const;

  // The tail of every node's log, for failure messages.
  std::string Logs() const;

 private:
  const KafkaBroker broker_;
  const std::map<std::string, std::string> overrides_;
  e2e::TempDir dir_;
  std::string prefix_;
  std::deque<Node> nodes_;  // stable addresses
};

// Fixture base: skips every test when no broker is configured.
class KafkaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  KafkaBroker broker_;
};

}  // namespace kleaf::integration
