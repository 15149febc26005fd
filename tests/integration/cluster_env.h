// The one cluster harness of the integration tests (library kleaf_integration_env): the real Kafka
// broker that scripts/test.sh started, kleaf clusters of real `kleaf allocator` and `kleaf gateway`
// processes on a topic prefix of their own, and what the tests observe of them (/metrics,
// /api/v1/status, /api/v1/workers, the admin API). libfaketime's helpers are e2e's (e2e_env.h).
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
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"

namespace kleaf::integration {

using SteadyClock = std::chrono::steady_clock;

// For ASSERT_TRUE(Ok(call)): a failed call's error in the failure message (a bare std::expected
// prints only "false").
template <typename T>
testing::AssertionResult Ok(const std::expected<T, std::string>& result) {
  if (result) return testing::AssertionSuccess();
  return testing::AssertionFailure() << result.error();
}
// Environment variables added to a node's (e.g. libfaketime's).
using ProcessEnv = std::vector<std::pair<std::string, std::string>>;

inline constexpr char kNoBrokerMessage[] =
    "KLEAF_TEST_KAFKA_BOOTSTRAP is not set: the integration tests need a real Kafka broker; run "
    "them through scripts/test.sh (it starts one with compose/kafka.sh and exports "
    "KLEAF_TEST_KAFKA_BOOTSTRAP, _PORT, _DIR and _SCRIPT)";

// --- The broker ----------------------------------------------------------------------------------

// The broker of scripts/test.sh, as its environment variables describe it.
struct KafkaBroker {
  std::string bootstrap;  // KLEAF_TEST_KAFKA_BOOTSTRAP, host:port
  std::string port;       // KLEAF_TEST_KAFKA_PORT
  std::string dir;        // KLEAF_TEST_KAFKA_DIR: the run directory of compose/kafka.sh
  std::string script;     // KLEAF_TEST_KAFKA_SCRIPT: compose/kafka.sh
  // kafka.replication_factor of the kleaf nodes' configs (Cluster::Config); 0: kleaf's default.
  int replication_factor = 0;

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
  bool Freeze();  // once every thread of the broker is stopped; false if it could not be
  void Thaw();    // once; then a no-op

 private:
  const KafkaBroker& broker_;
  int pid_ = 0;
  bool frozen_ = false;
};

// --- The three-broker cluster --------------------------------------------------------------------

inline constexpr char kNoCluster3Message[] =
    "KLEAF_TEST_KAFKA3_BOOTSTRAP is not set: the cluster3 tests need a three-broker Kafka cluster; "
    "run them through scripts/test.sh (it starts one with compose/kafka.sh cluster-start and "
    "exports KLEAF_TEST_KAFKA3_BOOTSTRAP, _DIR and _SCRIPT)";

// The KRaft cluster of three broker+controller nodes (1, 2, 3) that scripts/test.sh started with
// `kafka.sh cluster-start` (replication factor 3, min.insync.replicas 2), as its environment
// variables describe it. Every call runs kafka.sh and returns when it is done.
struct KafkaCluster3 {
  static constexpr int kNodes = 3;
  std::string bootstrap;  // KLEAF_TEST_KAFKA3_BOOTSTRAP: the three host:port, comma-separated
  std::string dir;        // KLEAF_TEST_KAFKA3_DIR: the cluster dir of kafka.sh
  std::string script;     // KLEAF_TEST_KAFKA3_SCRIPT: compose/kafka.sh

  // nullopt when KLEAF_TEST_KAFKA3_BOOTSTRAP is unset.
  static std::optional<KafkaCluster3> FromEnvironment();

  // What Cluster needs: every node's address, and replication factor 3 for kleaf's topics. It has
  // no dir, so the single broker's Stop, Start and BrokerFreeze refuse it.
  KafkaBroker AsBroker() const;

  // SIGKILL of node `node` (1..3), waiting until it is gone.
  std::expected<void, std::string> Kill(int node) const;
  // SIGTERM (a clean, controlled shutdown), waiting until it is gone.
  std::expected<void, std::string> Stop(int node) const;
  // Starts node `node` if it is down; returns once it answers a metadata request listing itself.
  std::expected<void, std::string> Start(int node) const;
  // Starts every node that is down (and thaws a frozen one); returns once each answers a metadata
  // request that lists all three. Needed after two nodes went down: neither can start alone.
  std::expected<void, std::string> StartAll() const;
  // SIGSTOP / SIGCONT.
  std::expected<void, std::string> Freeze(int node) const;
  std::expected<void, std::string> Thaw(int node) const;
  // The node leading `topic`/`partition` as the first answering node sees it (-1: none).
  std::expected<int, std::string> LeaderOf(const std::string& topic, int32_t partition) const;
  // The active KRaft controller (the metadata quorum's leader). Not Metadata's controller_id,
  // which in KRaft names a random broker.
  std::expected<int, std::string> ActiveController() const;
  // `kafka.sh cluster-status`: one line per node and the active controller, for messages.
  std::string Status() const;
  // kafka.log of node `node`: its last `lines` lines.
  std::string NodeLog(int node, int lines = 40) const;

 private:
  std::expected<std::string, std::string> Call(const std::vector<std::string>& args,
                                               std::chrono::seconds timeout) const;
};

// Starts every stopped node of the cluster when it goes out of scope, whatever happened in
// between (kafka.sh cluster-start): later tests need all three.
class ClusterRestartGuard {
 public:
  explicit ClusterRestartGuard(const KafkaCluster3& kafka) : kafka_(kafka) {}
  ~ClusterRestartGuard();
  ClusterRestartGuard(const ClusterRestartGuard&) = delete;
  ClusterRestartGuard& operator=(const ClusterRestartGuard&) = delete;

 private:
  const KafkaCluster3& kafka_;
};

// Freezes node `node` with SIGSTOP (a long GC pause, a stalled disk): its connections stay open and
// nothing is answered. Thaws it (SIGCONT) at Thaw() or when it goes out of scope, whatever happened
// in between, and waits until all three nodes are listed as brokers again (it was fenced
// meanwhile).
class NodeFreeze {
 public:
  NodeFreeze(const KafkaCluster3& kafka, int node) : kafka_(kafka), node_(node) {}
  ~NodeFreeze() { Thaw(); }
  NodeFreeze(const NodeFreeze&) = delete;
  NodeFreeze& operator=(const NodeFreeze&) = delete;
  std::expected<void, std::string> Freeze();
  void Thaw();  // once; then a no-op

 private:
  const KafkaCluster3& kafka_;
  const int node_;
  bool frozen_ = false;
};

// Runs `argv` (no shell) to completion with stdin from /dev/null; its exit code and what it printed
// (stdout and stderr together). Kills it at the deadline.
struct ScriptResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;
};
ScriptResult RunScript(const std::vector<std::string>& argv, std::chrono::seconds timeout);

// --- Waiting and text ----------------------------------------------------------------------------

// Evaluates `done` every 20 ms until it holds or `timeout` passes; its last value.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout);

double SecondsSince(SteadyClock::time_point start);

// How often `needle` occurs in `text`.
int Count(std::string_view text, std::string_view needle);

// The last `lines` lines of `text` (all of it if shorter), for failure messages.
std::string LastLines(const std::string& text, int lines);

// The lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(std::string_view text, std::string_view needle);

// The first of `base`-0, `base`-1, ... that kleaf puts on partition p of `partitions`.
std::string TagOnPartition(const std::string& base, int32_t partition, int32_t partitions);

// --- Leases ---------------------------------------------------------------------------------

// The short worker leases of the tests (validation: ttl >= 2 * renew + margin, margin >= skew).
inline constexpr int64_t kRenewIntervalMs = 1000;
inline constexpr int64_t kSafetyMarginMs = 2000;
inline constexpr int64_t kMaxClockSkewMs = 1000;
// The workers.* keys of those leases with `ttl_ms`, and a 20 s claim timeout.
std::map<std::string, std::string> ShortLeases(int64_t ttl_ms);

// --- HTTP calls on a node at 127.0.0.1:port ------------------------------------------------------

// A tag as the admin API shows it.
struct TagState {
  int64_t max_id = 0;
  int64_t step = 0;
  std::string description;
  bool operator==(const TagState&) const = default;
};
// `method target` with the tests' admin token (over `transport`); the JSON body of a 200, else an
// error with the status and body.
std::expected<nlohmann::json, std::string> AdminCall(uint16_t port, const std::string& method,
                                                     const std::string& target, std::string body,
                                                     e2e::Transport transport = {});
// Admin calls on a gateway (or standalone) with the tests' admin token.
std::expected<std::map<std::string, TagState>, std::string> ListTags(uint16_t port);
std::expected<TagState, std::string> GetTag(uint16_t port, const std::string& tag);
std::expected<TagState, std::string> PutTag(uint16_t port, const std::string& tag,
                                            const std::string& body);
std::expected<void, std::string> DeleteTag(uint16_t port, const std::string& tag);
// One request for `count` segment IDs of `tag` (the Leaf-compatible route when count is 1).
std::expected<std::vector<int64_t>, std::string> FetchIds(uint16_t port, const std::string& tag,
                                                          int count);
// `count` snowflake IDs of `tag` in one request (the Leaf-compatible route when count is 1).
std::expected<std::vector<int64_t>, std::string> GetSnowflakes(uint16_t port,
                                                               const std::string& tag, int count);

// What GET /api/v1/workers of a gateway answered (the registry's view, through the allocators).
struct WorkersView {
  std::string source;
  int64_t leased = -1;
  int64_t free = -1;
  int64_t worker_id = -1;     // node.worker_id: this gateway's
  int64_t valid_for_ms = -1;  // node.valid_for_ms: until it stops issuing without a renewal
  std::string body;
};
std::expected<WorkersView, std::string> GetWorkers(uint16_t port);

// The snowflake worker id a gateway issues with now, from its /api/v1/status (no Kafka call).
std::expected<int64_t, std::string> WorkerIdOf(uint16_t port);

// A /metrics page, series by series: "name{labels}" (or "name") and its value.
struct Metrics {
  std::map<std::string, double> series;
  // The series `name` with `labels` as rendered (e.g. R"(partition="2")"); nullopt if absent.
  std::optional<double> Value(const std::string& name, const std::string& labels = "") const;
  // Every series of the family `name` summed (e.g. across partitions).
  double Sum(const std::string& name) const;
};
std::expected<Metrics, std::string> ScrapeMetrics(uint16_t port, e2e::Transport transport = {});

// --- Nodes ---------------------------------------------------------------------------------------

// One kleaf process of a cluster, restartable on the same config and state.
struct Node {
  enum class Role { kAllocator, kGateway };
  std::string name;  // also its node.id, unless its config says otherwise
  Role role = Role::kAllocator;
  std::filesystem::path config;
  std::filesystem::path state;
  std::map<std::string, std::string> overrides;  // its own config keys (Cluster::Reconfigure)
  std::unique_ptr<e2e::KleafProcess> process;    // the current run
  uint16_t port = 0;         // HTTP port of the current run (allocators: ops routes)
  std::string earlier_logs;  // stderr of the runs before the current one

  std::string Log() const { return process ? process->Stderr() : std::string(); }
  // The current run has exited (or never started).
  bool Exited() const;
};

// Spawns `node` (again: its earlier run's log is kept) on its config, behind `prefix` with `env`.
std::expected<void, std::string> Spawn(Node& node, ProcessEnv env = {},
                                       std::vector<std::string> prefix = {});
// Waits for the node's ready line on stdout ("kleaf gateway listening on http://HOST:PORT",
// "kleaf allocator running; http://HOST:PORT") and sets its port; an error with its output if it
// exits first or the deadline passes.
std::expected<void, std::string> WaitReady(Node& node, SteadyClock::time_point deadline);
// Spawn + WaitReady.
std::expected<void, std::string> StartNode(
    Node& node, ProcessEnv env = {}, std::vector<std::string> prefix = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// How a node ended that was expected to refuse.
struct Exit {
  e2e::ExitStatus status;
  bool was_ready = false;  // printed its ready line before it exited
  std::string out;
  std::string err;
  double seconds = 0;  // from spawn to exit
};
// Spawns `node` and waits for it to exit by itself; an error if it still runs at the deadline
// (it is killed then).
std::expected<Exit, std::string> StartExpectingExit(
    Node& node, std::chrono::milliseconds timeout = std::chrono::seconds(60), ProcessEnv env = {},
    std::vector<std::string> prefix = {});

// SIGTERM, then waits for the exit.
e2e::ExitStatus Stop(Node& node, std::chrono::milliseconds timeout = std::chrono::seconds(20));

// --- What an allocator serves, from its /metrics -------------------------------------------------

// One partition of the requests topic as an allocator's kleaf_allocator_partition_* series count
// it since its start.
struct PartitionActivity {
  bool serving = false;
  int64_t assignments = 0;  // the group assigned it here
  int64_t takeovers = 0;    // fenced and restored: served from then on
  int64_t releases = 0;     // no longer served (revoked, fenced, failed)
};
std::expected<std::map<int32_t, PartitionActivity>, std::string> AllocatorPartitions(
    const Node& allocator);
// The partitions `allocator` serves now.
std::expected<std::set<int32_t>, std::string> ServedPartitions(const Node& allocator);

// "[allocator] partition N restored (K records, offsets A to B) in X ms; serving": the restore
// report of the allocator's log, the only place that says from which offset a restore read.
struct RestoreLine {
  int32_t partition = 0;
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;
  int64_t millis = 0;
};
std::vector<RestoreLine> Restores(std::string_view allocator_log);

// --- Clusters ------------------------------------------------------------------------------------

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
  virtual ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::string& prefix() const { return prefix_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // A config of this cluster for node `node_id` with state at `state`: bootstrap, prefix,
  // partition counts, the broker's replication factor (if it sets one), session timeout 6 s, info
  // logs, and the cluster's overrides.
  e2e::TestConfig Config(const std::string& node_id, const std::filesystem::path& state) const;
  // Writes `config` as dir()/file and returns its path.
  std::filesystem::path WriteConfig(const std::string& file, const e2e::TestConfig& config) const;

  // A node named `name` with state at dir()/name-state and `overrides` on top of the cluster's.
  Node& AddNode(const std::string& name, Node::Role role,
                std::map<std::string, std::string> overrides = {});
  Node& AddAllocator(const std::string& name);
  // A gateway on `reply_partition`, with snowflake.worker_id one more (a standalone key that
  // cluster gateways ignore: they lease theirs).
  Node& AddGateway(const std::string& name, int32_t reply_partition);
  // Adds `overrides` to the node's own keys and rewrites its config.
  void Reconfigure(Node& node, const std::map<std::string, std::string>& overrides);

  // Starts every node given (again, if it ran before: same config and state) and waits until each
  // printed its ready line.
  std::expected<void, std::string> Start(
      const std::vector<Node*>& nodes,
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Waits until every partition is served by exactly one of `allocators` and each of them serves
  // at least one, by their /metrics.
  std::expected<void, std::string> WaitBalanced(const std::vector<Node*>& allocators,
                                                std::chrono::milliseconds timeout);
  // The allocator among `allocators` that serves p now; nullptr if none or several.
  Node* OwnerOf(int32_t p, const std::vector<Node*>& allocators) const;

  // Adds and starts `allocators` allocators (alloc-1, alloc-2, ...) one after the other, each time
  // waiting until the running ones share the partitions, then adds and starts `gateways` gateways
  // (gw-a on reply partition 0, gw-b on 1, ...) and checks that every partition answers.
  struct Nodes {
    std::vector<Node*> allocators;
    std::vector<Node*> gateways;
  };
  std::expected<Nodes, std::string> StartNodes(int allocators, int gateways);

  // Lists the tags through `gateway`: every partition's owner must answer (an allocator can
  // count a partition as served whose producer was fenced already).
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

// Fixture base of the cluster3 tests: skips every test when no three-broker cluster is configured;
// `broker_` is the cluster as Cluster takes it (KafkaCluster3::AsBroker).
class Kafka3Test : public ::testing::Test {
 protected:
  void SetUp() override;
  KafkaCluster3 kafka_;
  KafkaBroker broker_;
};

// --- Sequences (spaces with section_size 1: one key per section) ---------------------------------

// The first key 0, 1, ... of `space` whose section lies on state partition p.
uint64_t SeqKeyOnPartition(const std::string& space, int32_t p);
// One next value of `key` of `space` through the gateway at `port` (GET /api/v1/seq/...): the
// value, or the status and body of a refusal.
std::expected<uint64_t, std::string> SeqNext(uint16_t port, const std::string& space, uint64_t key);
// Starts `allocator`, then `gateway`, and creates `space` (section_size 1, `step`) through it.
void StartWithSeqSpace(Cluster& cluster, Node& allocator, Node& gateway, const std::string& space,
                       int64_t step);

}  // namespace kleaf::integration
