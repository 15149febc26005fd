// Per-route request metrics of an HttpServer: kleaf_http_requests_total{route,method,status} and
// kleaf_http_request_seconds{route}. Routes are a fixed set of labels named by the server's
// handler (e.g. "/api/v1/segment/{tag}"), whatever paths clients send, so the series stay bounded.
#pragma once

#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/metrics.h"
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

  // Counts one answer. `method` outside the standard ones counts as "other". Thread-safe.
  void Record(std::string_view method, std::string_view target, int status,
              std::chrono::nanoseconds elapsed);
  // A hook for HttpServerOptions::on_answer; this object must outlive the server.
  AnswerHook Hook();

 private:
  metrics::Counter& CounterFor(std::string_view route, std::string_view method, int status);

  metrics::Registry& registry_;
  RouteOf route_of_;
  std::unordered_map<std::string_view, metrics::Histogram*> latency_;  // filled in the constructor
  std::mutex mu_;
  std::unordered_map<std::string, metrics::Counter*> counters_;  // guarded by mu_
};

}  // namespace kleaf::http
