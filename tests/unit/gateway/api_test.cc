#include "gateway/api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "allocator/allocation.h"
#include "allocator/allocator.h"
#include "allocator/operations.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/worker_pool.h"
#include "gateway/segment_cache.h"
#include "snowflake/snowflake.h"
#include "snowflake/worker_lease.h"

namespace kleaf::gateway {

using http::ErrorResponse;
using http::HttpRequest;
using http::HttpResponse;
using snowflake::SnowflakeGenerator;
using snowflake::SnowflakeLayout;

namespace {

using nlohmann::json;

constexpr int64_t kNow = 1'700'000'000'000;  // 2023-11-14T22:13:20.000Z
constexpr const char* kToken = "0123456789abcdef-admin";
constexpr auto kAnswerTimeout = std::chrono::seconds(10);
constexpr int64_t kWorkerId = 7;

// The allocator seam: tags in memory with the real allocation rules. Callbacks complete inline,
// later from whatever thread calls CompletePending (kDeferred), or never (kNever).
class FakeAllocator final : public allocator::Allocator {
 public:
  enum class Mode { kInline, kDeferred, kNever };

  explicit FakeAllocator(Clock& clock) : clock_(clock) {}

  void set_mode(Mode mode) {
    std::lock_guard lock(mu_);
    mode_ = mode;
  }
  // Every AllocateSegment fails with `code` (nullopt: allocate normally).
  void set_segment_failure(std::optional<Code> code) {
    std::lock_guard lock(mu_);
    segment_failure_ = code;
  }
  void AddTag(const std::string& tag, int64_t step, int64_t max_id = 1) {
    std::lock_guard lock(mu_);
    state::TagRecord r;
    r.tag = tag;
    r.step = step;
    r.max_id = max_id;
    tags_[tag] = r;
  }
  std::optional<state::TagRecord> Tag(const std::string& tag) {
    std::lock_guard lock(mu_);
    auto it = tags_.find(tag);
    if (it == tags_.end()) return std::nullopt;
    return it->second;
  }
  int segment_requests() {
    std::lock_guard lock(mu_);
    return segment_requests_;
  }
  // Waits (bounded) until at least `n` calls are pending.
  bool WaitForPending(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kAnswerTimeout, [&] { return pending_.size() >= n; });
  }
  // Completes every pending call on the calling thread; answers how many.
  int CompletePending() {
    std::deque<std::function<void()>> run;
    {
      std::lock_guard lock(mu_);
      run.swap(pending_);
    }
    for (auto& f : run) f();
    return static_cast<int>(run.size());
  }

  void Submit(allocator::AnyCall call) override {
    std::visit([this](auto& c) { Handle(std::move(c.op), std::move(c.done)); }, call);
  }
  std::vector<std::vector<uint64_t>> asked_keys() {
    std::lock_guard lock(mu_);
    return asked_keys_;
  }
  // What WorkerStatus answers (nullopt: an error, as without a registry).
  void set_worker_counts(std::optional<allocator::WorkerCounts> counts) {
    std::lock_guard lock(mu_);
    worker_counts_ = counts;
  }

  static constexpr int64_t kMaxStep = 1'000'000;

 private:
  void Handle(allocator::op::Allocate op, allocator::Callback<allocator::Segment> done) {
    {
      std::lock_guard lock(mu_);
      ++segment_requests_;
    }
    Dispatch([this, tag = op.tag, step = op.step, done] {
      done([&]() -> Result<allocator::Segment> {
        std::lock_guard lock(mu_);
        if (segment_failure_) return Fail(*segment_failure_, "forced failure");
        auto it = tags_.find(tag);
        if (it == tags_.end() || it->second.deleted) {
          return Fail(Code::kNotFound, "unknown tag '" + tag + "'");
        }
        return allocator::ReserveSegment(it->second, step, kMaxStep, clock_.NowMs());
      }());
    });
  }
  void Handle(allocator::op::ListTags, allocator::Callback<std::vector<state::TagRecord>> done) {
    Dispatch([this, done] {
      std::vector<state::TagRecord> live;
      {
        std::lock_guard lock(mu_);
        for (const auto& [tag, r] : tags_) {
          if (!r.deleted) live.push_back(r);
        }
      }
      done(std::move(live));
    });
  }
  void Handle(allocator::op::GetTag op, allocator::Callback<state::TagRecord> done) {
    Dispatch([this, tag = op.tag, done] {
      done([&]() -> Result<state::TagRecord> {
        std::lock_guard lock(mu_);
        auto it = tags_.find(tag);
        if (it == tags_.end() || it->second.deleted) return Fail(Code::kNotFound, "unknown tag");
        return it->second;
      }());
    });
  }
  void Handle(allocator::op::PutTag op, allocator::Callback<state::TagRecord> done) {
    Dispatch([this, tag = op.tag, update = op.update, done] {
      done([&]() -> Result<state::TagRecord> {
        std::lock_guard lock(mu_);
        auto it = tags_.find(tag);
        std::optional<state::TagRecord> existing;
        if (it != tags_.end()) existing = it->second;
        auto r = allocator::ApplyTagUpdate(existing, tag, update, 1000, kMaxStep, clock_.NowMs());
        if (r) tags_[tag] = *r;
        return r;
      }());
    });
  }
  void Handle(allocator::op::DeleteTag op, allocator::Callback<state::TagRecord> done) {
    Dispatch([this, tag = op.tag, done] {
      done([&]() -> Result<state::TagRecord> {
        std::lock_guard lock(mu_);
        auto it = tags_.find(tag);
        if (it == tags_.end() || it->second.deleted) return Fail(Code::kNotFound, "unknown tag");
        state::TagRecord before = it->second;
        it->second.deleted = true;
        return before;
      }());
    });
  }

  // The gateway API does not use the worker registry; the fake has none.
  void Handle(allocator::op::ClaimWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    NoRegistry(done);
  }
  void Handle(allocator::op::RenewWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    NoRegistry(done);
  }
  void Handle(allocator::op::ReleaseWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    NoRegistry(done);
  }
  void Handle(allocator::op::WorkerStatus, allocator::Callback<allocator::WorkerCounts> done) {
    std::optional<allocator::WorkerCounts> counts;
    {
      std::lock_guard lock(mu_);
      counts = worker_counts_;
    }
    if (!counts) return NoRegistry(done);
    Dispatch([done, counts] { done(*counts); });
  }
  // Spaces with the real rules; each key's counter in a map (sections are the allocator's
  // business, tested in allocator/). The keys each NextSeq asked for, in order.
  void Handle(allocator::op::ListSpaces,
              allocator::Callback<std::vector<state::SpaceRecord>> done) {
    Dispatch([this, done] {
      std::vector<state::SpaceRecord> live;
      {
        std::lock_guard lock(mu_);
        for (const auto& [name, r] : spaces_) {
          if (!r.deleted) live.push_back(r);
        }
      }
      done(std::move(live));
    });
  }
  void Handle(allocator::op::GetSpace op, allocator::Callback<state::SpaceRecord> done) {
    Dispatch([this, space = op.space, done] {
      Result<state::SpaceRecord> found;
      {
        std::lock_guard lock(mu_);
        auto r = LiveSpace(space);
        found = r ? Result<state::SpaceRecord>(**r) : std::unexpected(r.error());
      }
      done(std::move(found));
    });
  }
  void Handle(allocator::op::PutSpace op, allocator::Callback<state::SpaceRecord> done) {
    Dispatch([this, space = op.space, update = op.update, done] {
      Result<state::SpaceRecord> r;
      {
        std::lock_guard lock(mu_);
        std::optional<state::SpaceRecord> existing;
        if (auto it = spaces_.find(space); it != spaces_.end()) existing = it->second;
        r = allocator::ApplySpaceUpdate(existing, space, update, {}, clock_.NowMs());
        if (r) spaces_[space] = *r;
      }
      done(std::move(r));
    });
  }
  void Handle(allocator::op::DeleteSpace op, allocator::Callback<state::SpaceRecord> done) {
    Dispatch([this, space = op.space, done] {
      Result<state::SpaceRecord> before;
      {
        std::lock_guard lock(mu_);
        auto r = LiveSpace(space);
        before = r ? Result<state::SpaceRecord>(**r) : std::unexpected(r.error());
        if (r) (*r)->deleted = true;
      }
      done(std::move(before));
    });
  }
  void Handle(allocator::op::NextSeq op, allocator::Callback<std::vector<uint64_t>> done) {
    Dispatch([this, space = op.space, keys = op.keys, done] {
      Result<std::vector<uint64_t>> values = std::vector<uint64_t>{};
      {
        std::lock_guard lock(mu_);
        asked_keys_.push_back(keys);
        if (auto r = LiveSpace(space); !r) {
          values = std::unexpected(r.error());
        } else {
          for (uint64_t key : keys) values->push_back(++seqs_[{space, key}]);
        }
      }
      done(std::move(values));
    });
  }
  void Handle(allocator::op::CurrentSeq op, allocator::Callback<uint64_t> done) {
    Dispatch([this, space = op.space, key = op.key, done] {
      Result<uint64_t> value;
      {
        std::lock_guard lock(mu_);
        auto r = LiveSpace(space);
        value = r ? Result<uint64_t>(seqs_[{space, key}]) : std::unexpected(r.error());
      }
      done(std::move(value));
    });
  }
  // The API serves no import: not in this fake.
  void Handle(allocator::op::RaiseSection, allocator::Callback<uint64_t> done) {
    done(Fail(Code::kUnimplemented, "not in this fake"));
  }
  Result<state::SpaceRecord*> LiveSpace(const std::string& space) {
    auto it = spaces_.find(space);
    if (it == spaces_.end() || it->second.deleted) {
      return Fail(Code::kNotFound, "unknown space '" + space + "'");
    }
    return &it->second;
  }
  template <typename T>
  void NoRegistry(allocator::Callback<T> done) {
    Dispatch([done] {
      done(Fail(Code::kFailedPrecondition, "the fake allocator has no worker registry"));
    });
  }
  void Dispatch(std::function<void()> call) {
    std::unique_lock lock(mu_);
    switch (mode_) {
      case Mode::kInline:
        lock.unlock();
        call();
        return;
      case Mode::kDeferred:
        pending_.push_back(std::move(call));
        cv_.notify_all();
        return;
      case Mode::kNever:
        never_.push_back(std::move(call));
        return;
    }
  }

  Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  Mode mode_ = Mode::kInline;
  std::optional<Code> segment_failure_;
  std::optional<allocator::WorkerCounts> worker_counts_;
  std::map<std::string, state::TagRecord> tags_;
  std::map<std::string, state::SpaceRecord> spaces_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> seqs_;
  std::vector<std::vector<uint64_t>> asked_keys_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::function<void()>> never_;
  int segment_requests_ = 0;
};

// What one Handle() call answered, and how often (must be exactly once).
struct Answer {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  HttpResponse response;
};

ApiOptions DefaultOptions() {
  ApiOptions o;
  o.max_batch = 1000;
  o.wait_ms = 100;
  o.retry_after_s = 2;
  o.admin_token = kToken;
  return o;
}

std::optional<std::string> Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

json Body(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body;
  return j;
}

// Asserts the JSON error shape {"error":{"code","message"}} with `status` and `code`.
void ExpectError(const HttpResponse& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  json j = Body(r);
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_EQ(j["error"].value("code", ""), code) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
  EXPECT_FALSE(j["error"].value("message", "").empty());
  EXPECT_EQ(Header(r, "Retry-After").has_value(), status == 503);
}

std::vector<int64_t> Ids(const HttpResponse& r) {
  std::vector<int64_t> ids;
  json j = Body(r);
  if (!j.is_object() || !j.contains("ids")) {
    ADD_FAILURE() << "no ids in " << r.body;
    return ids;
  }
  for (const auto& id : j["ids"]) {
    EXPECT_TRUE(id.is_string()) << "IDs must be strings: " << r.body;
    if (id.is_string()) ids.push_back(std::stoll(id.get<std::string>()));
  }
  return ids;
}

SnowflakeGenerator::Options SnowflakeOptions() {
  SnowflakeGenerator::Options o;
  o.worker_id = kWorkerId;
  o.random_sequence_start = false;
  o.max_backward_ms = 5;
  return o;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeApi(DefaultOptions()); }

  void TearDown() override {
    // Work queued on the pool refers to the Api; finish it before anything is destroyed.
    pool_.Stop();
    std::lock_guard lock(answers_mu_);
    for (const auto& a : answers_) {
      std::lock_guard alock(a->mu);
      EXPECT_EQ(a->calls, 1) << "a request was answered " << a->calls << " times";
    }
  }

  void MakeApi(ApiOptions options) {
    api_ = std::make_unique<Api>(options, cache_, snowflake_, allocator_, pool_);
  }

  std::shared_ptr<Answer> Send(std::string method, std::string target, std::string body = "",
                               std::string authorization = "") {
    auto answer = std::make_shared<Answer>();
    {
      std::lock_guard lock(answers_mu_);
      answers_.push_back(answer);
    }
    HttpRequest request{std::move(method), std::move(target), std::move(body),
                        std::move(authorization)};
    api_->Handle(std::move(request), [answer](HttpResponse r) {
      std::lock_guard lock(answer->mu);
      ++answer->calls;
      answer->response = std::move(r);
      answer->cv.notify_all();
    });
    return answer;
  }

  static HttpResponse Await(const std::shared_ptr<Answer>& answer) {
    std::unique_lock lock(answer->mu);
    bool answered = answer->cv.wait_for(lock, kAnswerTimeout, [&] { return answer->calls > 0; });
    EXPECT_TRUE(answered) << "no answer within " << kAnswerTimeout.count() << " s";
    if (!answered) {
      HttpResponse none;
      none.status = 0;
      return none;
    }
    return answer->response;
  }

  HttpResponse Get(const std::string& target) { return Await(Send("GET", target)); }
  HttpResponse Admin(const std::string& method, const std::string& target,
                     const std::string& body = "") {
    return Await(Send(method, target, body, std::string("Bearer ") + kToken));
  }

  ManualClock clock_{kNow};
  FakeAllocator allocator_{clock_};
  SegmentCache cache_{allocator_, clock_,
                      SegmentBuffer::Options{.max_step = 1'000'000, .preload_percent = 10}};
  SnowflakeGenerator snowflake_{SnowflakeLayout::Default(), SnowflakeOptions(), clock_};
  WorkerPool pool_{2, "api-test"};
  std::unique_ptr<Api> api_;
  std::mutex answers_mu_;
  std::vector<std::shared_ptr<Answer>> answers_;
};

// ---------------------------------------------------------------------------------------------
// Leaf-compatible routes

TEST_F(ApiTest, LeafSegmentRouteAnswersPlainDecimalIds) {
  allocator_.AddTag("order", 100);
  for (int expected = 1; expected <= 3; ++expected) {
    HttpResponse r = Get("/api/segment/get/order");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u) << r.content_type;
    EXPECT_EQ(r.body, std::to_string(expected));
  }
}

TEST_F(ApiTest, LeafSegmentRouteIgnoresCount) {
  allocator_.AddTag("order", 100);
  HttpResponse r = Get("/api/segment/get/order?count=5");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "1");
}

TEST_F(ApiTest, LeafSnowflakeRouteAnswersAPlainDecimalId) {
  HttpResponse r = Get("/api/snowflake/get/anything");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u);
  ASSERT_FALSE(r.body.empty());
  EXPECT_TRUE(std::all_of(r.body.begin(), r.body.end(), [](char c) {
    return c >= '0' && c <= '9';
  })) << r.body;
  auto p = SnowflakeLayout::Default().Decode(std::stoll(r.body));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->worker_id, kWorkerId);
  EXPECT_EQ(p->timestamp_ms, kNow);
}

TEST_F(ApiTest, IdFromALoadedSegmentIsAnsweredBeforeHandleReturns) {
  allocator_.AddTag("order", 100);
  ASSERT_EQ(Get("/api/segment/get/order").status, 200);  // loads the segment
  auto answer = Send("GET", "/api/segment/get/order");
  {
    std::lock_guard lock(answer->mu);
    EXPECT_EQ(answer->calls, 1) << "a loaded segment must not wait for a worker";
  }
  EXPECT_EQ(Await(answer).body, "2");
}

// Leaf's get routes have no method restriction: Spring serves every method with the handler,
// answers OPTIONS itself with the Allow list, and Tomcat refuses TRACE.
TEST_F(ApiTest, LeafGetRoutesServeEveryMethodLeafServes) {
  allocator_.AddTag("order", 100);
  int expected = 1;
  for (const std::string method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    SCOPED_TRACE(method);
    HttpResponse r = Await(Send(method, "/api/segment/get/order", "ignored body"));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, std::to_string(expected++));
    HttpResponse s = Await(Send(method, "/api/snowflake/get/order"));
    EXPECT_EQ(s.status, 200) << s.body;
  }
  for (const std::string target : {"/api/segment/get/order", "/api/snowflake/get/order"}) {
    HttpResponse options = Await(Send("OPTIONS", target));
    EXPECT_EQ(options.status, 200);
    EXPECT_EQ(options.body, "");
    EXPECT_EQ(options.content_type, "") << "an empty answer has no Content-Type";
    EXPECT_EQ(Header(options, "Allow"), "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    for (const std::string method : {"TRACE", "CONNECT", "BREW", "get"}) {
      HttpResponse refused = Await(Send(method, target));
      ExpectError(refused, 405, "method_not_allowed");
      EXPECT_EQ(Header(refused, "Allow"), "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    }
  }
  EXPECT_EQ(Get("/api/segment/get/order").body, std::to_string(expected))
      << "OPTIONS or a refused method drew an ID";
}

TEST_F(ApiTest, LeafDecodeSnowflakeIdAnswersLeafsFields) {
  const int64_t id = std::stoll(Get("/api/snowflake/get/x").body);
  HttpResponse r = Get("/decodeSnowflakeId?snowflakeId=" + std::to_string(id));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  // kNow is 2023-11-14T22:13:20.000Z; the generator's sequence starts at 0 (no random start).
  EXPECT_EQ(Body(r), json({{"timestamp", std::to_string(kNow) + "(2023-11-14 22:13:20.000)"},
                           {"workerId", std::to_string(kWorkerId)},
                           {"sequenceId", "0"}}));
  for (const std::string bad :
       {"/decodeSnowflakeId", "/decodeSnowflakeId?snowflakeId=", "/decodeSnowflakeId?snowflakeid=1",
        "/decodeSnowflakeId?snowflakeId=x", "/decodeSnowflakeId?snowflakeId=-5"}) {
    SCOPED_TRACE(bad);
    HttpResponse e = Get(bad);
    ExpectError(e, 400, "invalid_argument");
    EXPECT_NE(Body(e)["error"].value("message", "").find("snowflakeId"), std::string::npos);
  }
}

TEST_F(ApiTest, LeafCacheShowsTheBuffersInLeafsFieldNames) {
  EXPECT_EQ(Body(Get("/cache")), json::object());
  allocator_.AddTag("order", 100, 5000);
  ASSERT_EQ(Get("/api/segment/get/order").body, "5000");
  ASSERT_EQ(Get("/api/segment/get/order").body, "5001");
  EXPECT_EQ(Body(Get("/cache"))["order"],
            json::parse(R"({"key":"order","initOk":true,"nextReady":false,"pos":0,"value0":5002,
                            "max0":5100,"step0":100,"value1":0,"max1":0,"step1":0})"));
  // Past 10% of the segment the standby one is fetched (inline here), at twice the step.
  ASSERT_EQ(Ids(Get("/api/v1/segment/order?count=10")).back(), 5011);
  EXPECT_EQ(Body(Get("/cache"))["order"],
            json::parse(R"({"key":"order","initOk":true,"nextReady":true,"pos":0,"value0":5012,
                            "max0":5100,"step0":100,"value1":5100,"max1":5300,"step1":200})"));
  // A tag the allocator does not know is not buffered, so not shown.
  ExpectError(Get("/api/segment/get/nope"), 404, "not_found");
  EXPECT_FALSE(Body(Get("/cache")).contains("nope"));
}

TEST_F(ApiTest, LeafDbListsTheTagRecordsToAdminsOnly) {
  allocator_.AddTag("order", 100, 5000);
  ASSERT_EQ(Admin("PUT", "/api/v1/tags/user", R"({"step":7,"description":"users"})").status, 200);
  ExpectError(Get("/db"), 401, "unauthenticated");
  ExpectError(Await(Send("GET", "/db", "", "Bearer wrong")), 401, "unauthenticated");
  HttpResponse db = Admin("GET", "/db");
  ASSERT_EQ(db.status, 200) << db.body;
  EXPECT_EQ(Body(db), json::parse(R"({"items":[
      {"biz_tag":"order","max_id":5000,"step":100,"description":"","update_time":"1970-01-01T00:00:00.000Z"},
      {"biz_tag":"user","max_id":1,"step":7,"description":"users","update_time":"2023-11-14T22:13:20.000Z"}]})"));
}

// ---------------------------------------------------------------------------------------------
// v1 JSON routes

TEST_F(ApiTest, V1SegmentCountDefaultsToOneWithIdsAsStrings) {
  allocator_.AddTag("order", 100);
  HttpResponse r = Get("/api/v1/segment/order");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  json j = Body(r);
  EXPECT_EQ(j, json::parse(R"({"tag":"order","ids":["1"]})"));
}

TEST_F(ApiTest, V1SegmentBatchIsConsecutiveWithinOneAllocator) {
  allocator_.AddTag("order", 100);
  ASSERT_EQ(Ids(Get("/api/v1/segment/order")), std::vector<int64_t>{1});
  EXPECT_EQ(Ids(Get("/api/v1/segment/order?count=5")), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(Ids(Get("/api/v1/segment/order?other=x&count=2")), (std::vector<int64_t>{7, 8}));
}

TEST_F(ApiTest, V1SegmentBatchSpansSeveralSegments) {
  allocator_.AddTag("order", 10);
  std::vector<int64_t> ids = Ids(Get("/api/v1/segment/order?count=1000"));
  ASSERT_EQ(ids.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "duplicate ID";
  auto tag = allocator_.Tag("order");
  ASSERT_TRUE(tag);
  EXPECT_LT(ids.back(), tag->max_id) << "an ID beyond what the allocator granted";
}

TEST_F(ApiTest, V1SnowflakeBatchIsIncreasingStrings) {
  std::vector<int64_t> three = Ids(Get("/api/v1/snowflake/order?count=3"));
  ASSERT_EQ(three.size(), 3u);
  EXPECT_TRUE(std::is_sorted(three.begin(), three.end()));
  EXPECT_EQ(std::adjacent_find(three.begin(), three.end()), three.end());
  json j = Body(Get("/api/v1/snowflake/order"));
  EXPECT_EQ(j["tag"], "order");
  ASSERT_EQ(j["ids"].size(), 1u);
  EXPECT_TRUE(j["ids"][0].is_string());
}

TEST_F(ApiTest, V1SnowflakeLargeBatchIsAnsweredFromAWorker) {
  std::vector<int64_t> ids = Ids(Get("/api/v1/snowflake/order?count=1000"));
  ASSERT_EQ(ids.size(), 1000u);
  std::set<int64_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
}

TEST_F(ApiTest, BadCountIsBadRequest) {
  allocator_.AddTag("order", 100);
  for (const std::string count :
       {"0", "-1", "abc", "1.5", "", "1001", "99999999999999999999", "5x", " 5", "0x10"}) {
    for (const std::string route : {"/api/v1/segment/order", "/api/v1/snowflake/order",
                                    "/api/v1/uuid7/order", "/api/v1/ulid/order"}) {
      SCOPED_TRACE(route + "?count=" + count);
      HttpResponse r = Get(route + "?count=" + count);
      ExpectError(r, 400, "invalid_argument");
      EXPECT_NE(Body(r)["error"].value("message", "").find("count"), std::string::npos);
    }
  }
  ExpectError(Get("/api/v1/segment/order?count"), 400, "invalid_argument");
  EXPECT_EQ(Ids(Get("/api/v1/segment/order?count=1000")).size(), 1000u);  // the maximum is fine
}

TEST_F(ApiTest, BadTagIsBadRequest) {
  const std::string long_tag(129, 'x');
  const std::vector<std::string> targets = {
      "/api/v1/segment/a%20b", "/api/v1/snowflake/bad!tag", "/api/segment/get/" + long_tag,
      "/api/snowflake/get/",   "/api/v1/segment/",          "/api/segment/get/a*b",
      "/api/v1/uuid7/bad!tag", "/api/v1/ulid/" + long_tag,  "/api/v1/ulid/"};
  for (const std::string& target : targets) {
    SCOPED_TRACE(target);
    ExpectError(Get(target), 400, "invalid_argument");
  }
  EXPECT_EQ(allocator_.segment_requests(), 0) << "a bad tag must not reach the allocator";
}

TEST_F(ApiTest, UnknownPathIsNotFound) {
  for (const std::string target :
       {"/", "/nope", "/api", "/api/v1", "/api/v2/segment/x", "/api/v1/segment/x/y",
        "/api/v1/whatever/x", "/api/segment/get/x/y", "/api/segment/x",
        "/api/v1/snowflake/decode/1/2", "/api/v1/uuid7/x/y", "/api/v1/ulid/compose/1/2",
        "/api/v1/segment/compose/1", "/api/v1/tags/a/b", "/healthz/x"}) {
    SCOPED_TRACE(target);
    ExpectError(Get(target), 404, "not_found");
  }
}

// "/" and /api/v1/status exist only on a node with a Monitor: without one they are 404 whatever
// the method (that gate comes before the method rule), under their own metric label.
TEST_F(ApiTest, MonitorRoutesAreNotFoundWithoutAMonitor) {
  for (const std::string method : {"GET", "POST", "TRACE"}) {
    for (const std::string target : {"/", "/api/v1/status"}) {
      SCOPED_TRACE(method + " " + target);
      ExpectError(Await(Send(method, target)), 404, "not_found");
      EXPECT_EQ(Api::RouteOf(target), target);
    }
  }
}

TEST_F(ApiTest, WrongMethodIs405WithAllow) {
  struct Case {
    const char* method;
    const char* target;
    const char* allow;
  };
  for (const Case c :
       {Case{"TRACE", "/api/segment/get/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
        Case{"TRACE", "/api/snowflake/get/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
        Case{"DELETE", "/api/v1/segment/x", "GET, HEAD"},
        Case{"POST", "/api/v1/snowflake/x?count=2", "GET, HEAD"},
        Case{"POST", "/api/v1/snowflake/decode/1", "GET, HEAD"},
        Case{"POST", "/api/v1/uuid7/x", "GET, HEAD"},
        Case{"DELETE", "/api/v1/ulid/x?count=2", "GET, HEAD"},
        Case{"POST", "/api/v1/snowflake/compose/0", "GET, HEAD"},
        Case{"PUT", "/api/v1/ulid/compose/0", "GET, HEAD"}, Case{"PUT", "/healthz", "GET, HEAD"},
        Case{"POST", "/cache", "GET, HEAD"}, Case{"PUT", "/db", "GET, HEAD"},
        Case{"OPTIONS", "/decodeSnowflakeId?snowflakeId=1", "GET, HEAD"}}) {
    SCOPED_TRACE(std::string(c.method) + " " + c.target);
    HttpResponse r = Await(Send(c.method, c.target));
    ExpectError(r, 405, "method_not_allowed");
    EXPECT_EQ(Header(r, "Allow"), c.allow);
  }
  HttpResponse list = Admin("POST", "/api/v1/tags");
  ExpectError(list, 405, "method_not_allowed");
  EXPECT_EQ(Header(list, "Allow"), "GET, HEAD");
  HttpResponse one = Admin("PATCH", "/api/v1/tags/order", "{}");
  ExpectError(one, 405, "method_not_allowed");
  EXPECT_EQ(Header(one, "Allow"), "GET, HEAD, PUT, DELETE");
}

TEST_F(ApiTest, HealthzAnswersOk) {
  HttpResponse r = Get("/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r), json::parse(R"({"status":"ok"})"));
}

// ---------------------------------------------------------------------------------------------
// Segment failures and waiting

TEST_F(ApiTest, UnknownTagIsNotFoundAndItsBufferIsDropped) {
  for (const std::string target :
       {"/api/v1/segment/nope", "/api/segment/get/nope", "/api/v1/segment/nope?count=50"}) {
    SCOPED_TRACE(target);
    ExpectError(Get(target), 404, "not_found");
    EXPECT_EQ(cache_.size(), 0u) << "made-up tags must not grow the cache";
  }
}

TEST_F(ApiTest, AllocatorThatNeverAnswersGives503WithRetryAfterWithinTheBoundedWait) {
  allocator_.AddTag("order", 100);
  allocator_.set_mode(FakeAllocator::Mode::kNever);
  for (const std::string target : {"/api/v1/segment/order", "/api/segment/get/order"}) {
    SCOPED_TRACE(target);
    const auto start = std::chrono::steady_clock::now();
    HttpResponse r = Get(target);
    const auto waited = std::chrono::steady_clock::now() - start;
    ExpectError(r, 503, "unavailable");
    EXPECT_EQ(Header(r, "Retry-After"), "2");
    EXPECT_GE(waited, std::chrono::milliseconds(95)) << "gave up before the configured wait";
    EXPECT_LT(waited, std::chrono::seconds(5)) << "the wait must be bounded";
  }
}

// The wait is bounded per request from its arrival: requests queued behind others on the two
// worker threads must not each wait the full wait_ms in turn (40 x 100 ms / 2 threads = 2 s).
TEST_F(ApiTest, BurstOfWaitingRequestsIsAnsweredWithinAboutOneWait) {
  allocator_.AddTag("order", 100);
  allocator_.set_mode(FakeAllocator::Mode::kNever);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < 40; ++i) answers.push_back(Send("GET", "/api/v1/segment/order"));
  for (const auto& a : answers) ExpectError(Await(a), 503, "unavailable");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
}

TEST_F(ApiTest, FetchCompletedFromAnotherThreadAnswersTheWaitingRequest) {
  ApiOptions o = DefaultOptions();
  o.wait_ms = 60'000;  // the test, not the deadline, decides when the fetch completes
  MakeApi(o);
  allocator_.AddTag("order", 100);
  allocator_.set_mode(FakeAllocator::Mode::kDeferred);
  auto answer = Send("GET", "/api/v1/segment/order?count=3");
  ASSERT_TRUE(allocator_.WaitForPending(1));
  {
    std::lock_guard lock(answer->mu);
    EXPECT_EQ(answer->calls, 0) << "answered before any segment existed";
  }
  std::thread completer([this] { allocator_.CompletePending(); });
  HttpResponse r = Await(answer);
  completer.join();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Ids(r), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(ApiTest, FailedFetchIsReportedWithItsStatus) {
  allocator_.AddTag("order", 100);
  allocator_.set_segment_failure(Code::kNotFound);
  ExpectError(Get("/api/v1/segment/order"), 404, "not_found");
  allocator_.set_segment_failure(Code::kUnavailable);
  HttpResponse r = Get("/api/v1/segment/order");
  ExpectError(r, 503, "unavailable");
  EXPECT_EQ(Header(r, "Retry-After"), "2");
  allocator_.set_segment_failure(std::nullopt);
  EXPECT_EQ(Get("/api/v1/segment/order").status, 200);
}

// The cluster's state goes back under a running gateway (the tag's max_id restored lower, as
// after lost state-topic records): the allocator hands out ranges this gateway already received.
// None of them is served: those fetches fail (a draw that needs one gets a 500 naming the
// regression; a preload's failure stays in the log) and are counted; once the allocator is past
// what the gateway received, IDs flow again, none twice.
TEST_F(ApiTest, SegmentsBelowWhatTheGatewayAlreadyReceivedAreNeverServed) {
  allocator_.AddTag("order", 10);
  std::set<int64_t> served;
  int refused = 0;
  auto draw = [&](int count) {
    HttpResponse r = Get("/api/v1/segment/order?count=" + std::to_string(count));
    if (r.status == 500) {
      ++refused;
      ExpectError(r, 500, "internal");
      EXPECT_NE(r.body.find("the cluster's state went back"), std::string::npos) << r.body;
      return;
    }
    ASSERT_EQ(r.status, 200) << r.body;
    for (int64_t id : Ids(r)) EXPECT_TRUE(served.insert(id).second) << "ID " << id << " twice";
  };
  draw(25);
  ASSERT_EQ(served.size(), 25u);
  auto& regressions =
      metrics::Registry::Default().GetCounter("kleaf_segment_regressions_total", "");
  const uint64_t regressions_before = regressions.value();
  auto& fetch_errors = metrics::Registry::Default().GetCounter("kleaf_segment_fetch_errors_total",
                                                               "", {{"code", "internal"}});
  const uint64_t fetch_errors_before = fetch_errors.value();

  allocator_.AddTag("order", 10, /*max_id=*/1);  // the state went back to the tag's start
  for (int i = 0; i < 200 && served.size() < 150; ++i) {
    draw(1);
    clock_.Advance(std::chrono::seconds(1));  // past the pause after a failed fetch
  }
  EXPECT_GE(served.size(), 150u) << "IDs did not resume once the allocator passed the old end ("
                                 << refused << " draws refused)";
  EXPECT_GT(regressions.value(), regressions_before) << "no regressed segment was met";
  EXPECT_EQ(fetch_errors.value() - fetch_errors_before, regressions.value() - regressions_before)
      << "each refused segment is a failed fetch";
}

TEST_F(ApiTest, ConcurrentSegmentRequestsNeverShareAnId) {
  allocator_.AddTag("order", 10);
  constexpr int kThreads = 4;
  constexpr int kRequests = 150;
  std::vector<std::vector<int64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &got] {
      for (int i = 0; i < kRequests; ++i) {
        HttpResponse r = Get(i % 2 ? "/api/v1/segment/order?count=3" : "/api/segment/get/order");
        if (r.status != 200) {
          ADD_FAILURE() << r.status << " " << r.body;
          continue;
        }
        if (i % 2) {
          for (int64_t id : Ids(r)) got[t].push_back(id);
        } else {
          got[t].push_back(std::stoll(r.body));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  EXPECT_EQ(all.size(), size_t{kThreads * kRequests / 2 * 4});
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate ID";
  auto tag = allocator_.Tag("order");
  ASSERT_TRUE(tag);
  EXPECT_LT(all.back(), tag->max_id);
  EXPECT_GE(all.front(), 1);
}

TEST_F(ApiTest, SnowflakeClockMovedBackIs503WithRetryAfter) {
  ASSERT_EQ(Get("/api/snowflake/get/x").status, 200);
  clock_.SetWallMs(kNow - 1000);
  for (const std::string target :
       {"/api/snowflake/get/x", "/api/v1/snowflake/x?count=5", "/api/v1/snowflake/x?count=500",
        "/api/v1/uuid7/x?count=5", "/api/v1/ulid/x?count=500"}) {
    SCOPED_TRACE(target);
    HttpResponse r = Get(target);
    ExpectError(r, 503, "unavailable");
    EXPECT_EQ(Header(r, "Retry-After"), "2");
  }
}

// ---------------------------------------------------------------------------------------------
// Admin routes

TEST_F(ApiTest, AdminRoutesNeedTheBearerToken) {
  const std::string token = kToken;
  const std::vector<std::string> wrong = {std::string(),
                                          "Bearer",
                                          "Bearer ",
                                          "Bearer wrong-token-123456",
                                          "Bearer " + token + "x",
                                          "Bearer " + token.substr(0, 10),
                                          "bearer " + token,
                                          "Basic " + token,
                                          token};
  for (const std::string& auth : wrong) {
    SCOPED_TRACE(auth);
    ExpectError(Await(Send("GET", "/api/v1/tags", "", auth)), 401, "unauthenticated");
    ExpectError(Await(Send("PUT", "/api/v1/tags/order", R"({"step":5})", auth)), 401,
                "unauthenticated");
    ExpectError(Await(Send("DELETE", "/api/v1/tags/order", "", auth)), 401, "unauthenticated");
  }
  EXPECT_FALSE(allocator_.Tag("order")) << "an unauthenticated PUT reached the allocator";
  EXPECT_EQ(Admin("GET", "/api/v1/tags").status, 200);
}

TEST_F(ApiTest, AdminRoutesAreClosedWithoutAConfiguredToken) {
  ApiOptions o = DefaultOptions();
  o.admin_token = "";
  MakeApi(o);
  ExpectError(Await(Send("GET", "/api/v1/tags", "", "Bearer ")), 401, "unauthenticated");
  ExpectError(Await(Send("GET", "/api/v1/tags", "", "")), 401, "unauthenticated");
}

// POST /api/v1/backup {"dir"}: ApiOptions::backup (a standalone's checkpoint) with the dir asked,
// its error as the answer; without it (a cluster gateway) 501.
TEST_F(ApiTest, BackupRunsTheNodesBackupWithTheDirAskedOnlyForTheAdmin) {
  ExpectError(Admin("POST", "/api/v1/backup", R"({"dir":"/b"})"), 501, "unimplemented");
  ApiOptions o = DefaultOptions();
  std::mutex mu;
  std::vector<std::string> asked;
  o.backup = [&](const std::string& dir) -> Result<void> {
    std::lock_guard lock(mu);
    asked.push_back(dir);
    if (dir == "/full") return Fail(Code::kFailedPrecondition, "'/full' exists and is not empty");
    return {};
  };
  MakeApi(o);
  auto done = Admin("POST", "/api/v1/backup", R"({"dir":"/b"})");
  EXPECT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.body, R"({"backup":"/b"})");
  ExpectError(Admin("POST", "/api/v1/backup", R"({"dir":"/full"})"), 409, "failed_precondition");
  for (const char* bad : {"", "{}", R"({"dir":1})", R"({"dir":"/b","x":1})", "[]"}) {
    ExpectError(Admin("POST", "/api/v1/backup", bad), 400, "invalid_argument");
  }
  ExpectError(Admin("GET", "/api/v1/backup"), 405, "method_not_allowed");
  ExpectError(Await(Send("POST", "/api/v1/backup", R"({"dir":"/c"})", "")), 401, "unauthenticated");
  std::lock_guard lock(mu);
  EXPECT_EQ(asked, (std::vector<std::string>{"/b", "/full"}));
}

// /api/v1/workers: this node's lease (ApiOptions::lease_status, handed over as a value) with the
// registry's counts in one JSON body; without a lease, the worker id from config.
TEST_F(ApiTest, WorkersShowThisNodesLeaseWithTheRegistrysCounts) {
  EXPECT_EQ(Admin("GET", "/api/v1/workers").body, R"({"source":"config","worker_id":7})");
  ApiOptions o = DefaultOptions();
  o.lease_status = [] {
    snowflake::WorkerLease::Status s;
    s.worker_id = kWorkerId;
    s.valid_for_ms = 12345;
    s.last_error = "broker down";
    return s;
  };
  MakeApi(o);
  allocator_.set_worker_counts(allocator::WorkerCounts{.leased = 3, .free = 1021});
  EXPECT_EQ(Admin("GET", "/api/v1/workers").body,
            R"({"free":1021,"leased":3,"node":{"last_error":"renewal failed",)"
            R"("valid_for_ms":12345,"worker_id":7},"source":"registry"})");
  allocator_.set_worker_counts(std::nullopt);
  ExpectError(Admin("GET", "/api/v1/workers"), 409, "failed_precondition");
  ExpectError(Admin("POST", "/api/v1/workers"), 405, "method_not_allowed");
  ExpectError(Get("/api/v1/workers"), 401, "unauthenticated");
}

TEST_F(ApiTest, PutGetListAndDeleteTags) {
  HttpResponse put = Admin("PUT", "/api/v1/tags/order", R"({"step":500,"description":"orders"})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Body(put), json::parse(R"({"tag":"order","max_id":1,"step":500,
      "description":"orders","id_mode":"plain","update_time":"2023-11-14T22:13:20.000Z"})"));

  HttpResponse get = Admin("GET", "/api/v1/tags/order");
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(Body(get), Body(put));

  ASSERT_EQ(Admin("PUT", "/api/v1/tags/billing", "").status, 200);  // empty body: defaults
  HttpResponse list = Admin("GET", "/api/v1/tags");
  ASSERT_EQ(list.status, 200) << list.body;
  json tags = Body(list)["tags"];
  ASSERT_EQ(tags.size(), 2u) << list.body;
  EXPECT_EQ(tags[0]["tag"], "billing");
  EXPECT_EQ(tags[0]["step"], 1000);
  EXPECT_EQ(tags[1]["tag"], "order");

  HttpResponse del = Admin("DELETE", "/api/v1/tags/order");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Body(del)["deleted"]["tag"], "order");
  ExpectError(Admin("GET", "/api/v1/tags/order"), 404, "not_found");
  ExpectError(Admin("DELETE", "/api/v1/tags/order"), 404, "not_found");
  json after = Body(Admin("GET", "/api/v1/tags"))["tags"];
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["tag"], "billing");
}

TEST_F(ApiTest, ObfuscatedTagsShowTheirModeButNeverTheKey) {
  HttpResponse put = Admin("PUT", "/api/v1/tags/order", R"({"step":50,"id_mode":"obfuscated"})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Body(put)["id_mode"], "obfuscated");
  const std::string key = allocator_.Tag("order")->id_key;
  ASSERT_EQ(key.size(), 32u);
  HttpResponse ids = Get("/api/v1/segment/order?count=100");
  ASSERT_EQ(ids.status, 200) << ids.body;
  int up = 0;
  int64_t previous = 0;
  const auto body = Body(ids);  // kept: the loop must not run over a destroyed temporary
  for (const auto& id : body["ids"]) {
    const int64_t v = std::stoll(id.get<std::string>());
    EXPECT_GT(v, 1);  // above id_base 1
    up += v > previous;
    previous = v;
  }
  EXPECT_LT(up, 90) << "obfuscated IDs came out in order";
  for (const std::string target : {"/api/v1/tags", "/api/v1/tags/order", "/db", "/cache"}) {
    HttpResponse r = Admin("GET", target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body.find(key), std::string::npos) << target << " shows the key";
    EXPECT_EQ(r.body.find("id_key"), std::string::npos) << target;
  }
  ExpectError(Admin("PUT", "/api/v1/tags/order", R"({"id_mode":"plain"})"), 409,
              "failed_precondition");
  ExpectError(Admin("PUT", "/api/v1/tags/order", R"({"id_mode":"rot13"})"), 400,
              "invalid_argument");
}

// Issue 29: a tag switched from plain to obfuscated went on serving plain, countable IDs from the
// buffered segments. The node that answers the switch drops them; the answer says what the other
// gateways do.
TEST_F(ApiTest, LeavingPlainDropsThisNodesPlainSegmentsAndTheAnswerSaysWhatOthersDo) {
  ASSERT_EQ(Admin("PUT", "/api/v1/tags/order", R"({"step":1000})").status, 200);
  HttpResponse first = Get("/api/v1/segment/order?count=1");  // buffers a plain segment
  ASSERT_EQ(first.status, 200) << first.body;
  const auto first_body = Body(first);
  EXPECT_LT(std::stoll(first_body["ids"][0].get<std::string>()), 10);
  HttpResponse put = Admin("PUT", "/api/v1/tags/order", R"({"id_mode":"obfuscated"})");
  ASSERT_EQ(put.status, 200) << put.body;
  const auto put_body = Body(put);
  ASSERT_TRUE(put_body.contains("note")) << put.body;
  EXPECT_NE(put_body["note"].get<std::string>().find("other gateways"), std::string::npos);
  const int64_t base = allocator_.Tag("order")->id_base;
  HttpResponse ids = Get("/api/v1/segment/order?count=50");
  ASSERT_EQ(ids.status, 200) << ids.body;
  const auto body = Body(ids);
  for (const auto& id : body["ids"]) {
    EXPECT_GT(std::stoll(id.get<std::string>()), base) << "a plain ID after the switch";
  }
  // Only a PUT that names a mode other than plain has the note.
  HttpResponse described = Admin("PUT", "/api/v1/tags/order", R"({"description":"orders"})");
  ASSERT_EQ(described.status, 200) << described.body;
  EXPECT_FALSE(Body(described).contains("note")) << described.body;
}

TEST_F(ApiTest, PutUpdatesOnlyWhatItNames) {
  ASSERT_EQ(Admin("PUT", "/api/v1/tags/order", R"({"step":5,"description":"d"})").status, 200);
  HttpResponse r = Admin("PUT", "/api/v1/tags/order", R"({"max_id":900})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = Body(r);
  EXPECT_EQ(j["max_id"], 900);
  EXPECT_EQ(j["step"], 5);
  EXPECT_EQ(j["description"], "d");
}

TEST_F(ApiTest, PutWithABadBodyIsBadRequest) {
  for (const std::string body :
       {"not json", "[1]", "\"str\"", "42", R"({"step":"5"})", R"({"step":1.5})",
        R"({"description":5})", R"({"max_id":null})", R"({"step":0})", R"({"step":1000001})",
        R"({"max_id":-1})", R"({"step":5,"bogus":1})", "{\"step\":5"}) {
    SCOPED_TRACE(body);
    ExpectError(Admin("PUT", "/api/v1/tags/order", body), 400, "invalid_argument");
  }
  EXPECT_FALSE(allocator_.Tag("order")) << "a rejected PUT created the tag";
}

TEST_F(ApiTest, UnknownFieldErrorNamesTheField) {
  HttpResponse r = Admin("PUT", "/api/v1/tags/order", R"({"stepp":5})");
  ExpectError(r, 400, "invalid_argument");
  EXPECT_EQ(Body(r)["error"].value("message", "").rfind("stepp", 0), 0u) << r.body;
}

TEST_F(ApiTest, LoweringMaxIdIsConflict) {
  ASSERT_EQ(Admin("PUT", "/api/v1/tags/order", R"({"max_id":5000})").status, 200);
  ExpectError(Admin("PUT", "/api/v1/tags/order", R"({"max_id":10})"), 409, "failed_precondition");
  EXPECT_EQ(Body(Admin("GET", "/api/v1/tags/order"))["max_id"], 5000);
}

TEST_F(ApiTest, BadTagOnAdminRoutesIsBadRequest) {
  ExpectError(Admin("GET", "/api/v1/tags/bad!tag"), 400, "invalid_argument");
  ExpectError(Admin("PUT", "/api/v1/tags/a%2Fb", "{}"), 400, "invalid_argument");
  ExpectError(Admin("DELETE", "/api/v1/tags/" + std::string(129, 't')), 400, "invalid_argument");
}

TEST_F(ApiTest, AdminAnswersFromTheAllocatorsThread) {
  allocator_.set_mode(FakeAllocator::Mode::kDeferred);
  auto answer = Send("PUT", "/api/v1/tags/order", R"({"step":5})", std::string("Bearer ") + kToken);
  ASSERT_TRUE(allocator_.WaitForPending(1));
  std::thread completer([this] { allocator_.CompletePending(); });
  HttpResponse r = Await(answer);
  completer.join();
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ApiTest, DeletedTagStopsServingAndARecreatedTagContinuesAboveIt) {
  ASSERT_EQ(Admin("PUT", "/api/v1/tags/order", R"({"step":100})").status, 200);
  HttpResponse first = Get("/api/segment/get/order");
  ASSERT_EQ(first.status, 200);
  ASSERT_EQ(Admin("DELETE", "/api/v1/tags/order").status, 200);
  ExpectError(Get("/api/segment/get/order"), 404, "not_found");
  ExpectError(Get("/api/v1/segment/order"), 404, "not_found");

  ASSERT_EQ(Admin("PUT", "/api/v1/tags/order", R"({"step":100})").status, 200);
  HttpResponse again = Get("/api/segment/get/order");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(std::stoll(again.body), std::stoll(first.body));
  EXPECT_GE(std::stoll(again.body), 101) << "reused an ID range of the deleted tag";
}

// ---------------------------------------------------------------------------------------------
// Decode

TEST_F(ApiTest, DecodeDescribesAnId) {
  HttpResponse r = Get("/api/v1/snowflake/decode/1256557484213448722");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(Body(r), json::parse(R"({"id":"1256557484213448722","timestamp_ms":1588421624602,
      "time":"2020-05-02T12:13:44.602Z","worker_id":619,"sequence":18})"));
}

TEST_F(ApiTest, DecodeRejectsBadIds) {
  for (const std::string id : {"abc", "-1", "99999999999999999999", "", "1.5", "12a", "%201"}) {
    SCOPED_TRACE(id);
    ExpectError(Get("/api/v1/snowflake/decode/" + id), 400, "invalid_argument");
  }
}

// ---------------------------------------------------------------------------------------------
// UUIDv7, ULID and compose (issue 17)

// The strings of {"tag","ids"}.
std::vector<std::string> TextIds(const HttpResponse& r, const std::string& tag) {
  std::vector<std::string> ids;
  json j = Body(r);
  EXPECT_EQ(r.status, 200) << r.body;
  if (!j.is_object() || !j.contains("ids")) return ids;
  EXPECT_EQ(j.value("tag", ""), tag);
  for (const auto& id : j["ids"]) {
    EXPECT_TRUE(id.is_string()) << r.body;
    if (id.is_string()) ids.push_back(id.get<std::string>());
  }
  return ids;
}

TEST_F(ApiTest, Uuid7RouteAnswersIncreasingCanonicalUuidv7s) {
  const std::regex canonical("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  const snowflake::Id128Layout layout(snowflake::Id128Kind::kUuid7, SnowflakeLayout::Default());
  for (int64_t count : {1, 3, 1000}) {  // 1,000: answered from a worker
    std::vector<std::string> ids =
        TextIds(Get("/api/v1/uuid7/order?count=" + std::to_string(count)), "order");
    ASSERT_EQ(ids.size(), static_cast<size_t>(count));
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(std::regex_match(ids[i], canonical)) << ids[i];
      if (i > 0) {
        ASSERT_LT(ids[i - 1], ids[i]);
      }
      auto parts = layout.Split(layout.Parse(ids[i]).value());
      ASSERT_EQ(parts.worker_id, kWorkerId);
      ASSERT_GE(parts.timestamp_ms, kNow);
    }
  }
  EXPECT_EQ(TextIds(Get("/api/v1/uuid7/order"), "order").size(), 1u);
}

TEST_F(ApiTest, UlidRouteAnswersIncreasingCrockfordUlids) {
  const std::regex crockford("[0-7][0-9A-HJKMNP-TV-Z]{25}");
  const snowflake::Id128Layout layout(snowflake::Id128Kind::kUlid, SnowflakeLayout::Default());
  std::vector<std::string> ids = TextIds(Get("/api/v1/ulid/pay?count=500"), "pay");
  ASSERT_EQ(ids.size(), 500u);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(std::regex_match(ids[i], crockford)) << ids[i];
    if (i > 0) {
      ASSERT_LT(ids[i - 1], ids[i]);
    }
    EXPECT_EQ(layout.Split(layout.Parse(ids[i]).value()).worker_id, kWorkerId);
  }
}

TEST_F(ApiTest, ComposeAnswersTheFirstIdOfATime) {
  // The clock stands at kNow: an ID issued now lies in [compose(kNow), compose(kNow + 1)).
  const int64_t issued = Ids(Get("/api/v1/snowflake/x")).front();
  const std::string now = FormatUtcMs(kNow);
  HttpResponse at_now = Get("/api/v1/snowflake/compose/" + now);
  ASSERT_EQ(at_now.status, 200) << at_now.body;
  EXPECT_EQ(at_now.content_type, "application/json");
  const json first = Body(at_now);
  ASSERT_TRUE(first["id"].is_string()) << at_now.body;
  EXPECT_EQ(first.size(), 1u) << at_now.body;
  EXPECT_EQ(std::stoll(first["id"].get<std::string>()),
            SnowflakeLayout::Default().FirstIdAt(kNow).value());
  EXPECT_LE(std::stoll(first["id"].get<std::string>()), issued);
  const json next = Body(Get("/api/v1/snowflake/compose/" + std::to_string(kNow + 1)));
  EXPECT_GT(std::stoll(next["id"].get<std::string>()), issued);
  // The same instant with an offset, escaped or not.
  EXPECT_EQ(Body(Get("/api/v1/snowflake/compose/2023-11-15T06:13:20.000+08:00")), first);
  EXPECT_EQ(Body(Get("/api/v1/snowflake/compose/2023-11-15T06%3A13%3A20%2B08%3A00")), first);

  for (const std::string mode : {"uuid7", "ulid"}) {
    SCOPED_TRACE(mode);
    const snowflake::Id128Layout layout(
        mode == "uuid7" ? snowflake::Id128Kind::kUuid7 : snowflake::Id128Kind::kUlid,
        SnowflakeLayout::Default());
    const std::string id = TextIds(Get("/api/v1/" + mode + "/x"), "x").front();
    const json low = Body(Get("/api/v1/" + mode + "/compose/" + now));
    const json high = Body(Get("/api/v1/" + mode + "/compose/" + std::to_string(kNow + 1)));
    ASSERT_TRUE(low["id"].is_string() && high["id"].is_string());
    EXPECT_LE(low["id"].get<std::string>(), id);
    EXPECT_GT(high["id"].get<std::string>(), id);
    EXPECT_EQ(layout.Split(layout.Parse(low["id"].get<std::string>()).value()).timestamp_ms, kNow);
  }
}

TEST_F(ApiTest, ComposeRefusesBadTimesAndTimesOutsideTheLayout) {
  for (const std::string mode : {"snowflake", "uuid7", "ulid"}) {
    for (const std::string bad :
         {"tomorrow", "2026-11-24", "2026-11-24T10:00:00", "%zz", "%2", "2026-02-30T00:00:00Z"}) {
      SCOPED_TRACE(mode + " " + bad);
      ExpectError(Get("/api/v1/" + mode + "/compose/" + bad), 400, "invalid_argument");
    }
  }
  // Before Leaf's epoch, and past the 41 timestamp bits (2080-07-10): the message names the range.
  for (const std::string out : {"2010-01-01T00:00:00Z", "2080-07-10T17:30:30.209Z", "-1"}) {
    SCOPED_TRACE(out);
    HttpResponse r = Get("/api/v1/snowflake/compose/" + out);
    ExpectError(r, 400, "invalid_argument");
    EXPECT_NE(Body(r)["error"].value("message", "").find("2010-11-04T01:42:54.657Z"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(Get("/api/v1/snowflake/compose/2080-07-10T17:30:30.208Z").status, 200);
  EXPECT_EQ(Get("/api/v1/snowflake/compose/2010-11-04T01:42:54.657Z").status, 200);
  ExpectError(Get("/api/v1/uuid7/compose/-1"), 400, "invalid_argument");
  ExpectError(Get("/api/v1/ulid/compose/281474976710656"), 400, "invalid_argument");  // 2^48
  EXPECT_EQ(Get("/api/v1/ulid/compose/281474976710655").status, 200);
}

// The route label of the requests metrics: one per route Handle serves, whatever the tag or ID,
// "other" for a path it answers 404, and always one of kRoutes.
TEST(ApiRouteTest, EveryTargetMapsToOneOfTheFixedRoutes) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"/", "/"},
      {"/?x=1", "/"},
      {"/metrics", "/metrics"},
      {"/healthz", "/healthz"},
      {"/readyz?verbose=1", "/readyz"},
      {"/api/segment/get/order", "/api/segment/get/{tag}"},
      {"/api/snowflake/get/order", "/api/snowflake/get/{tag}"},
      {"/api/v1/segment/order?count=5", "/api/v1/segment/{tag}"},
      {"/api/v1/snowflake/pay", "/api/v1/snowflake/{tag}"},
      {"/api/v1/snowflake/decode/123", "/api/v1/snowflake/decode/{id}"},
      {"/api/v1/snowflake/compose/2026-11-24T10:00:00Z", "/api/v1/snowflake/compose/{time}"},
      {"/api/v1/uuid7/order?count=3", "/api/v1/uuid7/{tag}"},
      {"/api/v1/ulid/order", "/api/v1/ulid/{tag}"},
      {"/api/v1/uuid7/compose/1795514400000", "/api/v1/uuid7/compose/{time}"},
      {"/api/v1/ulid/compose/2026-11-24T10:00:00%2B08:00", "/api/v1/ulid/compose/{time}"},
      {"/api/v1/uuid7/compose", "/api/v1/uuid7/{tag}"},
      {"/api/v1/uuid7/order/x", "other"},
      {"/api/v1/segment/compose/1", "other"},
      {"/api/v1/status", "/api/v1/status"},
      {"/api/v1/workers", "/api/v1/workers"},
      {"/api/v1/tags", "/api/v1/tags"},
      {"/api/v1/tags/order", "/api/v1/tags/{tag}"},
      {"/api/v1/spaces", "/api/v1/spaces"},
      {"/api/v1/spaces/inbox", "/api/v1/spaces/{space}"},
      {"/api/v1/seq/inbox", "/api/v1/seq/{space}"},
      {"/api/v1/seq/inbox/42", "/api/v1/seq/{space}/{key}"},
      {"/api/v1/seq/inbox/42/current", "/api/v1/seq/{space}/{key}/current"},
      {"/api/v1/seq/inbox/42/next", "other"},
      {"/api/v1/seq/inbox/42/current/x", "other"},
      {"/cache", "/cache"},
      {"/db", "/db"},
      {"/decodeSnowflakeId?snowflakeId=1", "/decodeSnowflakeId"},
      {"/favicon.ico", "other"},
      {"/api", "other"},
      {"/api/v2/segment/order", "other"},
      {"/api/v1/segment/order/extra", "other"},
      {"/api/v1/nothing", "other"},
  };
  for (const auto& [target, route] : cases) {
    EXPECT_EQ(Api::RouteOf(target), route) << target;
    const auto labels = Api::RouteLabels();
    EXPECT_NE(std::find(labels.begin(), labels.end(), Api::RouteOf(target)), labels.end())
        << target;
  }
}

// The labels are the route table's patterns, each once, and "other": the series RequestMetrics
// creates up front.
TEST(ApiRouteTest, LabelsAreEachRoutePatternOnceAndOther) {
  const auto labels = Api::RouteLabels();
  const std::set<std::string_view> unique(labels.begin(), labels.end());
  EXPECT_EQ(unique.size(), labels.size());
  EXPECT_EQ(labels.size(), 28u);
  EXPECT_EQ(labels.back(), "other");
  for (std::string_view label : labels.first(labels.size() - 1)) {
    EXPECT_TRUE(label.starts_with('/')) << label;
    EXPECT_EQ(Api::RouteOf(label), label) << "a pattern is its own route";
  }
}

// ---------------------------------------------------------------------------------------------
// Sequences (I5)

TEST_F(ApiTest, SpacesArePutGotListedAndDeletedByAdminsOnly) {
  HttpResponse put = Admin("PUT", "/api/v1/spaces/inbox", R"({"section_size":1000,"step":50})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Body(put)["space"], "inbox");
  EXPECT_EQ(Body(put)["section_size"], 1000);
  EXPECT_EQ(Body(put)["step"], 50);
  HttpResponse defaults = Admin("PUT", "/api/v1/spaces/chat");
  ASSERT_EQ(defaults.status, 200) << defaults.body;
  EXPECT_EQ(Body(defaults)["section_size"], 100000) << "seqsvr's section of 100,000 users";
  EXPECT_EQ(Body(defaults)["step"], 10000);

  HttpResponse list = Admin("GET", "/api/v1/spaces");
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(Body(list)["spaces"].size(), 2u);
  EXPECT_EQ(Body(list)["spaces"][0]["space"], "chat");
  EXPECT_EQ(Admin("GET", "/api/v1/spaces/inbox").status, 200);
  EXPECT_EQ(Get("/api/v1/spaces/inbox").status, 401) << "admin routes need the token";

  HttpResponse deleted = Admin("DELETE", "/api/v1/spaces/chat");
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Body(deleted)["deleted"]["space"], "chat");
  EXPECT_EQ(Admin("GET", "/api/v1/spaces/chat").status, 404);
  EXPECT_EQ(Admin("POST", "/api/v1/spaces/inbox").status, 405);
  EXPECT_EQ(Admin("PUT", "/api/v1/spaces").status, 405);
}

TEST_F(ApiTest, BadSpaceBodiesAndNamesAreBadRequestsNamingTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {"/api/v1/spaces/inbox", R"({"step":"ten"})"},
      {"/api/v1/spaces/inbox", R"({"section_size":1.5})"},
      {"/api/v1/spaces/inbox", R"({"sections":10})"},
      {"/api/v1/spaces/inbox", R"([1])"},
      {"/api/v1/spaces/inbox", "{"},
      {"/api/v1/spaces/in%20box", "{}"},
      {"/api/v1/spaces/inbox", R"({"step":0})"},
      {"/api/v1/spaces/inbox", R"({"section_size":4294967296})"},
  };
  for (const auto& [target, body] : cases) {
    HttpResponse r = Admin("PUT", target, body);
    EXPECT_EQ(r.status, 400) << target << " " << body << ": " << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_argument") << body;
  }
  EXPECT_EQ(Body(Admin("PUT", "/api/v1/spaces/inbox", R"({"sections":10})"))["error"]["message"]
                .get<std::string>()
                .rfind("sections: unknown field", 0),
            0u);
}

TEST_F(ApiTest, ASequencePerKeyGoesUpWithKeysAndValuesAsStrings) {
  ASSERT_EQ(Admin("PUT", "/api/v1/spaces/inbox").status, 200);
  for (int expected = 1; expected <= 3; ++expected) {
    HttpResponse r = Get("/api/v1/seq/inbox/18446744073709551615");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Body(r), json({{"space", "inbox"},
                             {"key", "18446744073709551615"},
                             {"seq", std::to_string(expected)}}));
  }
  HttpResponse current = Get("/api/v1/seq/inbox/18446744073709551615/current");
  ASSERT_EQ(current.status, 200) << current.body;
  EXPECT_EQ(Body(current)["seq"], "3");
  EXPECT_EQ(Body(Get("/api/v1/seq/inbox/7/current"))["seq"], "0") << "a key never asked for";

  HttpResponse whole = Get("/api/v1/seq/inbox");
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(Body(whole)["key"], "0") << "the space's own sequence is key 0";
  EXPECT_EQ(Body(whole)["seq"], "1");
}

TEST_F(ApiTest, AFanOutAnswersOneValuePerKeyInTheOrderAsked) {
  ASSERT_EQ(Admin("PUT", "/api/v1/spaces/inbox").status, 200);
  HttpResponse r = Await(Send("POST", "/api/v1/seq/inbox", R"({"keys":["5","3",5,"5"]})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), json::parse(R"({"space":"inbox","seqs":[
      {"key":"5","seq":"1"},{"key":"3","seq":"1"},{"key":"5","seq":"2"},{"key":"5","seq":"3"}]})"));
  ASSERT_EQ(allocator_.asked_keys().size(), 1u) << "one allocator call for the whole list";
  EXPECT_EQ(allocator_.asked_keys()[0], (std::vector<uint64_t>{5, 3, 5, 5}));

  std::string most = R"({"keys":[)";
  for (size_t i = 0; i < allocator::kMaxSeqKeys; ++i)
    most += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  EXPECT_EQ(Await(Send("POST", "/api/v1/seq/inbox", most + "]}")).status, 200);
  HttpResponse too_many = Await(Send("POST", "/api/v1/seq/inbox", most + ",\"1\"]}"));
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  EXPECT_NE(Body(too_many)["error"]["message"].get<std::string>().find("1 to 1000 keys"),
            std::string::npos)
      << too_many.body;
}

TEST_F(ApiTest, BadKeysAndUnknownSpacesAreClearErrorsAndNothingIsDrawn) {
  ASSERT_EQ(Admin("PUT", "/api/v1/spaces/inbox").status, 200);
  for (const std::string key :
       {"-1", "18446744073709551616", "1e3", "", "0x10", "007", "+4", "12a", "%31"}) {
    HttpResponse r = Get("/api/v1/seq/inbox/" + key);
    EXPECT_EQ(r.status, 400) << "key '" << key << "': " << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_argument") << key;
  }
  for (const std::string body :
       {R"({"keys":[]})", R"({"keys":["-1"]})", R"({"keys":[-1]})", R"({"keys":[1.5]})",
        R"({"keys":"1"})", R"({"key":["1"]})", R"({"keys":["1"],"x":1})", "", "[]", "{"}) {
    HttpResponse r = Await(Send("POST", "/api/v1/seq/inbox", body));
    EXPECT_EQ(r.status, 400) << "body " << body << ": " << r.body;
  }
  // Bytes that are not UTF-8 (raw in the path, or cut by the quote's 40 characters) are refused
  // with a JSON error like any other bad key.
  const std::string cut = "\"" + std::string(39, '1') + "\xc3\xa9\"";
  for (const auto& [target, body] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/seq/inbox/\xff\xfe", ""},
           {"/api/v1/seq/inbox/" + std::string(39, '1') + "\xc3\xa9", ""},
           {"/api/v1/seq/inbox", "{\"keys\":[" + cut + "]}"}}) {
    HttpResponse r = Await(Send(body.empty() ? "GET" : "POST", target, body));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_argument") << r.body;
  }
  EXPECT_TRUE(allocator_.asked_keys().empty()) << "a bad request reached the allocator";
  HttpResponse unknown = Get("/api/v1/seq/outbox/1");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(Body(unknown)["error"]["code"], "not_found");
  EXPECT_EQ(Get("/api/v1/seq/in%20box/1").status, 400);
  EXPECT_EQ(Await(Send("PUT", "/api/v1/seq/inbox")).status, 405);
  EXPECT_EQ(Await(Send("POST", "/api/v1/seq/inbox/1")).status, 405);
}

TEST(ErrorResponseTest, AMessageWithBytesThatAreNotUtf8IsStillJson) {
  HttpResponse r = ErrorResponse(Error{Code::kInvalidArgument, "got '\xff\xc3'"});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Body(r)["error"]["message"], "got '\xef\xbf\xbd\xef\xbf\xbd'") << r.body;
}

TEST(ErrorResponseTest, HasTheJsonShapeAndRetryAfterOnlyOn503) {
  HttpResponse unavailable = ErrorResponse(Error{Code::kUnavailable, "try later"}, 7);
  EXPECT_EQ(unavailable.status, 503);
  EXPECT_EQ(Header(unavailable, "Retry-After"), "7");
  EXPECT_EQ(Body(unavailable),
            json::parse(R"({"error":{"code":"unavailable","message":"try later"}})"));

  HttpResponse bad = ErrorResponse(Error{Code::kInvalidArgument, "no"});
  EXPECT_EQ(bad.status, 400);
  EXPECT_FALSE(Header(bad, "Retry-After"));

  EXPECT_EQ(ErrorResponse(Error{Code::kUnauthenticated, "x"}).status, 401);
  EXPECT_EQ(ErrorResponse(Error{Code::kNotFound, "x"}).status, 404);
  EXPECT_EQ(ErrorResponse(Error{Code::kFailedPrecondition, "x"}).status, 409);
  EXPECT_EQ(ErrorResponse(Error{Code::kInternal, "x"}).status, 500);
}

TEST(ErrorResponseTest, MessageIsEscapedAsJson) {
  HttpResponse r = ErrorResponse(Error{Code::kInvalidArgument, "a \"quoted\"\nline\\"});
  EXPECT_EQ(Body(r)["error"]["message"], "a \"quoted\"\nline\\");
}

}  // namespace
}  // namespace kleaf::gateway
