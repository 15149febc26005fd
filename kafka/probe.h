// Whether the Kafka cluster answers right now: a metadata request at a fixed interval on its own
// thread, so that /readyz can answer at once without waiting on Kafka.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/periodic_task.h"
#include "base/ready_check.h"
#include "kafka/client.h"

namespace kleaf::kafka {

// Owned by the process wiring; one thread between Start and Stop (or destruction). Thread-safe.
class BrokerProbe {
 public:
  struct Options {
    std::string topic;  // whose metadata is asked for (it must exist)
    std::chrono::milliseconds interval{1000};
    // Per metadata request: 2 s, so that a broker slowed by load (or the first request after one
    // of three died) is not read as "Kafka unreachable"; a stopped cluster still fails at once.
    std::chrono::milliseconds timeout{2000};
    std::chrono::milliseconds fresh{5000};  // Check() is ok after a success this recent
  };
  struct Status {
    bool ok = false;           // a probe succeeded within `fresh`
    int64_t since_ok_ms = -1;  // age of the last success (-1: none yet)
    std::string last_error;    // of the last probe, empty when it succeeded
  };

  BrokerProbe(Properties props, Options options, Clock& clock);
  ~BrokerProbe();

  void Start();
  void Stop();
  Status status() const;
  // "kafka": ok when a probe succeeded within `fresh`. One failed probe does not make it fail:
  // with a broker of three down or frozen, a metadata request sent to it fails while the others
  // serve, and a load balancer must not take a node that can serve out of service for it.
  ReadyCheck Check() const;

  struct Handle;  // probe.cc: the long-lived librdkafka handle the probes go through

 private:
  void ProbeOnce();
  // One metadata request for the topic through the probe's handle (made at the first probe, and
  // made again after kRebuildAfter failures in a row: kleaf_kafka_handle_recoveries_total).
  [[nodiscard]] Result<void> AskMetadata();

  const Properties props_;
  const Options options_;
  Clock& clock_;
  mutable Mutex mu_;
  bool ok_ KLEAF_GUARDED_BY(mu_) = false;
  int64_t last_ok_ns_ KLEAF_GUARDED_BY(mu_) = -1;
  std::string last_error_ KLEAF_GUARDED_BY(mu_) = "not probed yet";
  std::unique_ptr<Handle> handle_;             // the probing thread's only
  int failures_in_a_row_ = 0;                  // the probing thread's only
  PeriodicTask probing_;
};

}  // namespace kleaf::kafka
