// Per-route request metrics of an HttpServer: kleaf_http_requests_total{route,method,status} and
// kleaf_http_request_seconds{route}. Routes are a fixed set of labels named by the server's
// handler (e.g. "/api/v1/segment/{tag}"), whatever paths clients send, so the series stay bounded.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/mutex.h"
#include "http/http_server.h"

namespace kleaf::http {

class RequestMetrics {
 public:
  // The route label of a request target; must return one of `routes` for every target.
  using RouteOf = std::string_view (*)(std::string_view target);

  // Every route's latency histogram and its GET 200 count exist at 0 from here on, so a
  // dashboard's rate() has a series before the first request.
  RequestMetrics(metrics::Registry& registry, RouteOf route_of,
                 std::span<const std::string_view> routes);

  // Counts one answer. `method` outside the standard ones counts as "other". Thread-safe; after
  // the first answer of a (route, method, usual status), without a lock or an allocation.
  void Record(std::string_view method, std::string_view target, int status,
              std::chrono::nanoseconds elapsed);
  // A hook for HttpServerOptions::on_answer; this object must outlive the server.
  AnswerHook Hook();

 private:
  struct Route {
    std::string_view name;
    metrics::Histogram* latency = nullptr;
    // Per method label and usual status (kStatuses in the .cc), set on first use (under mu_).
    std::unique_ptr<std::atomic<metrics::Counter*>[]> counters;
  };
  metrics::Counter& CounterFor(Route& route, size_t method, int status);

  metrics::Registry& registry_;
  RouteOf route_of_;
  std::vector<Route> routes_;  // fixed in the constructor
  Mutex mu_;                   // serializes looking a counter up in the registry
};

}  // namespace kleaf::http
