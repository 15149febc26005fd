// The HTTP API of gateways and of standalone kleaf (DESIGN.md, "HTTP API"), independent of the
// HTTP library: a request goes in, a response comes out through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocator/allocator.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "base/worker_pool.h"
#include "gateway/monitor.h"
#include "gateway/segment_cache.h"
#include "http/http.h"
#include "snowflake/id128.h"
#include "snowflake/snowflake.h"

namespace kleaf::gateway {

struct ApiOptions {
  int64_t max_batch = 10000;
  int64_t wait_ms = 100;
  int retry_after_s = 1;
  // Required as "Authorization: Bearer <token>" on the admin routes: /api/v1/tags,
  // /api/v1/workers, /db.
  std::string admin_token;
  // This node's worker lease as a JSON object, for /api/v1/workers; empty when the worker id
  // comes from config (standalone) and there is no registry to ask.
  std::function<std::string()> lease_status;
  // Serves "/" (the monitoring page), /api/v1/status and /readyz; without it they answer 404
  // (/readyz: 200 with no checks). Not owned.
  Monitor* monitor = nullptr;
};

// Routes requests to segment buffers, the snowflake generator (snowflake IDs, and the UUIDv7s and
// ULIDs built on its draws: one generator per node, whatever the tag), the allocator's tag admin,
// the operator routes (/metrics, /healthz, /readyz, /api/v1/status, "/") and Leaf's monitor routes
// (/cache, /db, /decodeSnowflakeId). Counts the IDs it hands out in
// kleaf_ids_issued_total{tag,mode} (series looked up once per tag, not per request). Thread-safe.
// Handle() answers at once when no waiting is needed (an ID from a loaded segment); otherwise the
// wait runs on `blocking` and `respond` is called from that thread.
class Api {
 public:
  Api(ApiOptions options, SegmentCache& segments, snowflake::SnowflakeGenerator& snowflake,
      allocator::Allocator& allocator, WorkerPool& blocking);

  void Handle(http::HttpRequest request, http::Respond respond);
  // The route a request target belongs to, as the metric label kleaf_http_requests_total{route}
  // names it ("/api/v1/segment/{tag}", "/metrics", ...; "other" for a path Handle serves 404):
  // a fixed set, whatever the clients send. For RequestMetrics (HttpServerOptions::on_answer).
  static std::string_view RouteOf(std::string_view target);
  // Every label RouteOf returns.
  static constexpr std::string_view kRoutes[] = {"/",
                                                 "/metrics",
                                                 "/healthz",
                                                 "/readyz",
                                                 "/api/segment/get/{tag}",
                                                 "/api/snowflake/get/{tag}",
                                                 "/api/v1/segment/{tag}",
                                                 "/api/v1/snowflake/{tag}",
                                                 "/api/v1/snowflake/decode/{id}",
                                                 "/api/v1/status",
                                                 "/api/v1/workers",
                                                 "/api/v1/tags",
                                                 "/api/v1/tags/{tag}",
                                                 "/api/v1/snowflake/compose/{time}",
                                                 "/api/v1/uuid7/{tag}",
                                                 "/api/v1/ulid/{tag}",
                                                 "/api/v1/uuid7/compose/{time}",
                                                 "/api/v1/ulid/compose/{time}",
                                                 "/cache",
                                                 "/db",
                                                 "/decodeSnowflakeId",
                                                 "other"};

  // Snowflake tags with their own kleaf_ids_issued_total series; later ones count as "_other".
  // The same cap applies to the uuid7 and ulid tags, each mode on its own.
  static constexpr size_t kMaxSnowflakeTagSeries = 1000;

 private:
  // "/" (the monitoring page) and the operator routes (http::ServeOpsRoute); false without an
  // answer for any other one-segment path.
  bool ServeTopLevel(const http::HttpRequest& request, std::string_view name,
                     const http::Respond& respond);
  // Leaf's monitor routes (docs/migrating-from-leaf.md): /decodeSnowflakeId?snowflakeId=,
  // /cache and /db (admin); false without an answer for any other one-segment path.
  bool ServeLeafMonitor(const http::HttpRequest& request, std::string_view name,
                        std::string_view query, const http::Respond& respond);
  // The routes under /api/v1/ (`parts` is the whole path: "api", "v1", ...).
  void ServeV1(const http::HttpRequest& request, std::span<const std::string_view> parts,
               std::string_view query, http::Respond respond);
  // GET IDs of `mode` ("segment" or "snowflake") for a tag: `leaf`, Leaf's route (one ID as
  // plain text), else ours (?count=N, JSON).
  void ServeIds(const http::HttpRequest& request, std::string_view mode, std::string_view tag_text,
                std::string_view query, bool leaf, http::Respond respond);
  // The routes of the time-ordered kinds: GET /api/v1/{uuid7,ulid}/{tag}?count=N and
  // /api/v1/{snowflake,uuid7,ulid}/compose/{time}. False, nothing answered, for another path.
  bool ServeTimeOrdered(const http::HttpRequest& request, std::span<const std::string_view> parts,
                        std::string_view query, http::Respond& respond);
  // RouteOf's labels for the routes above; empty for another path.
  static std::string_view TimeOrderedRouteOf(std::span<const std::string_view> parts);
  // True for a GET; else answers 405.
  static bool IsGet(const http::HttpRequest& request, const http::Respond& respond);
  // True for the methods Leaf's get routes serve (GET, HEAD, POST, PUT, PATCH, DELETE); OPTIONS
  // is answered 200 with their Allow list, any other method 405.
  static bool IsLeafGetMethod(const http::HttpRequest& request, const http::Respond& respond);
  // True when the request carries the admin token; else answers 401.
  bool Admitted(const http::HttpRequest& request, const http::Respond& respond) const;
  void Reject(const http::Respond& respond, const Error& error) const;
  void NoSuchPath(const http::Respond& respond) const;
  void Segment(const std::string& tag, int64_t count, bool plain, http::Respond respond);
  void Snowflake(const std::string& tag, int64_t count, bool plain, http::Respond respond);
  // Runs `issue` (a draw of `count` snowflake-based IDs and its answer) here for a small batch;
  // a large one may wait for several ticks (4096 IDs per ms at most), so it runs on `blocking_`,
  // not on the I/O thread.
  void IssueOffTheIoThreadIfLarge(int64_t count, std::function<void(http::Respond)> issue,
                                  http::Respond respond);
  void Decode(const std::string& id_text, http::Respond respond);
  // {"tag","ids"} of `count` UUIDv7s or ULIDs, drawn from the node's snowflake generator.
  void Id128s(const snowflake::Id128Layout& layout, const std::string& tag, int64_t count,
              http::Respond respond);
  // {"id"}: the smallest ID of `mode` ("snowflake", "uuid7", "ulid") at a time given as text.
  void Compose(std::string_view mode, std::string_view time_text, http::Respond respond);
  void Tags(const http::HttpRequest& request, const std::string& tag, http::Respond respond);
  void Workers(http::Respond respond);
  bool Authorized(const std::string& authorization) const;
  // One mode's series of kleaf_ids_issued_total: its tags are not registered anywhere, so at most
  // kMaxSnowflakeTagSeries of them get their own series and the rest count under "_other".
  struct TagSeries {
    explicit TagSeries(std::string m) : mode(std::move(m)) {}
    const std::string mode;
    SharedMutex mu;
    std::unordered_map<std::string, metrics::Counter*> counters KLEAF_GUARDED_BY(mu);
  };
  // The series of `tag` in `series`, looked up once per tag.
  static metrics::Counter& Issued(TagSeries& series, const std::string& tag);
  metrics::Counter& SnowflakeIssued(const std::string& tag) {
    return Issued(snowflake_issued_, tag);
  }

  const ApiOptions options_;
  SegmentCache& segments_;
  snowflake::SnowflakeGenerator& snowflake_;
  allocator::Allocator& allocator_;
  WorkerPool& blocking_;
  const snowflake::Id128Layout uuid7_layout_;
  const snowflake::Id128Layout ulid_layout_;
  TagSeries snowflake_issued_{"snowflake"};
  TagSeries uuid7_issued_{"uuid7"};
  TagSeries ulid_issued_{"ulid"};
};

}  // namespace kleaf::gateway
