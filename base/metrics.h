// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text
// exposition format (version 0.0.4) for GET /metrics. No dependency beyond the standard library.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace kleaf::metrics {

// Label pairs, e.g. {{"tag", "order"}, {"mode", "segment"}}. Order is kept as given.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up. Lock-free; safe from any thread.
class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Lock-free; safe from any thread.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into cumulative buckets (upper bounds, ascending), plus their sum.
// Lock-free; safe from any thread.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative); i == bounds().size() is +Inf.
  uint64_t cumulative(size_t i) const;

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last is +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Latency buckets in seconds, 0.5 ms to 10 s.
std::vector<double> LatencyBuckets();

// Owns every metric of the process. Get* returns a reference that stays valid for the registry's
// lifetime: look it up once (it takes a lock) and keep it for hot paths. Collectors run at the
// start of each Render() to refresh gauges whose value is read from elsewhere (buffer fill, lease
// time left). Thread-safe.
class Registry {
 public:
  // The process-wide registry that /metrics renders.
  static Registry& Default();

  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help, const Labels& labels = {},
                          std::vector<double> bounds = LatencyBuckets());
  // A counter whose value is copied by a collector from a source that only grows and is not an
  // integer (process_cpu_seconds_total): rendered as a counter, set like a gauge.
  Gauge& GetSampledCounter(const std::string& name, const std::string& help,
                           const Labels& labels = {});
  // Removes one labelled series (e.g. a tag that was deleted); no-op when absent.
  void Remove(const std::string& name, const Labels& labels);

  // Returns an id for RemoveCollector. A collector must not call Render().
  int AddCollector(std::function<void()> collect);
  void RemoveCollector(int id);

  std::string Render();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyLocked(const std::string& name, const std::string& help, Type type)
      KLEAF_REQUIRES(mu_);

  Mutex mu_;
  std::map<std::string, Family> families_ KLEAF_GUARDED_BY(mu_);
  Mutex collectors_mu_;  // held while collectors run; taken before mu_
  std::map<int, std::function<void()>> collectors_ KLEAF_GUARDED_BY(collectors_mu_);
  int next_collector_ KLEAF_GUARDED_BY(collectors_mu_) = 0;
};

// Escapes a label value for the text format (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace kleaf::metrics
