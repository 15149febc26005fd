// The operator routes allocators and producers serve (OpsRoutes) and the gateway's Api shares
// (ServeOpsRoute): paths, methods and the readiness checks.
#include "http/ops_routes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kleaf::http {
namespace {

HttpResponse Call(const Handler& handler, std::string method, std::string target) {
  std::optional<HttpResponse> answer;
  handler(HttpRequest{std::move(method), std::move(target), "", ""},
          [&answer](HttpResponse r) { answer = std::move(r); });
  EXPECT_TRUE(answer.has_value());
  return answer.value_or(HttpResponse{});
}

TEST(OpsRoutesTest, ServesMetricsHealthAndReadiness) {
  bool ok = true;
  Handler routes = OpsRoutes("allocators", [&ok] {
    return std::vector<ReadyCheck>{{"kafka", true, "up"}, {"group", ok, "member"}};
  });
  EXPECT_EQ(Call(routes, "GET", "/metrics").status, 200);
  EXPECT_EQ(Call(routes, "GET", "/metrics").content_type, "text/plain; version=0.0.4");
  EXPECT_EQ(Call(routes, "GET", "/healthz").body, R"({"status":"ok"})");
  HttpResponse ready = Call(routes, "GET", "/readyz?verbose=1");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(nlohmann::json::parse(ready.body)["checks"].size(), 2u);
  ok = false;
  EXPECT_EQ(Call(routes, "GET", "/readyz").status, 503);
}

TEST(OpsRoutesTest, OtherPathsAre404NamingTheRoutes) {
  Handler routes = OpsRoutes("producers", {});
  for (const char* target : {"/", "/metrics/", "metrics", "/api/v1/status", "/readyzz"}) {
    HttpResponse r = Call(routes, "GET", target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["message"],
              "no such path (producers serve /metrics, /healthz, /readyz)")
        << target;
  }
  // An unknown path is 404 whatever the method.
  EXPECT_EQ(Call(routes, "POST", "/nothing").status, 404);
}

TEST(OpsRoutesTest, OnlyGet) {
  Handler routes = OpsRoutes("allocators", {});
  for (const char* target : {"/metrics", "/healthz", "/readyz"}) {
    HttpResponse r = Call(routes, "POST", target);
    EXPECT_EQ(r.status, 405) << target;
  }
  // Without checks /readyz is ready.
  EXPECT_EQ(Call(routes, "GET", "/readyz").status, 200);
}

TEST(OpsRoutesTest, ServeOpsRouteLeavesOtherNamesUnanswered) {
  bool answered = false;
  EXPECT_FALSE(ServeOpsRoute("status", "GET", {}, [&answered](HttpResponse) { answered = true; }));
  EXPECT_FALSE(answered);
  EXPECT_TRUE(ServeOpsRoute("healthz", "GET", {}, [&answered](HttpResponse) { answered = true; }));
  EXPECT_TRUE(answered);
}

}  // namespace
}  // namespace kleaf::http
