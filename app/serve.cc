#include "app/serve.h"

#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <random>

#include "app/common.h"
#include "base/clock.h"
#include "base/worker_pool.h"
#include "gateway/api.h"
#include "gateway/monitor.h"
#include "gateway/segment_cache.h"
#include "http/http_server.h"
#include "snowflake/snowflake.h"
#include "snowflake/snowflake_node.h"

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

// Seeds the buffers with the segment rests this node kept at its last graceful shutdown. The
// store deletes them before they are served, so a crash now cannot hand them out twice. Rests of
// another ID space (scope) or of a tag deleted meanwhile are dropped (a gap).
void ResumeSegmentRests(state::Store& store, allocator::Allocator& allocator,
                        gateway::SegmentCache& segments, const std::string& scope) {
  auto rests = store.TakeSegmentRests();
  if (!rests) {
    spdlog::warn("[segment] cannot read the kept segment rests: {}", rests.error().message);
    return;
  }
  std::map<std::string, std::vector<gateway::IdRange>> by_tag;
  for (const auto& r : *rests) {
    if (r.scope != scope) {
      spdlog::warn("[segment] dropping the kept rest [{}, {}) of tag {}: it belongs to {}, not {}",
                   r.start, r.end, r.tag, r.scope, scope);
      continue;
    }
    by_tag[r.tag].push_back({r.start, r.end});
  }
  // Ask about every tag at once; one deadline for all, so many tags cannot stretch startup.
  std::map<std::string, std::future<Result<state::TagRecord>>> answers;
  for (const auto& [tag, ranges] : by_tag) {
    auto found = std::make_shared<std::promise<Result<state::TagRecord>>>();
    answers.emplace(tag, found->get_future());
    allocator.GetTag(tag, [found](Result<state::TagRecord> r) { found->set_value(std::move(r)); });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& [tag, ranges] : by_tag) {
    auto& answer = answers.at(tag);
    if (answer.wait_until(deadline) == std::future_status::ready) {
      if (auto r = answer.get(); !r && r.error().code == Code::kNotFound) {
        spdlog::info("[segment] tag {} was deleted; dropping its kept rest", tag);
        continue;
      }
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    int64_t ids = 0;
    for (const auto& r : ranges) ids += r.size();
    segments.Get(tag)->Seed(ranges);
    spdlog::info("[segment] tag {}: resuming {} IDs from [{}, {}) kept at the last shutdown", tag,
                 ids, ranges.front().start, ranges.back().end);
  }
}

// Keeps what the buffers hold but never handed out for the next start of this node.
void KeepSegmentRests(state::Store& store, gateway::SegmentCache& segments,
                      const std::string& scope) {
  std::vector<state::Store::SegmentRest> rests;
  int64_t ids = 0;
  for (const auto& [tag, ranges] : segments.Drain()) {
    for (const auto& r : ranges) {
      rests.push_back({scope, tag, r.start, r.end});
      ids += r.size();
    }
  }
  if (rests.empty()) return;
  if (auto r = store.PutSegmentRests(rests); !r) {
    spdlog::warn("[segment] could not keep the unused segment rests (a gap): {}", r.error().message);
    return;
  }
  spdlog::info("[segment] kept {} unused IDs in {} ranges for the next start", ids, rests.size());
}

}  // namespace

int ServeIds(const config::Config& c, state::Store& store, allocator::Allocator& allocator,
             const std::string& role, bool use_registry,
             std::function<std::vector<http::ReadyCheck>()> ready_checks) {
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);
  auto token = AdminToken(c);
  if (!token) return StartupError(token.error().message);

  Clock& clock = SystemClock::Instance();
  auto snowflake = snowflake::SnowflakeNode::Start(c, store, allocator, use_registry, clock);
  if (!snowflake) return StartupError(snowflake.error().message);
  snowflake::SnowflakeGenerator& generator = (*snowflake)->generator();
  snowflake::WorkerLease* lease = (*snowflake)->lease();
  const int64_t worker_id = (*snowflake)->worker_id();

  gateway::SegmentCache segments(allocator, clock, {c.segment.max_step, c.segment.preload_percent});
  const std::string rest_scope = use_registry ? "cluster:" + c.kafka.topic_prefix : "standalone";
  ResumeSegmentRests(store, allocator, segments, rest_scope);
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
  gateway::Monitor::Options monitor_options{role, c.node.id, {}, std::move(ready_checks)};
  if (lease) monitor_options.lease = [lease] { return lease->status(); };
  gateway::Monitor monitor(std::move(monitor_options), segments, generator, clock);
  gateway::Api api({c.http.max_batch, c.segment.wait_ms, c.segment.retry_after_s, *token,
                    lease_status, &monitor},
                   segments, generator, allocator, blocking);
  http::HttpServerOptions http_options = HttpOptions(c, listen->first, listen->second);
  http_options.on_error = [&monitor](std::string_view method, std::string_view target,
                                     const http::HttpResponse& r) {
    monitor.RecordError(method, target, r);
  };
  http::HttpServer server(std::move(http_options),
                          [&api](http::HttpRequest request, http::Respond respond) {
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
  KeepSegmentRests(store, segments, rest_scope);
  (*snowflake)->Stop();
  spdlog::info("[{}] stopped", role);
  return 0;
}

}  // namespace kleaf::app
