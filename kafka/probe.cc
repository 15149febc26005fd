#include "kafka/probe.h"

#include <algorithm>

#include "kafka/internal.h"

namespace kleaf::kafka {
namespace {

// Failed probes in a row after which the probe's handle is replaced by a new one (a handle whose
// connections or metadata went stale must not keep a node unready once Kafka answers again).
constexpr int kRebuildAfter = 5;

}  // namespace

struct BrokerProbe::Handle {
  KafkaHandle rk;
};

BrokerProbe::BrokerProbe(Properties props, Options options, Clock& clock)
    : props_(std::move(props)), options_(std::move(options)), clock_(clock) {}

BrokerProbe::~BrokerProbe() { Stop(); }

Result<void> BrokerProbe::AskMetadata() {
  if (!handle_) {
    Properties props = props_;
    props.emplace("socket.timeout.ms",
                  std::to_string(std::max<int64_t>(options_.timeout.count() * 2, 1000)));
    auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
    if (!rk) return std::unexpected(rk.error());
    handle_ = std::make_unique<Handle>(Handle{std::move(*rk)});
  }
  return PrepareTopic(handle_->rk.get(), options_.topic, options_.timeout);
}

void BrokerProbe::Start() {
  probing_.Start(options_.interval, PeriodicTask::FirstRun::kAtOnce, [this] { ProbeOnce(); });
}

void BrokerProbe::Stop() { probing_.Stop(); }

void BrokerProbe::ProbeOnce() {
  auto r = AskMetadata();
  if (r) {
    if (failures_in_a_row_ >= kRebuildAfter) CountRecovery("broker_probe", "rebuilt");
    failures_in_a_row_ = 0;
  } else if (++failures_in_a_row_ % kRebuildAfter == 0) {
    handle_.reset();  // the next probe goes through a new handle
  }
  const int64_t now = clock_.MonotonicNs();
  MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  Status s;
  s.since_ok_ms = last_ok_ns_ < 0 ? -1 : (now - last_ok_ns_) / 1'000'000;
  s.ok = s.since_ok_ms >= 0 && s.since_ok_ms <= options_.fresh.count();
  s.last_error = last_error_;
  return s;
}

ReadyCheck BrokerProbe::Check() const {
  auto s = status();
  ReadyCheck check{"kafka", s.ok, ""};
  check.detail = check.ok ? "metadata request answered " + std::to_string(s.since_ok_ms) + " ms ago"
                          : "Kafka unreachable: " + s.last_error;
  return check;
}

}  // namespace kleaf::kafka
