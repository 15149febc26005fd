// Whether the Kafka cluster answers right now: a metadata request at a fixed interval on its own
// thread, so that /readyz can answer at once without waiting on Kafka.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "kafka/client.h"

namespace kleaf::kafka {

// Owned by the process wiring; one thread between Start and Stop (or destruction). Thread-safe.
class BrokerProbe {
 public:
  struct Options {
    std::string topic;  // whose metadata is asked for (it must exist)
    std::chrono::milliseconds interval{1000};
    std::chrono::milliseconds timeout{1000};  // per metadata request
  };
  struct Status {
    bool ok = false;           // the last probe succeeded
    int64_t since_ok_ms = -1;  // age of the last success (-1: none yet)
    std::string last_error;    // of the last probe, empty when it succeeded
  };

  BrokerProbe(Properties props, Options options, Clock& clock);
  ~BrokerProbe();

  void Start();
  void Stop();
  Status status() const;

 private:
  void Run();

  const Properties props_;
  const Options options_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                          // guarded by mu_
  bool ok_ = false;                            // guarded by mu_
  int64_t last_ok_ns_ = -1;                    // guarded by mu_
  std::string last_error_ = "not probed yet";  // guarded by mu_
  std::thread thread_;
};

}  // namespace kleaf::kafka
