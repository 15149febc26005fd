#include "app/standalone.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "allocator/local_allocator.h"
#include "base/clock.h"
#include "base/worker_pool.h"
#include "gateway/api.h"
#include "gateway/http_server.h"
#include "gateway/segment_cache.h"
#include "gateway/snowflake.h"
#include "gateway/timestamp_guard.h"
#include "state/store.h"

namespace kleaf::app {
namespace {

constexpr std::string_view kSnowflakeMark = "snowflake.high_water_ms";

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("kleaf");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

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
  {
    std::ofstream out(path, std::ios::trunc);
    out << token << "\n";
    if (!out) return Fail(Code::kInternal, "cannot write admin token file " + path.string());
  }
  ::chmod(path.c_str(), 0600);
  spdlog::info("[admin] generated an admin token into {}", path.string());
  return token;
}

int StartupError(const std::string& message) {
  std::cerr << "kleaf: " << message << "\n";
  spdlog::error("{}", message);
  return 1;
}

}  // namespace

int RunStandalone(const config::Config& c) {
  SetUpLogging(c.log.level);
  // Block the shutdown signals before any thread starts, so only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);

  std::error_code ec;
  std::filesystem::create_directories(c.state.path, ec);
  if (ec) return StartupError("state.path: cannot create '" + c.state.path + "': " + ec.message());
  auto store = state::Store::Open(c.state.path);
  if (!store) return StartupError(store.error().message);
  auto token = AdminToken(c);
  if (!token) return StartupError(token.error().message);

  Clock& clock = SystemClock::Instance();
  const auto& sf = c.snowflake;
  auto layout = gateway::SnowflakeLayout::Make(sf.timestamp_bits, sf.worker_bits, sf.sequence_bits,
                                               sf.epoch_ms, sf.time_unit_ms, clock.NowMs());
  if (!layout) return StartupError(layout.error().message);
  gateway::SnowflakeGenerator generator(
      *layout, {sf.worker_id, sf.random_sequence_start, sf.max_backward_ms}, clock);
  state::Store& db = **store;
  gateway::TimestampGuard guard(
      generator, clock, [&db] { return db.GetValue(kSnowflakeMark); },
      [&db](int64_t ms) { return db.PutValue(kSnowflakeMark, ms); },
      {sf.persist_interval_ms, sf.reserve_ms, sf.max_startup_wait_ms});
  if (auto r = guard.Start(); !r) return StartupError(r.error().message);

  allocator::LocalAllocator allocator(db, clock,
                                      {c.segment.max_step, c.segment.default_step,
                                       c.segment.auto_create, c.segment.fetch_threads});
  gateway::SegmentCache segments(allocator, clock, {c.segment.max_step, c.segment.preload_percent});
  WorkerPool blocking(4, "kleaf-wait");
  gateway::Api api({c.http.max_batch, c.segment.wait_ms, c.segment.retry_after_s, *token}, segments,
                   generator, allocator, blocking, clock);
  gateway::HttpServer server(
      {listen->first, listen->second, c.http.threads,
       static_cast<uint32_t>(c.http.header_limit_bytes),
       static_cast<uint64_t>(c.http.body_limit_bytes),
       std::chrono::milliseconds(c.http.idle_timeout_ms), c.http.max_connections},
      api);
  auto port = server.Start();
  if (!port) return StartupError(port.error().message);

  spdlog::info("[standalone] node {} serving on http://{}:{} (state {}, worker id {})", c.node.id,
               listen->first, *port, c.state.path, sf.worker_id);
  std::cout << "kleaf standalone listening on http://" << listen->first << ":" << *port << std::endl;

  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("[standalone] {} received; shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");

  // Order matters: stop taking requests, finish waits, stop issuing, then persist.
  server.Stop();
  blocking.Stop();
  allocator.Stop();
  guard.Stop();
  spdlog::info("[standalone] stopped");
  return 0;
}

}  // namespace kleaf::app
