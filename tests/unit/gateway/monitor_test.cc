// The operator view of a gateway: /api/v1/status, /readyz, /metrics and the page at "/", through
// the Api with a fake allocator (in-memory tags, real allocation rules).
#include "gateway/monitor.h"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

#include "allocator/allocation.h"
#include "allocator/allocator.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/worker_pool.h"
#include "gateway/api.h"

namespace kleaf::gateway {

using http::HttpRequest;
using http::HttpResponse;
using http::ReadyCheck;
using http::ReadyResponse;
using snowflake::SnowflakeGenerator;
using snowflake::SnowflakeLayout;
using snowflake::WorkerLease;

namespace {

using nlohmann::json;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kWorkerId = 7;

// Segments from in-memory tags, answered inline; everything else fails.
class FakeAllocator final : public allocator::Allocator {
 public:
  explicit FakeAllocator(Clock& clock) : clock_(clock) {}
  void AddTag(const std::string& tag, int64_t step, state::IdMode mode = state::IdMode::kPlain) {
    std::lock_guard lock(mu_);
    tags_[tag] = state::TagRecord{tag, 1, step, "", 0, false};
    if (mode != state::IdMode::kPlain) {
      tags_[tag].id_mode = mode;
      tags_[tag].id_key = "00112233445566778899aabbccddeeff";
      tags_[tag].id_base = 1;
    }
  }
  // Runs inside each segment fetch, before it answers (a test moves the clock: the fetch's time).
  void SetFetchHook(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    fetch_hook_ = std::move(hook);
  }
  void Submit(allocator::AnyCall call) override {
    std::visit(
        [this]<typename Op>(allocator::Call<Op>& c) {
          if constexpr (std::is_same_v<Op, allocator::op::Allocate>) {
            Allocate(c.op, std::move(c.done));
          } else {
            c.done(Unsupported());
          }
        },
        call);
  }

 private:
  void Allocate(const allocator::op::Allocate& op, allocator::Callback<allocator::Segment> done) {
    Result<allocator::Segment> r = Fail(Code::kNotFound, "unknown tag '" + op.tag + "'");
    {
      std::lock_guard lock(mu_);
      if (fetch_hook_) fetch_hook_();
      if (auto it = tags_.find(op.tag); it != tags_.end()) {
        r = allocator::ReserveSegment(it->second, op.step, 1'000'000, clock_.NowMs());
      }
    }
    done(std::move(r));
  }
  static std::unexpected<Error> Unsupported() {
    return std::unexpected(Error{Code::kInternal, "not in this fake"});
  }
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, state::TagRecord> tags_;
  std::function<void()> fetch_hook_;
};

// The value of one series in a /metrics text, e.g. Value(text, R"(kleaf_x{tag="a"})").
std::optional<double> Value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return std::nullopt;
}

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { Make({}); }
  void TearDown() override { pool_.Stop(); }

  void Make(std::function<WorkerLease::Status()> lease,
            std::function<std::vector<ReadyCheck>()> checks = {}) {
    api_.reset();
    monitor_.reset();
    monitor_ = std::make_unique<Monitor>(
        Monitor::Options{"gateway", "gw-test", std::move(lease), std::move(checks), 20}, cache_,
        snowflake_, clock_);
    ApiOptions o;
    o.max_batch = 1000;
    o.wait_ms = 1000;
    o.monitor = monitor_.get();
    api_ = std::make_unique<Api>(o, cache_, snowflake_, allocator_, pool_);
  }

  // Like the HttpServer: answers through the Api and reports errors to the monitor.
  HttpResponse Get(const std::string& target) {
    std::promise<HttpResponse> answer;
    auto future = answer.get_future();
    api_->Handle(HttpRequest{"GET", target, "", ""},
                 [&answer](HttpResponse r) { answer.set_value(std::move(r)); });
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "no answer to " << target;
      return {};
    }
    HttpResponse r = future.get();
    if (r.status >= 400) monitor_->RecordError("GET", target, r);
    return r;
  }
  json Status() {
    HttpResponse r = Get("/api/v1/status");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "application/json");
    return json::parse(r.body);
  }
  std::string Metrics() {
    HttpResponse r = Get("/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4");
    return r.body;
  }

  ManualClock clock_{kNow};
  FakeAllocator allocator_{clock_};
  SegmentCache cache_{allocator_, clock_,
                      SegmentBuffer::Options{.max_step = 1'000'000, .preload_percent = 10}};
  SnowflakeGenerator snowflake_{SnowflakeLayout::Default(), {kWorkerId, false, 5}, clock_};
  WorkerPool pool_{1, "monitor-test"};
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<Api> api_;
};

TEST_F(MonitorTest, StatusShowsBothSegmentsOfEachTag) {
  allocator_.AddTag("st-order", 100);
  // Past 10% of the first segment: the standby is fetched, with the step doubled (the first
  // segment lasted no time at all on the manual clock).
  ASSERT_EQ(Get("/api/v1/segment/st-order?count=15").status, 200);
  json s = Status();
  ASSERT_EQ(s["tags"].size(), 1u) << s.dump();
  const json& t = s["tags"][0];
  EXPECT_EQ(t["tag"], "st-order");
  EXPECT_EQ(t["active"]["start"], "1");
  EXPECT_EQ(t["active"]["next"], "16");
  EXPECT_EQ(t["active"]["end"], "101");
  EXPECT_EQ(t["standby"]["start"], "101");
  EXPECT_EQ(t["standby"]["end"], "301");
  EXPECT_EQ(t["next_ready"], true);
  EXPECT_EQ(t["fetching"], false);
  EXPECT_EQ(t["step"], 200);
  EXPECT_EQ(t["min_step"], 100);
  EXPECT_EQ(t["ids_left"], 85 + 200);
  EXPECT_TRUE(t["last_error"].is_null());
  EXPECT_EQ(s["node"]["id"], "gw-test");
  EXPECT_EQ(s["node"]["role"], "gateway");
}

TEST_F(MonitorTest, StatusShowsAWorkerIdFromConfigAsHeld) {
  json s = Status();
  EXPECT_EQ(s["worker"]["worker_id"], kWorkerId);
  EXPECT_EQ(s["worker"]["source"], "config");
  EXPECT_EQ(s["worker"]["held"], true);
  EXPECT_EQ(s["ready"]["ready"], true);
  const int64_t remaining = (SnowflakeLayout::Default().last_ms() - kNow) / 1000;
  EXPECT_EQ(s["snowflake"]["timestamp_remaining_s"], remaining);
  EXPECT_TRUE(s["snowflake"]["last_issued"].is_null()) << "nothing issued yet";
  ASSERT_EQ(Get("/api/v1/snowflake/x").status, 200);
  EXPECT_EQ(Status()["snowflake"]["last_issued"], FormatUtcMs(kNow));
}

TEST_F(MonitorTest, StatusAndReadinessFollowTheLease) {
  WorkerLease::Status lease{12, 25000, "", -3};
  std::mutex mu;
  Make([&] {
    std::lock_guard lock(mu);
    return lease;
  });
  json s = Status();
  EXPECT_EQ(s["worker"]["worker_id"], kWorkerId) << "the generator's id is what IDs carry";
  EXPECT_EQ(s["worker"]["source"], "registry");
  EXPECT_EQ(s["worker"]["valid_for_ms"], 25000);
  EXPECT_EQ(s["worker"]["clock_offset_ms"], -3);
  EXPECT_EQ(Get("/readyz").status, 200);

  {
    std::lock_guard lock(mu);
    lease.last_error = "no answer from the worker registry";
  }
  // A failed renewal while the lease still holds (a leader moving, a broker restarting): the node
  // still issues snowflake IDs, so it stays ready and says why the renewal failed.
  HttpResponse r = Get("/readyz");
  EXPECT_EQ(r.status, 200);
  json body = json::parse(r.body);
  EXPECT_EQ(body["ready"], true);
  ASSERT_EQ(body["checks"].size(), 2u) << body.dump();
  EXPECT_EQ(body["checks"][0]["name"], "worker_lease");
  EXPECT_NE(body["checks"][0]["detail"].get<std::string>().find("no answer"), std::string::npos);
  EXPECT_EQ(body["checks"][1]["name"], "serving");
  EXPECT_EQ(body["checks"][1]["required"], true);

  {
    std::lock_guard lock(mu);
    lease = {12, 0, "", std::nullopt};  // expired
  }
  // No lease, no allocators' check, nothing buffered: nothing to hand out.
  r = Get("/readyz");
  EXPECT_EQ(r.status, 503);
  body = json::parse(r.body);
  EXPECT_EQ(body["checks"][0]["ok"], false);
  EXPECT_EQ(body["checks"][1]["ok"], false);
  std::string m = Metrics();
  EXPECT_EQ(Value(m, "kleaf_worker_lease_held"), 0);
  EXPECT_EQ(Value(m, "kleaf_worker_lease_expiry_seconds"), 0);
}

// A gateway is ready while it can hand out IDs: with Kafka and the allocators away it stays ready
// while the lease holds (snowflake IDs) and then while a buffer holds segment IDs; the failing
// checks are listed, not required. Only with nothing left to hand out is it unready.
TEST_F(MonitorTest, AGatewayStaysReadyWhileItCanHandOutIds) {
  WorkerLease::Status lease{12, 25000, "no answer from the worker registry", std::nullopt};
  bool kafka_ok = true;
  bool allocators_ok = true;
  std::mutex mu;
  Make(
      [&] {
        std::lock_guard lock(mu);
        return lease;
      },
      [&] {
        std::lock_guard lock(mu);
        return std::vector<ReadyCheck>{{"kafka", kafka_ok, "probe"},
                                       {"allocators", allocators_ok, "replies"}};
      });
  allocator_.AddTag("rd-order", 100);
  ASSERT_EQ(Get("/api/v1/segment/rd-order?count=5").status, 200);  // 95 IDs buffered, at least
  EXPECT_EQ(Get("/readyz").status, 200);
  auto check = [](const json& body, const std::string& name) {
    for (const auto& c : body["checks"]) {
      if (c["name"] == name) return c;
    }
    return json();
  };
  {
    std::lock_guard lock(mu);
    kafka_ok = allocators_ok = false;
  }
  HttpResponse r = Get("/readyz");
  EXPECT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(check(body, "kafka")["ok"], false);
  EXPECT_EQ(check(body, "kafka")["required"], false);
  EXPECT_EQ(check(body, "allocators")["required"], false);
  EXPECT_EQ(check(body, "worker_lease")["required"], false);
  EXPECT_EQ(check(body, "serving")["ok"], true);
  EXPECT_NE(check(body, "serving")["detail"].get<std::string>().find("snowflake IDs"),
            std::string::npos)
      << body.dump();

  {
    std::lock_guard lock(mu);
    lease = {12, 0, "", std::nullopt};  // the lease ran out too: the buffer still serves
  }
  r = Get("/readyz");
  EXPECT_EQ(r.status, 200) << r.body;
  body = json::parse(r.body);
  const std::string detail = check(body, "serving")["detail"];
  EXPECT_NE(detail.find("buffered segment IDs of 1 tag(s)"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("snowflake"), std::string::npos) << detail;
  EXPECT_EQ(Get("/api/v1/segment/rd-order").status, 200) << "ready, and it does hand out IDs";

  cache_.Forget("rd-order");  // nothing buffered any more
  r = Get("/readyz");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("cannot hand out IDs"), std::string::npos) << r.body;
  {
    std::lock_guard lock(mu);
    allocators_ok = true;  // the allocators answer again: segments on demand
  }
  EXPECT_EQ(Get("/readyz").status, 200);
}

TEST_F(MonitorTest, ExtraReadyChecksDecideToo) {
  bool kafka_ok = true;
  Make({}, [&] { return std::vector<ReadyCheck>{{"kafka", kafka_ok, "probe"}}; });
  EXPECT_EQ(Get("/readyz").status, 200);
  kafka_ok = false;
  HttpResponse r = Get("/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("\"kafka\""), std::string::npos) << r.body;
}

TEST_F(MonitorTest, RecentErrorsKeepTheLastTwentyWithCodeAndPath) {
  for (int i = 0; i < 25; ++i) Get("/api/v1/segment/bad%20tag" + std::to_string(i));
  Get("/api/v1/segment/st-unknown");
  json s = Status();
  const json& errors = s["recent_errors"];
  ASSERT_EQ(errors.size(), 20u);
  EXPECT_EQ(errors.back()["path"], "/api/v1/segment/st-unknown");
  EXPECT_EQ(errors.back()["status"], 404);
  EXPECT_EQ(errors.back()["code"], "not_found");
  EXPECT_EQ(errors.front()["path"], "/api/v1/segment/bad%20tag6") << "the oldest are dropped";
  EXPECT_EQ(errors.front()["code"], "invalid_argument");
  EXPECT_FALSE(errors.front()["message"].get<std::string>().empty());
}

// The code and message come from the answer's values (HttpResponse::error_code), not from
// parsing its body; an answer without them is recorded by its status.
TEST_F(MonitorTest, RecentErrorsTakeTheCodeTheAnswerCarries) {
  HttpResponse carried;
  carried.status = 431;
  carried.body = "not JSON";
  carried.error_code = "request_header_fields_too_large";
  carried.error_message = std::string(400, 'm');
  monitor_->RecordError("GET", "/a?x=1", carried);
  HttpResponse bare;
  bare.status = 502;
  bare.body = R"({"error":{"code":"not_this","message":"nor this"}})";
  monitor_->RecordError("PUT", "/b", bare);
  const auto errors = monitor_->RecentErrors();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "/a");
  EXPECT_EQ(errors[0].code, "request_header_fields_too_large");
  EXPECT_EQ(errors[0].message, std::string(300, 'm')) << "cut to 300 characters";
  EXPECT_EQ(errors[1].code, "http_502");
  EXPECT_EQ(errors[1].message, "");
  EXPECT_EQ(Value(Metrics(), R"(kleaf_http_errors_total{code="http_502",status="502"})"), 1);
}

TEST_F(MonitorTest, ReadinessProbesAnswered503AreNoErrors) {
  Make([] { return WorkerLease::Status{}; });  // no lease: not ready
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Get("/readyz").status, 503);
  json s = Status();
  EXPECT_EQ(s["ready"]["ready"], false);
  EXPECT_TRUE(s["recent_errors"].empty()) << s["recent_errors"].dump();
  // The 503 series exist from the start (at 0) and stay there.
  std::istringstream lines(Metrics());
  int series = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("kleaf_http_errors_total{") ||
        line.find("status=\"503\"") == std::string::npos) {
      continue;
    }
    ++series;
    EXPECT_TRUE(line.ends_with(" 0")) << line;
  }
  EXPECT_GE(series, 1);
}

TEST_F(MonitorTest, EveryErrorCodeHasItsSeriesAtZeroFromTheStart) {
  Make([] { return WorkerLease::Status{}; });
  const std::string m = Metrics();
  // Zero when ctest runs this test in a process of its own; other tests of the binary, run in one
  // process, move the registry's counters, so only a line of the series is required.
  for (const char* series : {R"(kleaf_http_errors_total{code="invalid_argument",status="400"})",
                             R"(kleaf_http_errors_total{code="not_found",status="404"})",
                             R"(kleaf_http_errors_total{code="unauthenticated",status="401"})",
                             R"(kleaf_http_errors_total{code="unavailable",status="503"})",
                             R"(kleaf_http_errors_total{code="internal",status="500"})",
                             R"(kleaf_segment_fetch_errors_total{code="unavailable"})",
                             R"(kleaf_segment_fetch_errors_total{code="internal"})",
                             R"(kleaf_snowflake_clock_backward_total{outcome="refused"})"}) {
    const auto at = m.find("\n" + std::string(series) + " ");
    ASSERT_NE(at, std::string::npos) << series << "\n" << m;
    if (::testing::UnitTest::GetInstance()->test_to_run_count() == 1) {
      EXPECT_EQ(Value(m, series), 0) << series;
    }
  }
}

TEST_F(MonitorTest, MetricsCountIssuedIdsPerTagAndModeExactly) {
  allocator_.AddTag("mt-seg", 1000);
  const std::string seg = R"(kleaf_ids_issued_total{tag="mt-seg",mode="segment"})";
  const std::string sf = R"(kleaf_ids_issued_total{tag="mt-sf",mode="snowflake"})";
  ASSERT_EQ(Get("/api/v1/segment/mt-seg?count=7").status, 200);
  ASSERT_EQ(Get("/api/segment/get/mt-seg").status, 200);
  ASSERT_EQ(Get("/api/v1/snowflake/mt-sf?count=5").status, 200);
  std::string m = Metrics();
  EXPECT_EQ(Value(m, seg), 8) << m;
  EXPECT_EQ(Value(m, sf), 5) << m;
  ASSERT_EQ(Get("/api/v1/segment/mt-seg?count=300").status, 200);  // spans segments
  EXPECT_EQ(Value(Metrics(), seg), 308);
  ASSERT_EQ(Get("/api/v1/uuid7/mt-sf?count=4").status, 200);
  ASSERT_EQ(Get("/api/v1/ulid/mt-sf?count=6").status, 200);
  ASSERT_EQ(Get("/api/v1/ulid/mt-sf?count=300").status, 200);  // from a worker
  m = Metrics();
  EXPECT_EQ(Value(m, R"(kleaf_ids_issued_total{tag="mt-sf",mode="uuid7"})"), 4) << m;
  EXPECT_EQ(Value(m, R"(kleaf_ids_issued_total{tag="mt-sf",mode="ulid"})"), 306) << m;
  EXPECT_EQ(Value(m, sf), 5) << "uuid7 and ulid IDs are not counted as snowflake";
  // An unknown tag issues nothing and gets no series.
  Get("/api/v1/segment/mt-unknown");
  EXPECT_EQ(Metrics().find("mt-unknown\",mode"), std::string::npos);
}

TEST_F(MonitorTest, SnowflakeTagSeriesAreCappedAndTheRestCountAsOther) {
  for (size_t i = 0; i < Api::kMaxSnowflakeTagSeries; ++i) {
    ASSERT_EQ(Get("/api/v1/snowflake/cap-" + std::to_string(i)).status, 200);
  }
  const std::string other = R"(kleaf_ids_issued_total{tag="_other",mode="snowflake"})";
  const double before = Value(Metrics(), other).value_or(0);
  ASSERT_EQ(Get("/api/v1/snowflake/cap-x?count=2").status, 200);
  ASSERT_EQ(Get("/api/v1/snowflake/cap-y?count=3").status, 200);
  ASSERT_EQ(Get("/api/v1/snowflake/cap-0?count=4").status, 200);
  std::string m = Metrics();
  EXPECT_EQ(Value(m, other), before + 5);
  EXPECT_EQ(m.find("tag=\"cap-x\""), std::string::npos);
  EXPECT_EQ(Value(m, R"(kleaf_ids_issued_total{tag="cap-0",mode="snowflake"})"), 5);
  // Each mode has its own cap: the uuid7 and ulid series of cap-x are still their own.
  ASSERT_EQ(Get("/api/v1/uuid7/cap-x?count=2").status, 200);
  ASSERT_EQ(Get("/api/v1/ulid/cap-x?count=3").status, 200);
  m = Metrics();
  EXPECT_EQ(Value(m, R"(kleaf_ids_issued_total{tag="cap-x",mode="uuid7"})"), 2) << m;
  EXPECT_EQ(Value(m, R"(kleaf_ids_issued_total{tag="cap-x",mode="ulid"})"), 3) << m;
  EXPECT_EQ(Value(m, other), before + 5);
}

TEST_F(MonitorTest, MetricsCountErrorsPerCode) {
  const std::string series = R"(kleaf_http_errors_total{code="invalid_argument",status="400"})";
  const double before = Value(Metrics(), series).value_or(0);
  Get("/api/v1/segment/x?count=0");
  Get("/api/v1/segment/x?count=abc");
  EXPECT_EQ(Value(Metrics(), series), before + 2);
}

TEST_F(MonitorTest, MetricsShowBufferFillStepAndTimestampRange) {
  allocator_.AddTag("mb-tag", 100);
  ASSERT_EQ(Get("/api/v1/segment/mb-tag?count=15").status, 200);
  std::string m = Metrics();
  EXPECT_EQ(Value(m, R"(kleaf_segment_buffer_ids{tag="mb-tag"})"), 85 + 200) << m;
  EXPECT_EQ(Value(m, R"(kleaf_segment_step{tag="mb-tag"})"), 200);
  EXPECT_EQ(Value(m, "kleaf_worker_lease_held"), 1);
  EXPECT_EQ(Value(m, "kleaf_snowflake_worker_id"), kWorkerId);
  const double remaining = static_cast<double>(SnowflakeLayout::Default().last_ms() - kNow) / 1000;
  EXPECT_DOUBLE_EQ(*Value(m, "kleaf_snowflake_timestamp_remaining_seconds"), remaining);
  EXPECT_TRUE(Value(m, "kleaf_segment_fetch_seconds_count").value_or(0) >= 2) << m;
  // A tag no longer buffered loses its gauges.
  cache_.Forget("mb-tag");
  EXPECT_EQ(Metrics().find("tag=\"mb-tag\"}"), std::string::npos);
}

// The tag of that name in a status document; null when it is not there.
json TagOf(const json& status, const std::string& tag) {
  for (const auto& t : status["tags"]) {
    if (t["tag"] == tag) return t;
  }
  return nullptr;
}

TEST_F(MonitorTest, StatusShowsEachTagsIdMode) {
  allocator_.AddTag("im-plain", 100);
  allocator_.AddTag("im-obf", 100, state::IdMode::kObfuscated);
  ASSERT_EQ(Get("/api/v1/segment/im-plain").status, 200);
  ASSERT_EQ(Get("/api/v1/segment/im-obf").status, 200);
  cache_.Get("im-none");  // buffered, no segment yet
  json s = Status();
  EXPECT_EQ(TagOf(s, "im-plain")["id_mode"], "plain") << s.dump();
  EXPECT_EQ(TagOf(s, "im-obf")["id_mode"], "obfuscated") << s.dump();
  EXPECT_TRUE(TagOf(s, "im-none")["id_mode"].is_null()) << s.dump();
}

TEST_F(MonitorTest, StatusShowsEachTagsHistoryOfRateAndFetchLatency) {
  json s = Status();
  EXPECT_EQ(s["history"]["interval_ms"], 5000);
  EXPECT_EQ(s["history"]["points"], 60);
  EXPECT_EQ(s["history"]["max_tags"], 32);
  EXPECT_EQ(s["history"]["untracked_tags"], 0);
  allocator_.AddTag("hi-a", 100);
  allocator_.SetFetchHook([this] { clock_.Advance(std::chrono::milliseconds(3)); });
  // 15 IDs: the first segment and, past 10 % of it, the standby: two fetches of 3 ms each.
  ASSERT_EQ(Get("/api/v1/segment/hi-a?count=15").status, 200);
  json h = TagOf(Status(), "hi-a")["history"];
  ASSERT_TRUE(h.is_object()) << h.dump();
  EXPECT_TRUE(h["ids_per_s"].empty()) << "not sampled yet";

  clock_.Advance(std::chrono::seconds(5));
  const int64_t first = clock_.NowMs();
  monitor_->SampleHistory();
  ASSERT_EQ(Get("/api/v1/segment/hi-a?count=35").status, 200);  // within the first segment
  clock_.Advance(std::chrono::seconds(5));
  monitor_->SampleHistory();
  s = Status();
  h = TagOf(s, "hi-a")["history"];
  EXPECT_EQ(h["time_ms"], json::array({first, first + 5000})) << h.dump();
  EXPECT_EQ(h["ids_per_s"], json::array({3.0, 7.0})) << h.dump();
  ASSERT_EQ(h["fetch_ms"].size(), 2u) << h.dump();
  EXPECT_DOUBLE_EQ(h["fetch_ms"][0].get<double>(), 3.0) << h.dump();
  EXPECT_TRUE(h["fetch_ms"][1].is_null()) << "no fetch in the second interval: " << h.dump();
  // Every field the page read before is still there.
  for (const char* key : {"tag", "active", "standby", "step", "min_step", "ids_left", "next_ready",
                          "fetching", "last_error"}) {
    EXPECT_TRUE(TagOf(s, "hi-a").contains(key)) << key;
  }
}

TEST_F(MonitorTest, PageDrawsTheIdModeAndThePlots) {
  HttpResponse r = Get("/");
  EXPECT_NE(r.body.find("t.id_mode"), std::string::npos);
  EXPECT_NE(r.body.find("t.history.ids_per_s"), std::string::npos);
  EXPECT_NE(r.body.find("t.history.fetch_ms"), std::string::npos);
  EXPECT_NE(r.body.find("<polyline"), std::string::npos);
}

TEST_F(MonitorTest, PageIsSelfContainedAndPollsTheStatusEndpoint) {
  HttpResponse r = Get("/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(r.body.find("fetch(\"/api/v1/status\""), std::string::npos);
  EXPECT_NE(r.body.find("cannot be reached"), std::string::npos);
  // No external resources: no src or href but inline data (the empty icon spares a /favicon.ico).
  EXPECT_FALSE(std::regex_search(r.body, std::regex(R"((src|href)\s*=\s*"(?!data:))")));
  EXPECT_EQ(r.body.find("http://"), std::string::npos);
  EXPECT_EQ(r.body.find("https://"), std::string::npos);
}

TEST(MonitorRoutesTest, WithoutAMonitorThePageAndStatusAreNotFound) {
  ManualClock clock{kNow};
  FakeAllocator allocator{clock};
  SegmentCache cache{allocator, clock, {}};
  SnowflakeGenerator snowflake{SnowflakeLayout::Default(), {kWorkerId, false, 5}, clock};
  WorkerPool pool{1, "monitor-test"};
  Api api({}, cache, snowflake, allocator, pool);
  std::map<std::string, int> status;
  for (std::string target : {"/", "/api/v1/status", "/readyz", "/metrics", "/healthz"}) {
    api.Handle({"GET", target, "", ""}, [&, target](HttpResponse r) { status[target] = r.status; });
  }
  pool.Stop();
  EXPECT_EQ(status["/"], 404);
  EXPECT_EQ(status["/api/v1/status"], 404);
  EXPECT_EQ(status["/readyz"], 200);
  EXPECT_EQ(status["/metrics"], 200);
  EXPECT_EQ(status["/healthz"], 200);
}

TEST(ReadyResponseTest, ListsEveryCheckAnd503WhenOneFails) {
  HttpResponse ok = ReadyResponse({{"a", true, "fine"}});
  EXPECT_EQ(ok.status, 200);
  HttpResponse bad = ReadyResponse({{"a", true, "fine"}, {"b", false, "broken"}});
  EXPECT_EQ(bad.status, 503);
  json j = json::parse(bad.body);
  EXPECT_EQ(j["ready"], false);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["checks"][1]["detail"], "broken");
  EXPECT_EQ(j["checks"][1]["required"], true);
  // A check that is not required is listed as failing, and the node stays ready.
  HttpResponse listed = ReadyResponse({{"a", true, "fine"}, {"b", false, "broken", false}});
  EXPECT_EQ(listed.status, 200);
  j = json::parse(listed.body);
  EXPECT_EQ(j["ready"], true);
  EXPECT_EQ(j["checks"][1]["ok"], false);
  EXPECT_EQ(j["checks"][1]["required"], false);
}

}  // namespace
}  // namespace kleaf::gateway
