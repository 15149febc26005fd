#include "http/request_metrics.h"

#include <array>

namespace kleaf::http {

namespace {

constexpr std::string_view kRequestsName = "kleaf_http_requests_total";
constexpr std::string_view kRequestsHelp = "HTTP answers, per route, method and status.";

// Methods with a label of their own; anything else a client sends counts as "other".
std::string_view MethodLabel(std::string_view method) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",    "HEAD",  "POST",
                                                               "PUT",    "DELETE", "PATCH",
                                                               "OPTIONS"};
  for (std::string_view m : kMethods) {
    if (method == m) return m;
  }
  return "other";
}

// From 50 µs (a segment ID from memory) to 10 s (a request that waited out segment.wait_ms).
std::vector<double> RequestBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

}  // namespace

RequestMetrics::RequestMetrics(metrics::Registry& registry, RouteOf route_of,
                               std::span<const std::string_view> routes)
    : registry_(registry), route_of_(route_of) {
  for (std::string_view route : routes) {
    latency_[route] = &registry_.GetHistogram(
        "kleaf_http_request_seconds",
        "Time from a request read to its answer ready to be written, per route.",
        {{"route", std::string(route)}}, RequestBuckets());
    CounterFor(route, "GET", 200);
  }
}

metrics::Counter& RequestMetrics::CounterFor(std::string_view route, std::string_view method,
                                             int status) {
  std::string key;
  key.reserve(route.size() + method.size() + 5);
  key.append(route).append(" ").append(method).append(" ").append(std::to_string(status));
  std::lock_guard lock(mu_);
  auto& counter = counters_[key];
  if (counter == nullptr) {
    counter = &registry_.GetCounter(std::string(kRequestsName), std::string(kRequestsHelp),
                                    {{"route", std::string(route)},
                                     {"method", std::string(method)},
                                     {"status", std::to_string(status)}});
  }
  return *counter;
}

void RequestMetrics::Record(std::string_view method, std::string_view target, int status,
                            std::chrono::nanoseconds elapsed) {
  const std::string_view route = route_of_(target);
  CounterFor(route, MethodLabel(method), status).Inc();
  if (auto it = latency_.find(route); it != latency_.end()) {
    it->second->Observe(std::chrono::duration<double>(elapsed).count());
  }
}

AnswerHook RequestMetrics::Hook() {
  return [this](std::string_view method, std::string_view target, int status,
                std::chrono::nanoseconds elapsed) { Record(method, target, status, elapsed); };
}

}  // namespace kleaf::http
