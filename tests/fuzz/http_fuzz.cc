// libFuzzer target: the bytes a client sends on one connection, from the first byte to the Api
// call. The input goes through the RequestReader exactly as a session feeds it (and once more one
// byte per read), each request it yields goes to the real Api, and the allocator behind it is an
// in-process fake with the real allocation rules. Aborts (a finding) when:
// - the requests depend on how the bytes were split into reads (only a refusal may come earlier,
//   later, or for another of the request's faults);
// - the reader takes more bytes than its bound allows before answering;
// - an answer is missing, given twice, or an error that is not {"error":{"code","message"}};
// - ASan or UBSan see a memory error or undefined behaviour anywhere on the way.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/allocation.h"
#include "allocator/allocator.h"
#include "base/clock.h"
#include "base/worker_pool.h"
#include "gateway/api.h"
#include "gateway/segment_cache.h"
#include "http/request_reader.h"
#include "snowflake/snowflake.h"

namespace kleaf::fuzz {
namespace {

// The admin token of the seed corpus's admin requests.
constexpr const char* kToken = "fuzz-admin-token-0123456789";
constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kMaxStep = 1'000'000;
// The smallest limits the config allows, so that short inputs reach them.
constexpr http::RequestLimits kLimits{1024, 1024};

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "http_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Tags in memory with the real allocation rules; every call completes inline.
class InlineAllocator final : public allocator::Allocator {
 public:
  explicit InlineAllocator(Clock& clock) : clock_(clock) {
    state::TagRecord order;
    order.tag = "order";
    order.step = 1000;
    order.max_id = 1;
    tags_["order"] = order;
  }

  void Submit(allocator::AnyCall call) override {
    std::visit([this](auto& c) { Handle(std::move(c.op), std::move(c.done)); }, call);
  }

 private:
  void Handle(allocator::op::Allocate op, allocator::Callback<allocator::Segment> done) {
    auto it = tags_.find(op.tag);
    if (it == tags_.end() || it->second.deleted) {
      return done(Fail(Code::kNotFound, "unknown tag '" + op.tag + "'"));
    }
    done(allocator::ReserveSegment(it->second, op.step, kMaxStep, clock_.NowMs()));
  }
  void Handle(allocator::op::ListTags, allocator::Callback<std::vector<state::TagRecord>> done) {
    std::vector<state::TagRecord> live;
    for (const auto& [tag, r] : tags_) {
      if (!r.deleted) live.push_back(r);
    }
    done(std::move(live));
  }
  void Handle(allocator::op::GetTag op, allocator::Callback<state::TagRecord> done) {
    auto it = tags_.find(op.tag);
    if (it == tags_.end() || it->second.deleted) return done(Fail(Code::kNotFound, "unknown tag"));
    done(it->second);
  }
  void Handle(allocator::op::PutTag op, allocator::Callback<state::TagRecord> done) {
    std::optional<state::TagRecord> existing;
    if (auto it = tags_.find(op.tag); it != tags_.end()) existing = it->second;
    auto r = allocator::ApplyTagUpdate(existing, op.tag, op.update, 1000, kMaxStep, clock_.NowMs());
    if (r) tags_[op.tag] = *r;
    done(std::move(r));
  }
  void Handle(allocator::op::DeleteTag op, allocator::Callback<state::TagRecord> done) {
    auto it = tags_.find(op.tag);
    if (it == tags_.end() || it->second.deleted) return done(Fail(Code::kNotFound, "unknown tag"));
    state::TagRecord before = it->second;
    it->second.deleted = true;
    done(before);
  }
  void Handle(allocator::op::ClaimWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    done(NoRegistry());
  }
  void Handle(allocator::op::RenewWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    done(NoRegistry());
  }
  void Handle(allocator::op::ReleaseWorker, allocator::Callback<allocator::WorkerLeaseInfo> done) {
    done(NoRegistry());
  }
  void Handle(allocator::op::WorkerStatus, allocator::Callback<allocator::WorkerCounts> done) {
    done(NoRegistry());
  }
  // Spaces with the real rules; each key's counter in a map (no sections: not the fuzzer's
  // business).
  void Handle(allocator::op::ListSpaces,
              allocator::Callback<std::vector<state::SpaceRecord>> done) {
    std::vector<state::SpaceRecord> live;
    for (const auto& [name, r] : spaces_) {
      if (!r.deleted) live.push_back(r);
    }
    done(std::move(live));
  }
  void Handle(allocator::op::GetSpace op, allocator::Callback<state::SpaceRecord> done) {
    auto it = spaces_.find(op.space);
    if (it == spaces_.end() || it->second.deleted)
      return done(Fail(Code::kNotFound, "unknown space"));
    done(it->second);
  }
  void Handle(allocator::op::PutSpace op, allocator::Callback<state::SpaceRecord> done) {
    std::optional<state::SpaceRecord> existing;
    if (auto it = spaces_.find(op.space); it != spaces_.end()) existing = it->second;
    auto r = allocator::ApplySpaceUpdate(existing, op.space, op.update, {}, clock_.NowMs());
    if (r) spaces_[op.space] = *r;
    done(std::move(r));
  }
  void Handle(allocator::op::DeleteSpace op, allocator::Callback<state::SpaceRecord> done) {
    auto it = spaces_.find(op.space);
    if (it == spaces_.end() || it->second.deleted)
      return done(Fail(Code::kNotFound, "unknown space"));
    state::SpaceRecord before = it->second;
    it->second.deleted = true;
    done(before);
  }
  void Handle(allocator::op::NextSeq op, allocator::Callback<std::vector<uint64_t>> done) {
    auto it = spaces_.find(op.space);
    if (it == spaces_.end() || it->second.deleted)
      return done(Fail(Code::kNotFound, "unknown space"));
    std::vector<uint64_t> values;
    for (uint64_t key : op.keys) values.push_back(++seqs_[{op.space, key}]);
    done(std::move(values));
  }
  void Handle(allocator::op::CurrentSeq op, allocator::Callback<uint64_t> done) {
    auto it = spaces_.find(op.space);
    if (it == spaces_.end() || it->second.deleted)
      return done(Fail(Code::kNotFound, "unknown space"));
    done(seqs_[{op.space, op.key}]);
  }
  // No HTTP route raises a section: only `kleaf state import` does.
  void Handle(allocator::op::RaiseSection, allocator::Callback<uint64_t> done) {
    done(Fail(Code::kUnimplemented, "not in the fuzzer"));
  }
  static std::unexpected<Error> NoRegistry() {
    return Fail(Code::kFailedPrecondition, "no worker registry in the fuzzer");
  }
  Clock& clock_;
  std::map<std::string, state::TagRecord> tags_;
  std::map<std::string, state::SpaceRecord> spaces_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> seqs_;
};

// What the reader made of the input, in a form two runs can be compared by.
struct Parsed {
  std::vector<http::ReadOutcome> outcomes;
  size_t taken = 0;  // bytes handed to the reader
};

bool Same(const http::ReadOutcome& a, const http::ReadOutcome& b) {
  // Which fault of a bad request is noticed first (and so its status, and whether the request
  // line had been parsed) may depend on how many bytes were at hand; that it is refused may not.
  if (a.kind == http::ReadOutcome::Kind::kReject) return b.kind == a.kind;
  return a.kind == b.kind && a.request.method == b.request.method &&
         a.request.target == b.request.target && a.request.body == b.request.body &&
         a.request.authorization == b.request.authorization && a.head == b.head &&
         a.keep_alive == b.keep_alive && a.version == b.version &&
         a.rejection.status == b.rejection.status && a.rejection.body == b.rejection.body;
}

std::string Describe(const http::ReadOutcome& o) {
  return "kind " + std::to_string(static_cast<int>(o.kind)) + " " + o.request.method + " " +
         o.request.target + " head " + std::to_string(o.head) + " keep-alive " +
         std::to_string(o.keep_alive) + " version " + std::to_string(o.version) + " body " +
         std::to_string(o.request.body.size()) + " bytes, rejection " +
         std::to_string(o.rejection.status) + " " + o.rejection.body;
}

// Feeds `input` as a session does, at most `piece` bytes per read. A request asking the
// connection to close ends the connection, as in the server.
Parsed Parse(std::string_view input, size_t piece) {
  using Kind = http::ReadOutcome::Kind;
  http::RequestReader reader(kLimits);
  Parsed parsed;
  size_t since_answer = 0;  // bytes taken since the last request or rejection
  while (true) {
    http::ReadOutcome o = reader.Next();
    if (o.kind == Kind::kNeedMore) {
      if (input.empty()) return parsed;
      auto space = reader.ReadBuffer();
      Check(!space.empty(), "no room to read although the reader needs more");
      const size_t n = std::min({space.size(), input.size(), piece});
      std::memcpy(space.data(), input.data(), n);
      reader.CommitRead(n);
      input.remove_prefix(n);
      parsed.taken += n;
      since_answer += n;
      // What one request may take is bounded (RequestReader: besides the body at most 2 header
      // limits + the body limit), plus what the read buffer holds beyond it.
      Check(since_answer <= 3 * kLimits.header_limit_bytes + 2 * kLimits.body_limit_bytes,
            "the reader took more bytes than its bound allows without answering");
      continue;
    }
    const bool last = o.kind == Kind::kReject || !o.keep_alive;
    if (o.kind == Kind::kReject) {
      Check(o.rejection.status >= 400 && o.rejection.status < 500, "rejection is not a 4xx",
            o.rejection.body);
    }
    since_answer = 0;
    parsed.outcomes.push_back(std::move(o));
    if (last) return parsed;
  }
}

void CheckAnswer(const http::HttpResponse& r) {
  Check(r.status >= 200 && r.status <= 599, "status out of range", r.body);
  if (r.status < 400) return;
  auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  Check(j.is_object() && j.contains("error") && j["error"].is_object() &&
            j["error"].contains("code") && j["error"]["code"].is_string() &&
            j["error"].contains("message") && j["error"]["message"].is_string(),
        "an error answer is not {\"error\":{\"code\",\"message\"}}", r.body);
}

}  // namespace
}  // namespace kleaf::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // segment fetches log at info: noise, and slow
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kleaf;
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  fuzz::Parsed whole = fuzz::Parse(input, SIZE_MAX);
  fuzz::Parsed bytewise = fuzz::Parse(input, 1);
  // Beast notices some malformed headers only once it sees the end of the header section, and
  // when that is depends on the reads: one run may reject where the other still waits for bytes.
  // Anything else, in particular a request served in one run and not the other, is a finding.
  const size_t common = std::min(whole.outcomes.size(), bytewise.outcomes.size());
  const fuzz::Parsed& longer = whole.outcomes.size() > common ? whole : bytewise;
  fuzz::Check(longer.outcomes.size() == common ||
                  (longer.outcomes.size() == common + 1 &&
                   longer.outcomes.back().kind == http::ReadOutcome::Kind::kReject),
              "the requests depend on how the bytes were split");
  for (size_t i = 0; i < common; ++i) {
    fuzz::Check(fuzz::Same(whole.outcomes[i], bytewise.outcomes[i]),
                "a request depends on how the bytes were split",
                fuzz::Describe(whole.outcomes[i]) +
                    " | one byte per read: " + fuzz::Describe(bytewise.outcomes[i]));
  }

  // A fresh node per input: the same input always takes the same path.
  ManualClock clock(fuzz::kNow);
  fuzz::InlineAllocator allocator(clock);
  gateway::SegmentCache segments(allocator, clock,
                                 {.max_step = fuzz::kMaxStep, .preload_percent = 10});
  snowflake::SnowflakeGenerator snowflake(
      snowflake::SnowflakeLayout::Default(),
      {.worker_id = 1, .random_sequence_start = false, .max_backward_ms = 5}, clock);
  // Stopped at once: work the Api hands to the pool runs inline, so every answer is in before
  // Handle returns.
  WorkerPool blocking(1, "fuzz");
  blocking.Stop();
  gateway::ApiOptions options;
  options.max_batch = 100;
  options.wait_ms = 1;
  options.admin_token = fuzz::kToken;
  gateway::Api api(options, segments, snowflake, allocator, blocking);

  for (auto& outcome : whole.outcomes) {
    if (outcome.kind != http::ReadOutcome::Kind::kRequest) {
      fuzz::CheckAnswer(outcome.rejection);
      continue;
    }
    int answers = 0;
    http::HttpResponse response;
    api.Handle(std::move(outcome.request), [&](http::HttpResponse r) {
      ++answers;
      response = std::move(r);
    });
    fuzz::Check(answers == 1, "a request was not answered exactly once");
    fuzz::CheckAnswer(response);
  }
  return 0;
}
