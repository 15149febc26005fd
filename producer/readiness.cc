#include "producer/readiness.h"

#include <algorithm>
#include <string>

namespace kleaf::producer {

std::vector<ReadyCheck> Readiness(const IdsProducer& producer, const snowflake::WorkerLease* lease,
                                  const kafka::BrokerProbe& probe, Clock& clock,
                                  std::chrono::milliseconds check_interval) {
  const int64_t fresh_ns = std::max<int64_t>(3 * check_interval.count(), 10000) * 1'000'000;
  std::vector<ReadyCheck> checks = {probe.Check()};
  const int64_t last = producer.last_round_ok_ns();
  const int64_t age_ms = last < 0 ? -1 : (clock.MonotonicNs() - last) / 1'000'000;
  checks.push_back({"top_up", !producer.fatal() && last >= 0 && age_ms * 1'000'000 <= fresh_ns,
                    producer.fatal() ? "fenced by a newer run of this node"
                    : last < 0
                        ? "no top-up round completed yet"
                        : "last top-up round completed " + std::to_string(age_ms) + " ms ago"});
  if (lease != nullptr) {
    auto s = lease->status();
    checks.push_back({"lease", s.valid_for_ms > 0,
                      "worker id " + std::to_string(s.worker_id) + " valid for " +
                          std::to_string(s.valid_for_ms) + " ms"});
  }
  return checks;
}

}  // namespace kleaf::producer
