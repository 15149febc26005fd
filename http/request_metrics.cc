#include "http/request_metrics.h"

#include <array>

namespace kleaf::http {

namespace {

constexpr std::string_view kRequestsName = "kleaf_http_requests_total";
constexpr std::string_view kRequestsHelp = "HTTP answers, per route, method and status.";

// Methods with a label of their own; anything else a client sends counts as "other" (the last).
constexpr std::array<std::string_view, 8> kMethods = {"GET",    "HEAD",  "POST",    "PUT",
                                                      "DELETE", "PATCH", "OPTIONS", "other"};

size_t MethodIndex(std::string_view method) {
  for (size_t i = 0; i + 1 < kMethods.size(); ++i) {
    if (method == kMethods[i]) return i;
  }
  return kMethods.size() - 1;
}

// The statuses kleaf's servers answer, each with a lock-free slot; any other status (a handler
// added later) takes a lock per answer.
constexpr std::array<int, 16> kStatuses = {200, 204, 400, 401, 403, 404, 405, 408,
                                           409, 413, 414, 429, 431, 500, 501, 503};

// The slot of `status` in kStatuses, or kStatuses.size() when it has none.
size_t StatusIndex(int status) {
  for (size_t i = 0; i < kStatuses.size(); ++i) {
    if (status == kStatuses[i]) return i;
  }
  return kStatuses.size();
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
  routes_.reserve(routes.size());
  for (std::string_view name : routes) {
    Route& route = routes_.emplace_back();
    route.name = name;
    route.latency = &registry_.GetHistogram(
        "kleaf_http_request_seconds",
        "Time from a request read to its answer ready to be written, per route.",
        {{"route", std::string(name)}}, RequestBuckets());
    route.counters =
        std::make_unique<std::atomic<metrics::Counter*>[]>(kMethods.size() * kStatuses.size());
    CounterFor(route, MethodIndex("GET"), 200);
  }
}

metrics::Counter& RequestMetrics::CounterFor(Route& route, size_t method, int status) {
  const size_t status_slot = StatusIndex(status);
  std::atomic<metrics::Counter*>* slot =
      status_slot < kStatuses.size() ? &route.counters[method * kStatuses.size() + status_slot]
                                     : nullptr;
  if (slot != nullptr) {
    if (metrics::Counter* counter = slot->load(std::memory_order_acquire)) return *counter;
  }
  MutexLock lock(mu_);
  // The registry hands out the same counter for the same labels every time.
  metrics::Counter& counter =
      registry_.GetCounter(std::string(kRequestsName), std::string(kRequestsHelp),
                           {{"route", std::string(route.name)},
                            {"method", std::string(kMethods[method])},
                            {"status", std::to_string(status)}});
  if (slot != nullptr) slot->store(&counter, std::memory_order_release);
  return counter;
}

void RequestMetrics::Record(std::string_view method, std::string_view target, int status,
                            std::chrono::nanoseconds elapsed) {
  const std::string_view name = route_of_(target);
  // The route set is small (about 15): a scan is as quick as a hash of the name.
  Route* route = nullptr;
  for (Route& r : routes_) {
    if (r.name == name) route = &r;
  }
  if (route == nullptr) return;  // RouteOf answered a name outside its route set: a bug
  CounterFor(*route, MethodIndex(method), status).Inc();
  route->latency->Observe(std::chrono::duration<double>(elapsed).count());
}

AnswerHook RequestMetrics::Hook() {
  return [this](std::string_view method, std::string_view target, int status,
                std::chrono::nanoseconds elapsed) { Record(method, target, status, elapsed); };
}

}  // namespace kleaf::http
