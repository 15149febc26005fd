// What a gateway or standalone node shows operators: the status JSON behind the monitoring page
// (/api/v1/status), readiness (/readyz), recent error answers, and the gauges /metrics reads.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "gateway/segment_cache.h"
#include "gateway/tag_history.h"
#include "http/http.h"
#include "snowflake/snowflake.h"
#include "snowflake/worker_lease.h"

namespace kleaf::gateway {

// Owned by the process wiring, next to the Api; outlives the HttpServer. Thread-safe. Registers
// a collector with metrics::Registry::Default() for its lifetime that refreshes the per-tag buffer
// gauges (dropping the series of tags no longer buffered), the lease gauges and the remaining
// snowflake timestamp range before each /metrics render.
class Monitor {
 public:
  struct Options {
    std::string role;  // "standalone" or "gateway"
    std::string node_id;
    // This node's worker lease; empty when the worker id comes from config (standalone).
    std::function<snowflake::WorkerLease::Status()> lease;
    // Readiness conditions besides the lease, e.g. "Kafka reachable"; may be empty.
    std::function<std::vector<http::ReadyCheck>()> ready_checks;
    size_t recent_errors = 20;  // error answers kept for the status page
    // The period of SampleHistory, which the wiring drives (http.status_history_interval_ms).
    int64_t history_interval_ms = 5000;
  };
  struct ErrorEntry {
    int64_t time_ms;
    std::string method;
    std::string path;
    int status;
    std::string code;
    std::string message;
  };

  Monitor(Options options, SegmentCache& segments, snowflake::SnowflakeGenerator& snowflake,
          Clock& clock);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Counts an error answer (kleaf_http_errors_total{code,status}) and keeps it among the recent
  // ones, with the code and message it carries (HttpResponse::error_code; "http_<status>" when it
  // has none); /readyz's 503 is not an error. For HttpServerOptions::on_error.
  void RecordError(std::string_view method, std::string_view target,
                   const http::HttpResponse& response);
  std::vector<ErrorEntry> RecentErrors() const;

  // GET /api/v1/status: node, worker lease, snowflake range, readiness, every buffered tag's two
  // segments, id_mode and history (TagHistory's points), recent errors. IDs are strings
  // (JavaScript loses precision above 2^53).
  std::string StatusJson();
  // Adds a point to every buffered tag's history (TagHistory::Sample) at the clock's time. From
  // one thread at a time: the wiring's PeriodicTask every Options::history_interval_ms, or a test.
  void SampleHistory();
  // The conditions /readyz lists. Standalone: the worker id from config plus
  // Options::ready_checks. A cluster gateway (Options::lease set): the worker lease and
  // Options::ready_checks, listed but not required, and "serving", required: it can hand out IDs
  // (the lease holds, the allocators answer, or a buffer holds IDs).
  std::vector<http::ReadyCheck> Readiness();
  // Refreshes the gauges; Render() calls it through the collector.
  void Collect();

  // The monitoring page served at "/": self-contained HTML that polls /api/v1/status.
  static const std::string& Page();

 private:
  std::vector<http::ReadyCheck> GatewayReadiness();
  // kleaf_http_errors_total{code,status}, looked up once per pair.
  metrics::Counter& ErrorCounter(const std::string& code, int status) KLEAF_REQUIRES(mu_);

  const Options options_;
  SegmentCache& segments_;
  snowflake::SnowflakeGenerator& snowflake_;
  Clock& clock_;
  const int64_t started_ms_;
  metrics::Registry& registry_;
  int collector_id_ = -1;
  TagHistory history_;

  mutable Mutex mu_;
  std::deque<ErrorEntry> recent_ KLEAF_GUARDED_BY(mu_);  // newest last
  std::map<std::pair<std::string, int>, metrics::Counter*> error_counters_ KLEAF_GUARDED_BY(mu_);
  Mutex collect_mu_;
  std::set<std::string> gauge_tags_ KLEAF_GUARDED_BY(collect_mu_);  // tags with buffer gauges
};

}  // namespace kleaf::gateway
