#include "kafka/probe.h"

namespace kleaf::kafka {

BrokerProbe::BrokerProbe(Properties props, Options options, Clock& clock)
    : props_(std::move(props)), options_(std::move(options)), clock_(clock) {}

BrokerProbe::~BrokerProbe() { Stop(); }

void BrokerProbe::Start() {
  thread_ = std::thread([this] { Run(); });
}

void BrokerProbe::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BrokerProbe::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto r = PartitionCount(props_, options_.topic, options_.timeout);
    const int64_t now = clock_.MonotonicNs();
    lock.lock();
    ok_ = r.has_value();
    if (ok_) {
      last_ok_ns_ = now;
      last_error_.clear();
    } else {
      last_error_ = r.error().message;
    }
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
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

}  // namespace kleaf::kafka
