#include "app/serve.h"

#include <spdlog/spdlog.h>

#include <iostream>

#include "app/common.h"
#include "base/clock.h"
#include "base/periodic_task.h"
#include "base/worker_pool.h"
#include "gateway/admin_token.h"
#include "gateway/api.h"
#include "gateway/monitor.h"
#include "gateway/segment_cache.h"
#include "gateway/segment_rests.h"
#include "http/http_server.h"
#include "http/request_metrics.h"
#include "snowflake/snowflake.h"
#include "snowflake/snowflake_node.h"

namespace kleaf::app {
namespace {

// The HTTP options of the ID server: every answer counted per route, every error recorded by the
// monitor.
http::HttpServerOptions IdServerOptions(const config::Config& c,
                                        const std::pair<std::string, uint16_t>& listen,
                                        http::RequestMetrics& request_metrics,
                                        gateway::Monitor& monitor) {
  http::HttpServerOptions options = HttpOptions(c, listen.first, listen.second);
  options.on_answer = request_metrics.Hook();
  options.on_error = [&monitor](std::string_view method, std::string_view target,
                                const http::HttpResponse& r) {
    monitor.RecordError(method, target, r);
  };
  return options;
}

}  // namespace

int ServeIds(const config::Config& c, state::Store& store, allocator::Allocator& allocator,
             const std::string& role, bool use_registry,
             std::function<std::vector<http::ReadyCheck>()> ready_checks,
             std::function<Result<void>(const std::string& dir)> backup) {
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);
  auto token = gateway::AdminToken(c.admin.token, c.state.path);
  if (!token) return StartupError(token.error().message);

  Clock& clock = SystemClock::Instance();
  auto snowflake = snowflake::SnowflakeNode::Start(SnowflakeNodeOptions(c, use_registry), store,
                                                   allocator, clock);
  if (!snowflake) return StartupError(snowflake.error().message);
  snowflake::SnowflakeGenerator& generator = (*snowflake)->generator();
  snowflake::WorkerLease* lease = (*snowflake)->lease();
  const int64_t worker_id = (*snowflake)->worker_id();

  gateway::SegmentCache segments(allocator, clock, {c.segment.max_step, c.segment.preload_percent});
  const std::string rest_scope = use_registry ? "cluster:" + c.kafka.topic_prefix : "standalone";
  gateway::ResumeSegmentRests(store, allocator, segments, rest_scope);
  WorkerPool blocking(4, "kleaf-wait");
  std::function<snowflake::WorkerLease::Status()> lease_status;
  if (lease) lease_status = [lease] { return lease->status(); };
  gateway::Monitor::Options monitor_options{role, c.node.id, lease_status, std::move(ready_checks)};
  monitor_options.history_interval_ms = c.http.status_history_interval_ms;
  gateway::Monitor monitor(std::move(monitor_options), segments, generator, clock);
  PeriodicTask history;  // the page's plots: one point per tag each interval
  history.Start(std::chrono::milliseconds(c.http.status_history_interval_ms),
                PeriodicTask::FirstRun::kAfterInterval, [&monitor] { monitor.SampleHistory(); });
  gateway::Api api({c.http.max_batch, c.segment.wait_ms, c.segment.retry_after_s, *token,
                    lease_status, &monitor, std::move(backup)},
                   segments, generator, allocator, blocking);
  http::RequestMetrics request_metrics(metrics::Registry::Default(), gateway::Api::RouteOf,
                                       gateway::Api::RouteLabels());
  http::HttpServer server(IdServerOptions(c, *listen, request_metrics, monitor),
                          [&api](http::HttpRequest request, http::Respond respond) {
                            api.Handle(std::move(request), std::move(respond));
                          });
  auto port = server.Start();
  if (!port) return StartupError(port.error().message);

  const std::string url = HttpUrl(listen->first, *port, c.http.tls.enabled());
  spdlog::info("[{}] node {} serving on {} (state {}, worker id {})", role, c.node.id, url,
               c.state.path, worker_id);
  std::cout << "kleaf " << role << " listening on " << url << std::endl;

  spdlog::info("[{}] {} received; shutting down", role, WaitForShutdownSignal([&server] {
                 (void)server.ReloadTls();  // a failure is logged and counted by the server
               }));
  // Stop taking requests, finish the waits, stop issuing, then persist.
  server.Stop();
  history.Stop();
  blocking.Stop();
  gateway::KeepSegmentRests(store, segments, rest_scope);
  (*snowflake)->Stop();
  spdlog::info("[{}] stopped", role);
  return 0;
}

}  // namespace kleaf::app
