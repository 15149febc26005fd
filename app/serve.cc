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
#include "app/snowflake_node.h"
#include "base/clock.h"
#include "base/worker_pool.h"
#include "gateway/api.h"
#include "gateway/http_server.h"
#include "gateway/segment_cache.h"
#include "gateway/snowflake.h"

namespace kleaf::app {
namespace {

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
             const std::string& role, bool use_registry) {
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);
  auto token = AdminToken(c);
  if (!token) return StartupError(token.error().message);

  Clock& clock = SystemClock::Instance();
  auto snowflake = SnowflakeNode::Start(c, store, allocator, use_registry, clock);
  if (!snowflake) return StartupError(snowflake.error().message);
  gateway::SnowflakeGenerator& generator = (*snowflake)->generator();
  gateway::WorkerLease* lease = (*snowflake)->lease();
  const int64_t worker_id = (*snowflake)->worker_id();

  gateway::SegmentCache segments(allocator, clock, {c.segment.max_step, c.segment.preload_percent});
  WorkerPool blocking(4, "kleaf-wait");
  std::function<std::string()> lease_status;
  if (lease) {
    lease_status = [lease] {
      auto s = lease->status();
      return "{\"worker_id\":" + std::to_string(s.worker_id) +
             ",\"valid_for_ms\":" + std::to_string(s.valid_for_ms) + ",\"last_error\":\"" +
             (s.last_error.empty() ? "" : "renewal failed") + "\"}";
    };
  }
  gateway::Api api({c.http.max_batch, c.segment.wait_ms, c.segment.retry_after_s, *token,
                    lease_status},
                   segments, generator, allocator, blocking);
  gateway::HttpServer server(
      {listen->first, listen->second, c.http.threads,
       static_cast<uint32_t>(c.http.header_limit_bytes),
       static_cast<uint64_t>(c.http.body_limit_bytes),
       std::chrono::milliseconds(c.http.idle_timeout_ms), c.http.max_connections},
      api);
  auto port = server.Start();
  if (!port) return StartupError(port.error().message);

  const std::string url = "http://" +
                          (listen->first.find(':') != std::string::npos ? "[" + listen->first + "]"
                                                                        : listen->first) +
                          ":" + std::to_string(*port);
  spdlog::info("[{}] node {} serving on {} (state {}, worker id {})", role, c.node.id, url,
               c.state.path, worker_id);
  std::cout << "kleaf " << role << " listening on " << url << std::endl;

  spdlog::info("[{}] {} received; shutting down", role, WaitForShutdownSignal());
  // Stop taking requests, finish the waits, stop issuing, then persist.
  server.Stop();
  blocking.Stop();
  (*snowflake)->Stop();
  spdlog::info("[{}] stopped", role);
  return 0;
}

}  // namespace kleaf::app
