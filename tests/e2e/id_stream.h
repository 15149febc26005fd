// End-to-end test support: client threads that fetch IDs from a running kleaf over keep-alive
// connections and check each reply as it arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/http_client.h"

namespace kleaf::e2e {

// What one client asks for, in turn.
struct IdRoute {
  enum class Kind { kSegment, kSnowflake };
  Kind kind;
  std::string tag;
};

// Starts `threads` clients, each with its own keep-alive connection. Client i cycles through
// `routes`, alternating the Leaf-compatible single-ID route and the batch route with a count in
// [2, max_count]. Every reply is checked at once:
// - status 200 with well-formed IDs (503 with Retry-After is counted, not a failure);
// - IDs >= 0, strictly increasing within a batch and above everything this connection received
//   before under the same key (per tag for segments; one key for all snowflake IDs).
// A transport error ends the client; it is a failure unless ExpectServerGone() was called first.
class IdStream {
 public:
  IdStream(uint16_t port, int threads, std::vector<IdRoute> routes, int max_count,
           Transport transport = {});
  ~IdStream();  // Stop()

  // Waits until `n` IDs were served in total; false at the deadline or when every client ended.
  bool WaitForIds(int64_t n, std::chrono::milliseconds timeout);
  // The server is about to be killed or stopped: transport errors are expected from now on.
  void ExpectServerGone() { server_gone_.store(true); }
  // Asks the clients to finish their current request and joins them.
  void Stop();

  // After Stop(): the IDs served, per key ("segment/<tag>" or "snowflake").
  const std::map<std::string, std::vector<int64_t>>& ids() const { return ids_; }
  const std::vector<std::string>& failures() const { return failures_; }
  int64_t total() const;
  int64_t unavailable() const { return unavailable_.load(); }
  // Largest number of connections any client opened while it was getting replies.
  int max_connections_per_client() const { return max_connections_; }

  static std::string KeyOf(const IdRoute& route);

 private:
  void Client(int index);

  const uint16_t port_;
  const std::vector<IdRoute> routes_;
  const int max_count_;
  const Transport transport_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> server_gone_{false};
  std::atomic<int64_t> unavailable_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t total_ = 0;        // guarded by mu_
  int running_ = 0;          // guarded by mu_
  int max_connections_ = 0;  // guarded by mu_
  std::map<std::string, std::vector<int64_t>> ids_;  // guarded by mu_
  std::vector<std::string> failures_;                // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace kleaf::e2e
