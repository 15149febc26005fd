// Test support for the operator-mistakes suite (issue 11): nodes of a Cluster started by hand
// (with an environment, behind a command prefix, or expected to refuse), snowflake client load,
// Kafka's own Admin API for what an operator does to topics, and the duplicate report every
// scenario prints.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration::mistakes {

using ProcessEnv = std::vector<std::pair<std::string, std::string>>;

// The message substrings the product promises (issue 11; exact, case-sensitive).
inline constexpr char kClaimedLine[] = "[lease] claimed worker id";
inline constexpr char kLostLine[] = "lost worker id";
inline constexpr char kArrivedOnPartition[] = "arrived on partition";
inline constexpr char kPartitionsAdded[] = "partitions were added";
inline constexpr char kRecreated[] = "recreated";
inline constexpr char kHoldsStateOf[] = "holds the state of";

// Short leases (validation: ttl >= 2 * renew + margin, margin >= skew).
inline constexpr int64_t kRenewIntervalMs = 1000;
inline constexpr int64_t kSafetyMarginMs = 2000;
inline constexpr int64_t kMaxClockSkewMs = 1000;
std::map<std::string, std::string> ShortLeases(int64_t ttl_ms);

// Spawns `node` (again: its earlier run's log is kept) on its config, behind `prefix` with `env`.
std::expected<void, std::string> Spawn(Node& node, ProcessEnv env = {},
                                       std::vector<std::string> prefix = {});
// Waits for the node's ready line (gateway: "listening on", allocator: "running") and sets its
// port; an error with its output if it exits first or the deadline passes.
std::expected<void, std::string> WaitReady(Node& node, std::chrono::milliseconds timeout);
// Spawn + WaitReady.
std::expected<void, std::string> StartNode(Node& node, ProcessEnv env = {},
                                           std::vector<std::string> prefix = {},
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
std::expected<Exit, std::string> StartExpectingExit(Node& node, std::chrono::milliseconds timeout,
                                                    ProcessEnv env = {});

// The worker ids of "[lease] claimed worker id N" lines of `log`, in order.
std::vector<int64_t> ClaimedWorkerIds(const std::string& log);

// Client threads fetching IDs from one gateway (count= per request, keep-alive, each client
// cycling through `tags`) until Stop() or until each made max_requests requests. Keeps every ID
// served, whatever its order (a reply out of order is evidence, not noise).
class IdLoad {
 public:
  enum class Mode { kSnowflake, kSegment };
  struct Options {
    std::string name;
    uint16_t port = 0;
    Mode mode = Mode::kSnowflake;
    std::vector<std::string> tags = {"sf"};
    int threads = 1;
    int count = 1000;
    std::chrono::milliseconds pause{0};  // between two requests of one client: paces the load
    int64_t max_requests = 1000000;
  };
  explicit IdLoad(Options options);
  ~IdLoad() { Stop(); }
  IdLoad(const IdLoad&) = delete;
  IdLoad& operator=(const IdLoad&) = delete;

  void Stop();
  int64_t ok() const { return ok_.load(); }
  int64_t unavailable() const { return unavailable_.load(); }
  int64_t errors() const { return errors_.load(); }
  // Waits until ok() reaches `replies`; false at the deadline.
  bool WaitForReplies(int64_t replies, std::chrono::milliseconds timeout) const;
  // Every ID served so far, of every tag / of one tag (thread-safe).
  std::vector<int64_t> Ids() const;
  std::vector<int64_t> Ids(const std::string& tag) const;
  // "name: N replies, M IDs, U 503s, E errors (first error: ...; last 503: ...)".
  std::string Summary() const;

 private:
  void Client(int index);

  const Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0}, unavailable_{0}, errors_{0};
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  std::map<std::string, std::vector<int64_t>> ids_;  // guarded by mu_
  std::string first_error_;                          // guarded by mu_
  std::string last_unavailable_;                     // guarded by mu_
  std::vector<std::thread> threads_;
};

// Prints "[ operator ] <scenario>: checked N IDs, D duplicates" over the segment IDs of every
// tag of `loads` (a segment ID is unique per tag) and returns D.
int64_t ReportSegmentDuplicates(const std::string& scenario, const std::vector<const IdLoad*>& loads,
                                const std::vector<std::string>& tags);

// Kafka's Admin API through TopicAdmin.java (the broker's jars have no kafka-tools): partitions,
// delete, create, describe. Exit code and output.
ScriptResult TopicAdmin(const KafkaBroker& broker, const std::vector<std::string>& args);

// Prints "[ operator ] <scenario>: checked N IDs, D duplicates" (with examples) and returns D.
int64_t ReportDuplicates(const std::string& scenario, const std::vector<int64_t>& ids);

}  // namespace kleaf::integration::mistakes
