// The HTTP API of gateways and of standalone kleaf (DESIGN.md, "HTTP API"), independent of the
// HTTP library: a request goes in, a response comes out through a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "allocator/allocator.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/worker_pool.h"
#include "gateway/segment_cache.h"
#include "gateway/snowflake.h"

namespace kleaf::gateway {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // path and query, as sent
  std::string body;
  std::string authorization;  // the Authorization header, if any
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using Respond = std::function<void(HttpResponse)>;

// Builds the JSON error body {"error":{"code","message"}} with the status of `error.code`, and
// Retry-After on 503.
HttpResponse ErrorResponse(const Error& error, int retry_after_s = 1);

struct ApiOptions {
  int64_t max_batch = 10000;
  int64_t wait_ms = 100;
  int retry_after_s = 1;
  std::string admin_token;  // required as "Authorization: Bearer <token>" on /api/v1/tags
  // This node's worker lease as a JSON object, for /api/v1/workers; empty when the worker id
  // comes from config (standalone) and there is no registry to ask.
  std::function<std::string()> lease_status;
};

// Routes requests to segment buffers, the snowflake generator and the allocator's tag admin.
// Thread-safe. Handle() answers at once when no waiting is needed (an ID from a loaded segment);
// otherwise the wait runs on `blocking` and `respond` is called from that thread.
class Api {
 public:
  Api(ApiOptions options, SegmentCache& segments, SnowflakeGenerator& snowflake,
      allocator::Allocator& allocator, WorkerPool& blocking);

  void Handle(HttpRequest request, Respond respond);

 private:
  void Segment(const std::string& tag, int64_t count, bool plain, Respond respond);
  void Snowflake(const std::string& tag, int64_t count, bool plain, Respond respond);
  void Decode(const std::string& id_text, Respond respond);
  void Tags(const HttpRequest& request, const std::string& tag, Respond respond);
  void Workers(Respond respond);
  bool Authorized(const std::string& authorization) const;

  const ApiOptions options_;
  SegmentCache& segments_;
  SnowflakeGenerator& snowflake_;
  allocator::Allocator& allocator_;
  WorkerPool& blocking_;
};

}  // namespace kleaf::gateway
