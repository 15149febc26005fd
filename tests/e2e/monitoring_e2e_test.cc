// What operators see of a real `kleaf standalone`: /metrics moving with the IDs issued and the
// errors answered, /readyz, and the monitoring page rendered by headless Chromium.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// The value of one series of a /metrics text, e.g. R"(kleaf_x{tag="a"})"; nullopt when absent.
std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return std::nullopt;
}

std::string Metrics(HttpClient& client) {
  auto r = client.Get("/metrics");
  if (!r || r->status != 200) {
    ADD_FAILURE() << "GET /metrics: " << (r ? r->body : r.error());
    return "";
  }
  EXPECT_EQ(r->Header("Content-Type"), "text/plain; version=0.0.4");
  return r->body;
}

class MonitoringE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = dir_.WriteFile(
        "kleaf.yaml", TestConfig(dir_.path() / "state").Set("snowflake.worker_id", "37").Yaml());
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    server_ = std::move(*server);
    client_ = std::make_unique<HttpClient>(server_.port);
  }
  void CreateTag(const std::string& tag, int step) {
    auto r = client_->Put("/api/v1/tags/" + tag, "{\"step\":" + std::to_string(step) + "}",
                          Bearer(kAdminToken));
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error());
  }
  void Issue(const std::string& target) {
    auto r = client_->Get(target);
    ASSERT_TRUE(r && r->status == 200) << target << ": " << (r ? r->body : r.error());
  }

  TempDir dir_;
  Server server_;
  std::unique_ptr<HttpClient> client_;
};

// The standard process_* series and kleaf_build_info, from the first scrape.
TEST_F(MonitoringE2eTest, ProcessAndBuildInfoSeriesArePresentFromTheStart) {
  const std::string m = Metrics(*client_);
  EXPECT_NE(m.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos) << m;
  EXPECT_GE(MetricValue(m, "process_cpu_seconds_total").value_or(-1), 0) << m;
  // A process with RocksDB open and HTTP threads: more than a megabyte resident, a few fds.
  EXPECT_GT(MetricValue(m, "process_resident_memory_bytes").value_or(0), 1e6) << m;
  EXPECT_GE(MetricValue(m, "process_virtual_memory_bytes").value_or(0),
            MetricValue(m, "process_resident_memory_bytes").value_or(0));
  EXPECT_GE(MetricValue(m, "process_open_fds").value_or(0), 4) << m;
  EXPECT_GE(MetricValue(m, "process_max_fds").value_or(0),
            MetricValue(m, "process_open_fds").value_or(0));
  // Started within the last 10 minutes by the test machine's clock.
  const double started = MetricValue(m, "process_start_time_seconds").value_or(0);
  const double now = static_cast<double>(WallClockMs()) / 1000;
  EXPECT_LE(started, now + 1) << m;
  EXPECT_GE(started, now - 600) << m;
  static const std::regex kBuildInfo(
      R"re(\nkleaf_build_info\{version="0\.\d+\.\d+",librdkafka="2\.14\.\d+",rocksdb="\d+\.\d+\.\d+"\} 1\n)re");
  EXPECT_TRUE(std::regex_search(m, kBuildInfo)) << m;
}

// What promtool's lint checks of names: a counter ends in _total, nothing else does, and every
// sample belongs to a family announced by HELP and TYPE before it.
TEST_F(MonitoringE2eTest, EveryFamilyIsAnnouncedAndNamedByItsType) {
  CreateTag("lint", 100);
  Issue("/api/segment/get/lint");
  client_->Get("/api/segment/get/no-such-tag");  // an error series with a count
  const std::string m = Metrics(*client_);
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  std::istringstream lines(m);
  int samples = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# HELP ")) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.starts_with("# TYPE ")) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      EXPECT_TRUE(helped.contains(name)) << "TYPE before HELP: " << name;
      types[name] = type;
      EXPECT_EQ(type == "counter", name.ends_with("_total")) << name << " is a " << type;
    } else if (!line.empty()) {
      ++samples;
      std::string name = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string base = name.substr(0, name.size() - std::strlen(suffix));
        if (name.ends_with(suffix) && types[base] == "histogram") name = base;
      }
      EXPECT_TRUE(types.contains(name)) << "a sample of an unannounced family: " << line;
    }
  }
  EXPECT_GT(samples, 20) << m;
}

TEST_F(MonitoringE2eTest, IssuedIdsCountExactlyPerTagAndMode) {
  CreateTag("mon-a", 50);
  const std::string seg = R"(kleaf_ids_issued_total{tag="mon-a",mode="segment"})";
  const std::string sf = R"(kleaf_ids_issued_total{tag="mon-s",mode="snowflake"})";
  EXPECT_EQ(MetricValue(Metrics(*client_), seg).value_or(0), 0);
  Issue("/api/v1/segment/mon-a?count=3");
  Issue("/api/segment/get/mon-a");
  Issue("/api/v1/segment/mon-a?count=120");  // spans three segments of 50+
  Issue("/api/v1/snowflake/mon-s?count=10");
  Issue("/api/snowflake/get/mon-s");
  std::string m = Metrics(*client_);
  EXPECT_EQ(MetricValue(m, seg), 124) << m;
  EXPECT_EQ(MetricValue(m, sf), 11) << m;
  Issue("/api/v1/segment/mon-a?count=1000");
  EXPECT_EQ(MetricValue(Metrics(*client_), seg), 1124);

  // Every family the operations guide documents for a standalone node is there.
  m = Metrics(*client_);
  for (const char* family :
       {"kleaf_ids_issued_total counter", "kleaf_segment_fetch_seconds histogram",
        "kleaf_segment_buffer_ids gauge", "kleaf_segment_step gauge",
        "kleaf_worker_lease_held gauge", "kleaf_snowflake_worker_id gauge",
        "kleaf_snowflake_timestamp_remaining_seconds gauge"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family << "\n"
                                                                                 << m;
  }
  EXPECT_EQ(MetricValue(m, "kleaf_snowflake_worker_id"), 37);
  EXPECT_EQ(MetricValue(m, "kleaf_worker_lease_held"), 1);
  // The default layout runs out in 2080: decades left, counted in seconds.
  EXPECT_GT(MetricValue(m, "kleaf_snowflake_timestamp_remaining_seconds").value_or(0),
            50.0 * 365 * 86400);
  EXPECT_GT(MetricValue(m, R"(kleaf_segment_buffer_ids{tag="mon-a"})").value_or(0), 0);
}

TEST_F(MonitoringE2eTest, ErrorAnswersAreCountedPerCode) {
  const std::string bad = R"(kleaf_http_errors_total{code="invalid_argument",status="400"})";
  const std::string missing = R"(kleaf_http_errors_total{code="not_found",status="404"})";
  std::string m = Metrics(*client_);
  const double bad_before = MetricValue(m, bad).value_or(0);
  const double missing_before = MetricValue(m, missing).value_or(0);
  auto r = client_->Get("/api/v1/segment/mon-x?count=0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = client_->Get("/no/such/path");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  // A request the HTTP parser rejects is counted too (the server answers it, not the Api).
  auto raw = RawConnection::Connect(server_.port);
  ASSERT_TRUE(raw) << raw.error();
  ASSERT_TRUE(raw->Send("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"));
  EXPECT_EQ(StatusOf(raw->ReadResponse(seconds(5)).data), 400);
  m = Metrics(*client_);
  EXPECT_EQ(MetricValue(m, bad), bad_before + 2) << m;
  EXPECT_EQ(MetricValue(m, missing), missing_before + 1) << m;

  auto status = client_->Get("/api/v1/status");
  ASSERT_TRUE(status && status->status == 200);
  json s = json::parse(status->body);
  ASSERT_GE(s["recent_errors"].size(), 3u);
  EXPECT_EQ(s["recent_errors"][0]["path"], "/api/v1/segment/mon-x");
  EXPECT_EQ(s["recent_errors"][1]["path"], "/no/such/path");
  EXPECT_EQ(s["recent_errors"][1]["code"], "not_found");
}

// Every answer counts once under its route's label (the tag is not a label), with its method and
// status, and its time lands in the route's latency histogram.
TEST_F(MonitoringE2eTest, RequestsAreCountedPerRouteMethodAndStatus) {
  CreateTag("mon-r", 100);
  const std::string ok =
      R"(kleaf_http_requests_total{route="/api/v1/segment/{tag}",method="GET",status="200"})";
  const std::string head =
      R"(kleaf_http_requests_total{route="/api/v1/status",method="HEAD",status="200"})";
  const std::string wrong_method =
      R"(kleaf_http_requests_total{route="/api/v1/segment/{tag}",method="DELETE",status="405"})";
  const std::string latency = R"(kleaf_http_request_seconds_count{route="/api/v1/segment/{tag}"})";
  std::string m = Metrics(*client_);
  // Present at 0 before the first request of the route.
  ASSERT_TRUE(MetricValue(m, ok)) << m;
  const double ok_before = *MetricValue(m, ok);
  const double latency_before = MetricValue(m, latency).value_or(-1);
  const double head_before = MetricValue(m, head).value_or(0);
  const double wrong_before = MetricValue(m, wrong_method).value_or(0);
  for (int i = 0; i < 3; ++i) Issue("/api/v1/segment/mon-r");
  auto raw = RawConnection::Connect(server_.port);
  ASSERT_TRUE(raw) << raw.error();
  ASSERT_TRUE(raw->Send("HEAD /api/v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(StatusOf(raw->ReadUntilClosed(seconds(5)).data), 200);
  auto r = client_->Request("DELETE", "/api/v1/segment/mon-r", "", {});
  ASSERT_TRUE(r && r->status == 405) << (r ? r->body : r.error());
  m = Metrics(*client_);
  EXPECT_EQ(MetricValue(m, ok), ok_before + 3) << m;
  EXPECT_EQ(MetricValue(m, latency), latency_before + 4) << m;
  EXPECT_EQ(MetricValue(m, head), head_before + 1) << m;
  EXPECT_EQ(MetricValue(m, wrong_method), wrong_before + 1) << m;
  EXPECT_EQ(m.find("mon-r\",method"), std::string::npos) << "a tag became a route label:\n" << m;
}

TEST_F(MonitoringE2eTest, ReadyAndHealthyWhileServing) {
  auto ready = client_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  json j = json::parse(ready->body);
  EXPECT_EQ(j["ready"], true);
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// The <tr> of `tag` in the rendered table of buffers; empty when there is none.
std::string TagRow(const std::string& dom, const std::string& tag) {
  auto start = dom.find("<tr data-tag=\"" + tag + "\">");
  if (start == std::string::npos) return "";
  return dom.substr(start, dom.find("</tr>", start) - start);
}

std::string Cell(const std::string& cls, const std::string& value) {
  return cls + "\">" + value + "</td>";
}

TEST_F(MonitoringE2eTest, PageShowsTheTagsBuffersAndWorkerOfTheStatusEndpoint) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it); the page is "
                    "not rendered";
  }
  CreateTag("page-a", 100);
  CreateTag("page-b", 1000);
  Issue("/api/v1/segment/page-a?count=42");
  Issue("/api/v1/segment/page-b?count=7");
  // Wait for the preloads to land so that the values stay put while the page renders.
  json status;
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (true) {
    auto r = client_->Get("/api/v1/status");
    ASSERT_TRUE(r && r->status == 200);
    status = json::parse(r->body);
    bool settled = status["tags"].size() == 2;
    for (const auto& t : status["tags"]) settled = settled && !t["fetching"].get<bool>();
    if (settled) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "buffers still fetching: " << r->body;
  }

  const auto dom_file = dir_.path() / "dom.html";
  const std::string command =
      "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--user-data-dir=" +
      (dir_.path() / "chromium").string() +
      " --virtual-time-budget=5000 --dump-dom http://127.0.0.1:" + std::to_string(server_.port) +
      "/ > " + dom_file.string() + " 2>" + (dir_.path() / "chromium.log").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(dir_.path() / "chromium.log");
  const std::string dom = ReadFile(dom_file);

  EXPECT_NE(dom.find("<dd id=\"worker-id\">37</dd>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<dd id=\"worker-source\">config</dd>"), std::string::npos);
  EXPECT_EQ(dom.find("class=\"show\""), std::string::npos)
      << "the page says it cannot reach the status endpoint";
  for (const auto& t : status["tags"]) {
    const std::string tag = t["tag"];
    std::string row = TagRow(dom, tag);
    ASSERT_FALSE(row.empty()) << "no row for " << tag << " in\n" << dom;
    EXPECT_NE(row.find(Cell("tag", tag)), std::string::npos) << row;
    EXPECT_NE(row.find(Cell("num active-next", t["active"]["next"])), std::string::npos) << row;
    EXPECT_NE(row.find(Cell("num active-end", t["active"]["end"])), std::string::npos) << row;
    EXPECT_NE(row.find(Cell("num step", std::to_string(t["step"].get<int64_t>()))),
              std::string::npos)
        << row;
    EXPECT_NE(row.find(Cell("num ids-left", std::to_string(t["ids_left"].get<int64_t>()))),
              std::string::npos)
        << row;
  }
  // Non-trivial values: IDs were issued, so "next" moved past the start.
  EXPECT_EQ(status["tags"][0]["tag"], "page-a");
  EXPECT_EQ(status["tags"][0]["active"]["next"], "43");
}

}  // namespace
}  // namespace kleaf::e2e
