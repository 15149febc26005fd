// Integration test support: paced client threads that fetch segment (or snowflake) IDs from one
// gateway, check each reply as it arrives, and keep every reply with its send and receive times, so
// that tests can check uniqueness across gateways and real-time order per gateway afterwards.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kleaf::integration {

struct LoadOptions {
  std::string name;               // for messages, e.g. the gateway's name
  uint16_t port = 0;              // the gateway's HTTP port on 127.0.0.1
  std::vector<std::string> tags;  // each client cycles through them
  enum class Kind {
    kSegment,    // /api/segment/get/T and /api/v1/segment/T?count=N
    kSnowflake,  // /api/snowflake/get/T and /api/v1/snowflake/T?count=N
  };
  Kind kind = Kind::kSegment;
  int threads = 1;  // clients, one keep-alive connection each
  enum class Mix {
    kAlternate,  // single-ID (Leaf-compatible) and batch requests in turn
    kBatches,    // batch requests only
  };
  Mix mix = Mix::kAlternate;
  int batch_max = 10;                  // a batch asks for [max(2, batch_max / 2), batch_max] IDs
  std::chrono::milliseconds pause{0};  // between two requests of one client: paces the load
  int64_t max_requests = 100000;       // per client: bounds the loop
  std::chrono::milliseconds request_timeout{15000};
};

// One successful reply: its IDs were first..last, in increasing order.
struct ServedReply {
  int64_t sent_ns = 0;  // steady clock, when the request was written
  int64_t done_ns = 0;  // when the reply was read
  int64_t first = 0;
  int64_t last = 0;
};

struct LoadCounters {
  int64_t replies = 0;      // 200s with well-formed IDs
  int64_t ids = 0;          // IDs in them
  int64_t unavailable = 0;  // 503s (with Retry-After and an error body)
  int64_t errors = 0;       // anything else: transport errors, other statuses, bad bodies, order
};

// Runs until Stop(), or until each client made max_requests requests. A transport error is counted
// and the client reconnects; the load itself never ends a test.
class Load {
 public:
  explicit Load(LoadOptions options);
  ~Load();  // Stop()
  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;

  void Stop();
  LoadCounters counters() const;  // thread-safe
  // Waits until `done(counters())` holds or the deadline passes.
  bool WaitFor(const std::function<bool(const LoadCounters&)>& done,
               std::chrono::milliseconds timeout);

  // After Stop(): every ID served per tag, every reply per tag, and the failures (at most 20 kept).
  const std::vector<int64_t>& Ids(const std::string& tag) const;
  const std::vector<ServedReply>& Replies(const std::string& tag) const;
  const std::vector<std::string>& failures() const { return failures_; }
  const LoadOptions& options() const { return options_; }
  // "name: N replies, M IDs, U 503s, E errors".
  std::string Summary() const;

 private:
  void Client(int index);
  void Fail(std::string what);

  const LoadOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> replies_{0}, ids_count_{0}, unavailable_{0}, errors_{0};
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  std::map<std::string, std::vector<int64_t>> ids_;                 // guarded by mu_
  std::map<std::string, std::vector<ServedReply>> replies_by_tag_;  // guarded by mu_
  std::vector<std::string> failures_;                               // guarded by mu_
  std::vector<std::thread> threads_;
};

// The first `max` failures of `load` and how many there were in all, one per line; empty if none.
std::string FailureReport(const Load& load, size_t max = 3);

// IDs that occur more than once in `ids`.
struct Duplicates {
  int64_t count = 0;              // IDs served more than once
  std::vector<int64_t> examples;  // the first few of them
};
Duplicates FindDuplicates(std::vector<int64_t> ids);

// Real-time order of one gateway's replies for one tag: a reply whose request was sent after
// another reply had been received must hold only higher IDs. Descriptions of the first violations.
std::vector<std::string> OrderViolations(std::vector<ServedReply> replies, size_t limit = 5);

// The IDs of several loads for `tag`, together.
std::vector<int64_t> AllIds(const std::vector<const Load*>& loads, const std::string& tag);

}  // namespace kleaf::integration
