// HTTP request and response as plain structs (no Beast types), the handler signature the
// HttpServer calls, and the answers every kleaf HTTP server shares: errors, /metrics, /healthz,
// /readyz.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/ready_check.h"

namespace kleaf::http {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // path and query, as sent
  std::string body;
  std::string authorization;  // the Authorization header, if any
};

struct HttpResponse {
  int status = 200;
  // A media type that outlives the response (kleaf's are string literals, so a response costs no
  // allocation for it); empty: no Content-Type (an empty body).
  std::string_view content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // What an error body {"error":{"code","message"}} says, as values: HttpServerOptions::on_error
  // (the gateway's monitor) reads them instead of parsing the body back. Set by ErrorResponse and
  // the server's own rejections, empty on every other answer. `error_code` outlives the response
  // like `content_type` (CodeName's names and the server's own codes are string literals).
  std::string_view error_code;
  std::string error_message;
};

using Respond = std::function<void(HttpResponse)>;
// Answers one request through `respond`, at once or later from any thread.
using Handler = std::function<void(HttpRequest, Respond)>;

// Builds the JSON error body {"error":{"code","message"}} with the status of `error.code`, and
// Retry-After on 503.
HttpResponse ErrorResponse(const Error& error, int retry_after_s = 1);
// 405 with `Allow: <allow>`; HEAD is added after a leading GET unless it follows already
// ("GET" -> "GET, HEAD").
HttpResponse MethodNotAllowed(std::string allow);

// GET /metrics: Registry::Default() in the Prometheus text format 0.0.4.
HttpResponse MetricsResponse();
// GET /healthz: the process is alive and its HTTP threads answer.
HttpResponse HealthResponse();

using kleaf::ReadyCheck;
// GET /readyz: 200 when every check is ok, else 503; the JSON body lists the checks either way:
// {"ready":bool,"checks":[{"name","ok","detail"}...]}.
HttpResponse ReadyResponse(const std::vector<ReadyCheck>& checks);

// The path of a target without its query string.
std::string_view PathOf(std::string_view target);

}  // namespace kleaf::http
