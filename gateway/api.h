// The HTTP API of gateways and of standalone kleaf (docs/architecture.md, "Routes and errors"),
// independent of the HTTP library: a request goes in, a response comes out through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
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
#include "gateway/route_table.h"
#include "gateway/segment_cache.h"
#include "http/http.h"
#include "snowflake/id128.h"
#include "snowflake/snowflake.h"
#include "snowflake/worker_lease.h"

namespace kleaf::gateway {

struct ApiOptions {
  int64_t max_batch = 10000;
  int64_t wait_ms = 100;
  int retry_after_s = 1;
  // Required as "Authorization: Bearer <token>" on the admin routes: /api/v1/tags,
  // /api/v1/workers, /db.
  std::string admin_token;
  // This node's worker lease, for /api/v1/workers; empty when the worker id comes from config
  // (standalone) and there is no registry to ask.
  std::function<snowflake::WorkerLease::Status()> lease_status;
  // Serves "/" (the monitoring page), /api/v1/status and /readyz; without it they answer 404
  // (/readyz: 200 with no checks). Not owned.
  Monitor* monitor = nullptr;
  // POST /api/v1/backup {"dir"} (admin): a consistent copy of this node's state store in `dir`, on
  // the node's host (a standalone node's RocksDB checkpoint, app/standalone.h). Run on the
  // blocking pool. Empty (a cluster gateway, whose state is in Kafka): the route answers 501.
  std::function<Result<void>(const std::string& dir)> backup = {};
};

// Routes requests, through one route table (api.cc), to segment buffers, the snowflake generator
// (snowflake IDs, and the UUIDv7s and ULIDs built on its draws: one generator per node, whatever
// the tag), the allocator's tag admin, the operator routes (/metrics, /healthz, /readyz,
// /api/v1/status, "/") and Leaf's monitor routes (/cache, /db, /decodeSnowflakeId). Counts the IDs
// it hands out in kleaf_ids_issued_total{tag,mode} (series looked up once per tag, not per
// request). Thread-safe.
// Handle() answers at once when no waiting is needed (an ID from a loaded segment); otherwise the
// wait runs on `blocking` and `respond` is called from that thread.
class Api {
 public:
  Api(ApiOptions options, SegmentCache& segments, snowflake::SnowflakeGenerator& snowflake,
      allocator::Allocator& allocator, WorkerPool& blocking);

  void Handle(http::HttpRequest request, http::Respond respond);
  // The route a request target belongs to, as the metric label kleaf_http_requests_total{route}
  // names it: the route's pattern ("/api/v1/segment/{tag}", "/metrics", ...), or "other" for a
  // path no route has (Handle answers it 404): a fixed set, whatever the clients send. For
  // RequestMetrics (HttpServerOptions::on_answer).
  static std::string_view RouteOf(std::string_view target);
  // Every label RouteOf returns.
  static std::span<const std::string_view> RouteLabels();

  // Snowflake tags with their own kleaf_ids_issued_total series; later ones count as "_other".
  // The same cap applies to the uuid7 and ulid tags, each mode on its own.
  static constexpr size_t kMaxSnowflakeTagSeries = 1000;

 private:
  // A request on one of the routes, past its method and gate: what its handler needs.
  struct Call {
    const http::HttpRequest& request;
    std::string_view param;   // the path's segment in the route's first {name} place
    std::string_view param2;  // ... and in its second
    std::string_view query;  // after '?', without it
    http::Respond respond;
  };
  using Handler = void (Api::*)(Call call);
  struct Routes;  // the route table (api.cc)

  // The routes' handlers, in the route table's order.
  void ServePage(Call call);
  void ServeMetrics(Call call);
  void ServeHealth(Call call);
  void ServeReady(Call call);
  void ServeStatus(Call call);
  void ServeLeafSegmentId(Call call);
  void ServeLeafSnowflakeId(Call call);
  void ServeCache(Call call);
  void ServeDb(Call call);
  void ServeLeafDecode(Call call);
  void ServeSegmentIds(Call call);
  void ServeSnowflakeIds(Call call);
  void ServeUuid7s(Call call);
  void ServeUlids(Call call);
  void ServeDecode(Call call);
  void ServeSnowflakeCompose(Call call);
  void ServeUuid7Compose(Call call);
  void ServeUlidCompose(Call call);
  void ServeWorkers(Call call);
  void ServeBackup(Call call);
  // /api/v1/tags (the list; also /api/v1/tags/, whose {tag} is empty) and /api/v1/tags/{tag}.
  void ServeTags(Call call);
  // /api/v1/spaces and /api/v1/spaces/{space}, as the tags' routes.
  void ServeSpaces(Call call);
  // Sequences (I5): GET /api/v1/seq/{space} (the space's own sequence, key 0), POST of a list of
  // keys to it (one value each), GET /api/v1/seq/{space}/{key} and its /current.
  void ServeSpaceSeq(Call call);
  void ServeKeySeq(Call call);
  void ServeCurrentSeq(Call call);
  // Answers 400 and returns nothing for a bad space name or key.
  std::optional<std::string> AskedSpace(Call& call) const;
  std::optional<uint64_t> AskedKey(Call& call) const;
  void NextSeqs(std::string space, std::vector<uint64_t> keys, bool one, http::Respond respond);

  // What an IDs route asks for: a valid tag (the route's {tag}) and ?count= (1 on Leaf's
  // routes, which answer one ID).
  struct IdsAsked {
    std::string tag;
    int64_t count;
  };
  // Answers 400 and returns nothing for a bad tag or count.
  std::optional<IdsAsked> AskedIds(Call& call, bool leaf) const;
  // True for a request `methods` takes; else answers it (405, or OPTIONS on Leaf's routes).
  static bool MethodTaken(Methods methods, const http::HttpRequest& request,
                          const http::Respond& respond);
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
  // {"tag","ids"} of `count` UUIDv7s or ULIDs, drawn from the node's snowflake generator.
  void Id128s(const snowflake::Id128Layout& layout, const std::string& tag, int64_t count,
              http::Respond respond);
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
