#include "app/serve.h"

#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "app/common.h"
#include "base/clock.h"
#include "base/worker_pool.h"
#include "gateway/api.h"
#include "gateway/http_server.h"
#include "gateway/monitor.h"
#include "gateway/segment_cache.h"
#include "gateway/snowflake.h"
#include "gateway/timestamp_guard.h"
#include "gateway/worker_lease.h"

namespace kleaf::app {
namespace {

constexpr std::string_view kSnowflakeMark = "snowflake.high_water_ms";
constexpr std::string_view kCachedWorker = "worker.id";
constexpr std::string_view kCachedLeaseUntil = "worker.lease_until_ms";

// The configured token, or the one in <state>/admin.token, created with a random value if missing.
Result<std::string> AdminToken(const config::Config& c) {
  if (!c.admin.token.empty()) return c.admin.token;
  std::filesystem::path path = std::filesystem::path(c.state.path) / "admin.token";
  if (std::ifstream in(path); in) {
    std::string token;
    std::getline(in, token);
    if (token.size() >= 16) {
      spdlog::info("[admin] token read from {}", path.string());
      return token;
    }
  }
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token += kHex[rd() % 16];
  // Created with mode 0600 from the start: no moment where another user could open it.
  std::filesystem::remove(path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  std::string line = token + "\n";
  bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!written) return Fail(Code::kInternal, "cannot write admin token file " + path.string());
  spdlog::info("[admin] generated an admin token into {}", path.string());
  return token;
}

}  // namespace

int ServeIds(const config::Config& c, state::Store& store, allocator::Allocator& allocator,
             const std::string& role, bool use_registry,
             std::function<std::vector<gateway::ReadyCheck>()> ready_checks) {
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);
  auto token = AdminToken(c);
  if (!token) return StartupError(token.error().message);

  Clock& clock = SystemClock::Instance();
  const auto& sf = c.snowflake;
  auto layout = gateway::SnowflakeLayout::Make(sf.timestamp_bits, sf.worker_bits, sf.sequence_bits,
                                               sf.epoch_ms, sf.time_unit_ms, clock.NowMs());
  if (!layout) return StartupError(layout.error().message);

  std::optional<gateway::WorkerLease> lease;
  int64_t worker_id = sf.worker_id;
  int64_t not_before_ms = 0;
  if (use_registry) {
    lease.emplace(
        allocator, clock,
        gateway::WorkerLease::Options{c.node.id, c.workers.lease_ttl_ms, c.workers.renew_interval_ms,
                                      c.workers.safety_margin_ms, c.workers.claim_timeout_ms},
        [&store]() -> std::optional<gateway::WorkerLease::Cached> {
          auto id = store.GetValue(kCachedWorker);
          auto until = store.GetValue(kCachedLeaseUntil);
          if (!id || !*id || !until || !*until) return std::nullopt;
          return gateway::WorkerLease::Cached{**id, **until};
        },
        [&store](const gateway::WorkerLease::Cached& cached) {
          (void)store.Write({{}, {}, {{std::string(kCachedWorker), cached.worker_id},
                                      {std::string(kCachedLeaseUntil), cached.lease_until_ms}}},
                            /*sync=*/true);
        });
    auto grant = lease->Acquire();
    if (!grant) return StartupError(grant.error().message);
    if (grant->worker_id > layout->max_worker_id()) {
      return StartupError("the registry granted worker id " + std::to_string(grant->worker_id) +
                          ", beyond snowflake.worker_bits; the allocators and this node disagree on "
                          "snowflake.worker_bits");
    }
    worker_id = grant->worker_id;
    not_before_ms = grant->not_before_ms;
  }
  gateway::SnowflakeGenerator generator(
      *layout, {worker_id, sf.random_sequence_start, sf.max_backward_ms}, clock);
  gateway::TimestampGuard guard(
      generator, clock, [&store] { return store.GetValue(kSnowflakeMark); },
      [&store](int64_t ms) { return store.PutValue(kSnowflakeMark, ms); },
      {sf.persist_interval_ms, sf.reserve_ms, sf.max_startup_wait_ms});
  guard.SetExternalFloorMs(not_before_ms);
  if (auto r = guard.Start(); !r) return StartupError(r.error().message);
  if (lease) lease->Start(generator);

  gateway::SegmentCache segments(allocator, clock, {c.segment.max_step, c.segment.preload_percent});
  WorkerPool blocking(4, "kleaf-wait");
  std::function<std::string()> lease_status;
  if (lease) {
    lease_status = [&lease] {
      auto s = lease->status();
      return "{\"worker_id\":" + std::to_string(s.worker_id) +
             ",\"valid_for_ms\":" + std::to_string(s.valid_for_ms) + ",\"last_error\":\"" +
             (s.last_error.empty() ? "" : "renewal failed") + "\"}";
    };
  }
  gateway::Monitor::Options monitor_options{role, c.node.id, {}, std::move(ready_checks)};
  if (lease) monitor_options.lease = [&lease] { return lease->status(); };
  gateway::Monitor monitor(std::move(monitor_options), segments, generator, clock);
  gateway::Api api({c.http.max_batch, c.segment.wait_ms, c.segment.retry_after_s, *token,
                    lease_status, &monitor},
                   segments, generator, allocator, blocking);
  gateway::HttpServerOptions http = HttpOptions(c, listen->first, listen->second);
  http.on_error = [&monitor](std::string_view method, std::string_view target,
                             const gateway::HttpResponse& r) {
    monitor.RecordError(method, target, r);
  };
  gateway::HttpServer server(std::move(http),
                             [&api](gateway::HttpRequest request, gateway::Respond respond) {
                               api.Handle(std::move(request), std::move(respond));
                             });
  auto port = server.Start();
  if (!port) return StartupError(port.error().message);

  const std::string url = HttpUrl(listen->first, *port);
  spdlog::info("[{}] node {} serving on {} (state {}, worker id {})", role, c.node.id, url,
               c.state.path, worker_id);
  std::cout << "kleaf " << role << " listening on " << url << std::endl;

  spdlog::info("[{}] {} received; shutting down", role, WaitForShutdownSignal());
  // Stop taking requests, finish the waits, stop issuing, then persist.
  server.Stop();
  blocking.Stop();
  if (lease) lease->Stop();
  guard.Stop();
  spdlog::info("[{}] stopped", role);
  return 0;
}

}  // namespace kleaf::app
