// The operator routes every kleaf role serves the same way: GET /metrics, /healthz and /readyz.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http.h"

namespace kleaf::http {

// What /readyz checks; called on the I/O thread of each GET /readyz.
using ReadyChecks = std::function<std::vector<ReadyCheck>()>;

// The route labels of the operator routes, and "other" for any other path.
inline constexpr std::string_view kOpsRoutes[] = {"/metrics", "/healthz", "/readyz", "other"};

// "/metrics", "/healthz" or "/readyz" for a target on one of them (query ignored), else "other":
// the route label of the requests metrics (RequestMetrics) of a server with only these routes.
std::string_view OpsRouteOf(std::string_view target);

// Answers the operator route `name` ("metrics", "healthz" or "readyz": the only segment of the
// request's path) through `respond` and returns true; other methods than GET get 405. Returns
// false without answering for any other name.
bool ServeOpsRoute(std::string_view name, std::string_view method, const ReadyChecks& ready_checks,
                   const Respond& respond);

// The whole handler of a server that has no routes of its own (allocators, producers): the
// operator routes, and 404 "no such path (<role_plural> serve /metrics, /healthz, /readyz)" for
// every other path.
Handler OpsRoutes(std::string role_plural, ReadyChecks ready_checks);

}  // namespace kleaf::http
