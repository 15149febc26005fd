#include "http/http.h"

#include <nlohmann/json.hpp>

#include "base/metrics.h"

namespace kleaf::http {

using nlohmann::json;

HttpResponse ErrorResponse(const Error& error, int retry_after_s) {
  HttpResponse r;
  r.status = HttpStatus(error.code);
  // A message may quote what a client sent: bytes that are not UTF-8 become U+FFFD instead of
  // throwing (an exception here ended the process).
  r.body = json{{"error", {{"code", CodeName(error.code)}, {"message", error.message}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
  r.error_code = CodeName(error.code);
  r.error_message = error.message;
  if (r.status == 503 && error.code != Code::kResourceExhausted) {
    r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  }
  return r;
}

HttpResponse MethodNotAllowed(std::string allow) {
  // HttpServer answers HEAD wherever GET is served (RFC 9110 §9.3.2).
  if (allow == "GET" || (allow.starts_with("GET,") && !allow.starts_with("GET, HEAD"))) {
    allow.insert(3, ", HEAD");
  }
  HttpResponse r =
      ErrorResponse(Error{Code::kMethodNotAllowed, "method not allowed; use " + allow});
  r.headers.emplace_back("Allow", std::move(allow));
  return r;
}

HttpResponse MetricsResponse() {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics::Registry::Default().Render();
  return r;
}

HttpResponse HealthResponse() {
  HttpResponse r;
  r.body = R"({"status":"ok"})";
  return r;
}

HttpResponse ReadyResponse(const std::vector<ReadyCheck>& checks) {
  bool ready = true;
  json list = json::array();
  for (const auto& c : checks) {
    ready = ready && (c.ok || !c.required);
    list.push_back(
        {{"name", c.name}, {"ok", c.ok}, {"required", c.required}, {"detail", c.detail}});
  }
  HttpResponse r;
  r.status = ready ? 200 : 503;
  r.body = json{{"ready", ready}, {"checks", list}}.dump();
  if (!ready) r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

}  // namespace kleaf::http
