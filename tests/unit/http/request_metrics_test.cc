// Per-route request metrics (RequestMetrics): the route labels stay a fixed set whatever targets
// clients send, methods outside the standard ones count as "other", and every route's series is
// there at 0 before its first request.
#include "http/request_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/ops_routes.h"

namespace kleaf::http {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(RequestMetricsTest, EveryRouteIsPresentAtZeroFromTheStart) {
  metrics::Registry registry;
  RequestMetrics requests(registry, OpsRouteOf, kOpsRoutes);
  const std::string text = registry.Render();
  for (std::string_view route : kOpsRoutes) {
    const std::string r(route);
    EXPECT_TRUE(
        Has(text, R"(kleaf_http_requests_total{route=")" + r + R"(",method="GET",status="200"} 0)"))
        << r << "\n"
        << text;
    EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_count{route=")" + r + R"("} 0)"))
        << r << "\n"
        << text;
  }
}

TEST(RequestMetricsTest, CountsPerRouteMethodAndStatusWithBoundedLabels) {
  metrics::Registry registry;
  RequestMetrics requests(registry, OpsRouteOf, kOpsRoutes);
  AnswerHook hook = requests.Hook();
  hook("GET", "/metrics", 200, microseconds(80));
  hook("GET", "/metrics?x=1", 200, microseconds(80));
  hook("HEAD", "/healthz", 200, microseconds(30));
  hook("POST", "/readyz", 405, microseconds(30));
  // Paths and methods clients make up do not become labels of their own.
  hook("GET", "/no/such/path", 404, microseconds(10));
  hook("GET", "/another-made-up-path", 404, microseconds(10));
  hook("BREW", "/metrics", 405, microseconds(10));
  const std::string text = registry.Render();
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/metrics",method="GET",status="200"} 2)"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/healthz",method="HEAD",status="200"} 1)"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/readyz",method="POST",status="405"} 1)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_requests_total{route="other",method="GET",status="404"} 2)"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/metrics",method="other",status="405"} 1)"))
      << text;
  EXPECT_EQ(text.find("made-up"), std::string::npos) << text;
  EXPECT_EQ(text.find("BREW"), std::string::npos) << text;
}

// A status without a slot of its own (none of kleaf's handlers answers 418) still counts under
// its exact value; threads recording at once lose no answer.
TEST(RequestMetricsTest, UnusualStatusesAndConcurrentAnswersAreCountedExactly) {
  metrics::Registry registry;
  RequestMetrics requests(registry, OpsRouteOf, kOpsRoutes);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&requests] {
      for (int i = 0; i < 5000; ++i) {
        requests.Record("GET", "/healthz", 200, microseconds(1));
        requests.Record("GET", "/healthz", 418, microseconds(1));
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string text = registry.Render();
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/healthz",method="GET",status="200"} 20000)"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(kleaf_http_requests_total{route="/healthz",method="GET",status="418"} 20000)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_count{route="/healthz"} 40000)")) << text;
}

TEST(RequestMetricsTest, LatencyLandsInItsRoutesBuckets) {
  metrics::Registry registry;
  RequestMetrics requests(registry, OpsRouteOf, kOpsRoutes);
  requests.Record("GET", "/metrics", 200, microseconds(70));
  requests.Record("GET", "/metrics", 200, milliseconds(30));
  const std::string text = registry.Render();
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_count{route="/metrics"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_bucket{route="/metrics",le="5e-05"} 0)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_bucket{route="/metrics",le="0.0001"} 1)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_bucket{route="/metrics",le="0.05"} 2)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kleaf_http_request_seconds_count{route="/healthz"} 0)")) << text;
}

}  // namespace
}  // namespace kleaf::http
