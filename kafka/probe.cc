#include "kafka/probe.h"

namespace kleaf::kafka {

BrokerProbe::BrokerProbe(Properties props, Options options, Clock& clock)
    : props_(std::move(props)), options_(std::move(options)), clock_(clock) {}

BrokerProbe::~BrokerProbe() { Stop(); }

void BrokerProbe::Start() {
  probing_.Start(options_.interval, PeriodicTask::FirstRun::kAtOnce, [this] { ProbeOnce(); });
}

void BrokerProbe::Stop() { probing_.Stop(); }

void BrokerProbe::ProbeOnce() {
  auto r = PartitionCount(props_, options_.topic, options_.timeout);
  const int64_t now = clock_.MonotonicNs();
  std::lock_guard lock(mu_);
  ok_ = r.has_value();
  if (ok_) {
    last_ok_ns_ = now;
    last_error_.clear();
  } else {
    last_error_ = r.error().message;
  }
}

BrokerProbe::Status BrokerProbe::status() const {
  const int64_t now = clock_.MonotonicNs();
  std::lock_guard lock(mu_);
  Status s;
  s.ok = ok_;
  s.since_ok_ms = last_ok_ns_ < 0 ? -1 : (now - last_ok_ns_) / 1'000'000;
  s.last_error = last_error_;
  return s;
}

ReadyCheck BrokerProbe::Check() const {
  auto s = status();
  ReadyCheck check{"kafka", s.ok && s.since_ok_ms >= 0 && s.since_ok_ms <= options_.fresh.count(),
                   ""};
  check.detail = check.ok ? "metadata request answered " + std::to_string(s.since_ok_ms) + " ms ago"
                          : "Kafka unreachable: " + s.last_error;
  return check;
}

}  // namespace kleaf::kafka
