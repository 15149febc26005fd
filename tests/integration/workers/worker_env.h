// Test support for the snowflake worker-id registry against the real Kafka broker of
// scripts/test.sh: a registry cluster (one `kleaf allocator`, any number of `kleaf gateway`
// processes) on a topic prefix of its own, short leases, and the registry's view over HTTP.
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
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"

namespace kleaf::integration::workers {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Env = std::vector<std::pair<std::string, std::string>>;

inline constexpr char kNoBrokerMessage[] =
    "KLEAF_TEST_KAFKA_BOOTSTRAP is not set: the worker registry tests need a real Kafka broker; "
    "run them through scripts/test.sh (it starts one with compose/kafka.sh and exports "
    "KLEAF_TEST_KAFKA_BOOTSTRAP, _PORT, _DIR and _SCRIPT)";

// The short lease settings of these tests (validation: ttl >= 2 * renew + margin, margin >= skew).
inline constexpr int64_t kLeaseTtlMs = 6000;
inline constexpr int64_t kRenewIntervalMs = 1000;
inline constexpr int64_t kSafetyMarginMs = 2000;
inline constexpr int64_t kMaxClockSkewMs = 1000;

// A snowflake bit layout, to split IDs in the test the way the cluster composed them.
struct Layout {
  int timestamp_bits = 41;
  int worker_bits = 10;
  int sequence_bits = 12;
  int64_t epoch_ms = 1288834974657;  // Leaf's
  int64_t workers() const { return int64_t{1} << worker_bits; }
  // The config keys that select this layout (for allocators and gateways alike).
  std::map<std::string, std::string> Keys() const;
};
// 4 worker ids: 41 + 2 + 20 bits.
inline constexpr Layout kTinyLayout{41, 2, 20, 1288834974657};

struct IdParts {
  int64_t timestamp_ms = 0;
  int64_t worker_id = 0;
  int64_t sequence = 0;
};
IdParts Split(const Layout& layout, int64_t id);

// Evaluates `done` every 20 ms until it holds or `timeout` passes; its last value.
bool WaitUntil(const std::function<bool()>& done, milliseconds timeout);
double SecondsSince(SteadyClock::time_point start);
// Milliseconds since the Unix epoch of "2020-05-02T12:13:44.602Z" (kleaf's log format).
std::optional<int64_t> ParseUtcMs(std::string_view text);
// How often `needle` occurs in `text`.
int Count(std::string_view text, std::string_view needle);
// The last `lines` lines of `text`.
std::string LastLines(const std::string& text, int lines);

// What GET /api/v1/workers answered.
struct WorkersView {
  std::string source;
  int64_t leased = -1;
  int64_t free = -1;
  int64_t worker_id = -1;     // node.worker_id: this gateway's
  int64_t valid_for_ms = -1;  // node.valid_for_ms: until it stops issuing without a renewal
  std::string body;
};
std::expected<WorkersView, std::string> GetWorkers(uint16_t port);

// `count` snowflake IDs of `tag` in one request (the Leaf-compatible route when count is 1).
std::expected<std::vector<int64_t>, std::string> GetSnowflakes(uint16_t port,
                                                               const std::string& tag, int count);

// "[lease] claimed worker id N (not before T)" of a gateway's log.
struct Claim {
  int64_t worker_id = -1;
  int64_t not_before_ms = 0;
};
std::vector<Claim> Claims(std::string_view gateway_log);

// One kleaf process of the cluster, restartable on the same config and state.
struct Node {
  std::string name;  // also its node.id
  bool gateway = true;
  std::filesystem::path config;
  std::filesystem::path state;
  std::unique_ptr<e2e::KleafProcess> process;  // the current run
  uint16_t port = 0;                           // gateways: HTTP port of the current run
  std::string earlier_logs;                    // stderr of earlier runs

  std::string Log() const { return process ? process->Stderr() : std::string(); }
  // The claim of the current run, once logged.
  std::optional<Claim> CurrentClaim() const;
};

// How a start went that was expected to fail.
struct Refusal {
  e2e::ExitStatus status;
  std::string out;
  std::string err;
  double seconds = 0;  // from spawn to exit
};

// One allocator and any number of gateways on a topic prefix of this test only, configs and state
// under one temp dir. Partitions: 4 requests/state, 4 replies. The destructor kills what still
// runs and, when the test failed, prints the logs.
class RegistryCluster {
 public:
  static constexpr int kPartitions = 4;
  static constexpr int kReplyPartitions = 4;

  // KLEAF_TEST_KAFKA_BOOTSTRAP; nullopt when no broker is configured.
  static std::optional<std::string> BrokerBootstrap();
  // `name` goes into the topic prefix; `overrides` are config keys for every node (layout, lease
  // settings), on top of this file's short lease settings.
  RegistryCluster(std::string bootstrap, const std::string& name,
                  std::map<std::string, std::string> overrides = {});
  ~RegistryCluster();
  RegistryCluster(const RegistryCluster&) = delete;
  RegistryCluster& operator=(const RegistryCluster&) = delete;

  const std::filesystem::path& dir() const { return dir_.path(); }

  // Starts the allocator and waits until it serves every partition.
  std::expected<void, std::string> StartAllocator(milliseconds timeout = seconds(90));

  // A gateway named `name` (its node.id), with `overrides` on top of the cluster's keys.
  Node& AddGateway(const std::string& name, std::map<std::string, std::string> overrides = {});
  // Rewrites a node's config with more keys (e.g. a different state path).
  void Reconfigure(Node& node, std::map<std::string, std::string> overrides);
  // Starts (or restarts on the same config and state) `node` behind `prefix` with `env` and waits
  // for "kleaf gateway listening on http://HOST:PORT".
  std::expected<void, std::string> StartGateway(Node& node, std::vector<std::string> prefix = {},
                                                Env env = {}, milliseconds timeout = seconds(60));
  // Starts all of `nodes` at once (their claims race) and waits until each listens.
  std::expected<void, std::string> StartGateways(const std::vector<Node*>& nodes,
                                                 milliseconds timeout = seconds(60));
  // Starts `node` expecting it to exit: its exit status and output. An error as soon as it prints
  // its listening line instead, or if it still runs at the deadline.
  std::expected<Refusal, std::string> StartExpectingExit(Node& node,
                                                         std::vector<std::string> prefix = {},
                                                         Env env = {},
                                                         milliseconds timeout = seconds(60));
  // SIGTERM, then waits for the exit.
  e2e::ExitStatus Stop(Node& node, milliseconds timeout = seconds(20));

  // `kleaf decode ID --config <node's config>`: the worker id it reports.
  std::expected<int64_t, std::string> DecodeWorkerId(const Node& node, int64_t id) const;

  // Every node's log tail, for failure messages.
  std::string Logs() const;

 private:
  e2e::TestConfig Config(const std::string& node_id, const std::filesystem::path& state) const;
  std::expected<void, std::string> Spawn(Node& node, std::vector<std::string> prefix, Env env);
  std::expected<void, std::string> WaitListening(Node& node, SteadyClock::time_point deadline);

  const std::string bootstrap_;
  const std::map<std::string, std::string> overrides_;
  e2e::TempDir dir_;
  std::string prefix_;
  std::deque<Node> nodes_;  // stable addresses
  Node* allocator_ = nullptr;
  int gateways_ = 0;  // added so far: the next one's reply partition
  // Each gateway's own keys (AddGateway, Reconfigure).
  std::map<const Node*, std::map<std::string, std::string>> node_overrides_;
};

// Fixture base: skips every test when no broker is configured.
class WorkerRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override;
  std::string bootstrap_;
};

// Every element of `ids` (any order) is distinct; else a message naming a duplicate.
std::optional<std::string> FindDuplicate(std::vector<int64_t> ids);
// `ids` strictly increase; else a message naming the first place they do not.
std::optional<std::string> FindNonIncreasing(const std::vector<int64_t>& ids);

}  // namespace kleaf::integration::workers
