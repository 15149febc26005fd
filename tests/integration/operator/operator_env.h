// Test support for the operator-mistakes suite (issue 11), on top of the cluster harness
// (../cluster_env.h): snowflake and segment client load, Kafka's own Admin API for what an operator
// does to topics, and the duplicate report every scenario prints.
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

// The message substrings the product promises (issue 11; exact, case-sensitive).
inline constexpr char kLostLine[] = "lost worker id";
inline constexpr char kArrivedOnPartition[] = "arrived on partition";
inline constexpr char kPartitionsAdded[] = "partitions were added";
inline constexpr char kRecreated[] = "recreated";
inline constexpr char kHoldsStateOf[] = "holds the state of";

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
