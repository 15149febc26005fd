#include "http/ops_routes.h"

#include <utility>

namespace kleaf::http {

std::string_view OpsRouteOf(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  for (std::string_view route : {"/metrics", "/healthz", "/readyz"}) {
    if (path == route) return route;
  }
  return "other";
}

bool ServeOpsRoute(std::string_view name, std::string_view method, const ReadyChecks& ready_checks,
                   const Respond& respond) {
  if (name != "metrics" && name != "healthz" && name != "readyz") return false;
  if (method != "GET") {
    respond(MethodNotAllowed("GET"));
  } else if (name == "metrics") {
    respond(MetricsResponse());
  } else if (name == "healthz") {
    respond(HealthResponse());
  } else {
    respond(ReadyResponse(ready_checks ? ready_checks() : std::vector<ReadyCheck>{}));
  }
  return true;
}

Handler OpsRoutes(std::string role_plural, ReadyChecks ready_checks) {
  return [role_plural = std::move(role_plural), ready_checks = std::move(ready_checks)](
             HttpRequest request, Respond respond) {
    const std::string_view path = PathOf(request.target);
    // Only the exact paths: "/metrics", not "metrics" or "/metrics/".
    const std::string_view name = path.starts_with('/') ? path.substr(1) : std::string_view();
    if (ServeOpsRoute(name, request.method, ready_checks, respond)) return;
    respond(ErrorResponse(Error{
        Code::kNotFound, "no such path (" + role_plural + " serve /metrics, /healthz, /readyz)"}));
  };
}

}  // namespace kleaf::http
