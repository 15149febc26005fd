#include "base/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kleaf::metrics {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b <= bounds_.size(); ++b) {
    total += buckets_[b].load(std::memory_order_relaxed);
  }
  return total;
}

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Registry& Registry::Default() {
  static Registry* registry = new Registry();  // never destroyed: threads may update at exit
  return *registry;
}

Registry::Family& Registry::FamilyLocked(const std::string& name, const std::string& help,
                                         Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    throw std::logic_error("metric " + name + " registered with two types");
  }
  return it->second;
}

Counter& Registry::GetCounter(const std::string& name, const std::string& help,
                              const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kCounter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kGauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Gauge& Registry::GetSampledCounter(const std::string& name, const std::string& help,
                                   const Labels& labels) {
  MutexLock lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kCounter).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::GetHistogram(const std::string& name, const std::string& help,
                                  const Labels& labels, std::vector<double> bounds) {
  MutexLock lock(mu_);
  auto& slot = FamilyLocked(name, help, Type::kHistogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return *slot;
}

void Registry::Remove(const std::string& name, const Labels& labels) {
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  // A caller still holding a reference to the removed series must not use it any more.
  it->second.counters.erase(labels);
  it->second.gauges.erase(labels);
  it->second.histograms.erase(labels);
}

int Registry::AddCollector(std::function<void()> collect) {
  MutexLock lock(collectors_mu_);
  collectors_.emplace(next_collector_, std::move(collect));
  return next_collector_++;
}

void Registry::RemoveCollector(int id) {
  MutexLock lock(collectors_mu_);
  collectors_.erase(id);
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  // The shortest text that reads back as v: 5e-05, not 5.0000000000000002e-05.
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string FormatLabels(const Labels& labels, const std::string& extra_name = "",
                         const std::string& extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) out += ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

std::string Registry::Render() {
  {
    MutexLock lock(collectors_mu_);
    for (auto& [id, collect] : collectors_) collect();
  }
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    const char* type = family.type == Type::kCounter  ? "counter"
                       : family.type == Type::kGauge ? "gauge"
                                                      : "histogram";
    out += "# HELP " + name + " " + family.help + "\n";
    out += "# TYPE " + name + " " + type + "\n";
    for (const auto& [labels, c] : family.counters) {
      out += name + FormatLabels(labels) + " " + std::to_string(c->value()) + "\n";
    }
    for (const auto& [labels, g] : family.gauges) {
      out += name + FormatLabels(labels) + " " + FormatValue(g->value()) + "\n";
    }
    for (const auto& [labels, h] : family.histograms) {
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        std::string le = i < h->bounds().size() ? FormatValue(h->bounds()[i]) : "+Inf";
        out += name + "_bucket" + FormatLabels(labels, "le", le) + " " +
               std::to_string(h->cumulative(i)) + "\n";
      }
      out += name + "_sum" + FormatLabels(labels) + " " + FormatValue(h->sum()) + "\n";
      out += name + "_count" + FormatLabels(labels) + " " + std::to_string(h->count()) + "\n";
    }
  }
  return out;
}

}  // namespace kleaf::metrics
