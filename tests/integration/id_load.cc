#include "tests/integration/id_load.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::integration {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kKeptFailures = 20;

}  // namespace

Load::Load(LoadOptions options) : options_(std::move(options)) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { Client(i); });
}

Load::~Load() { Stop(); }

void Load::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  stop_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

LoadCounters Load::counters() const {
  return {replies_.load(), ids_count_.load(), unavailable_.load(), errors_.load()};
}

bool Load::WaitFor(const std::function<bool(const LoadCounters&)>& done,
                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done(counters())) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done(counters());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval
  }
}

const std::vector<int64_t>& Load::Ids(const std::string& tag) const {
  static const std::vector<int64_t> kNone;
  std::lock_guard lock(mu_);
  auto it = ids_.find(tag);
  return it == ids_.end() ? kNone : it->second;
}

const std::vector<ServedReply>& Load::Replies(const std::string& tag) const {
  static const std::vector<ServedReply> kNone;
  std::lock_guard lock(mu_);
  auto it = replies_by_tag_.find(tag);
  return it == replies_by_tag_.end() ? kNone : it->second;
}

std::string Load::Summary() const {
  auto c = counters();
  return options_.name + ": " + std::to_string(c.replies) + " replies, " + std::to_string(c.ids) +
         " IDs, " + std::to_string(c.unavailable) + " 503s, " + std::to_string(c.errors) +
         " errors";
}

void Load::Fail(std::string what) {
  errors_.fetch_add(1);
  std::lock_guard lock(mu_);
  if (failures_.size() < kKeptFailures) failures_.push_back(options_.name + ": " + std::move(what));
}

void Load::Client(int index) {
  e2e::HttpClient client(options_.port, options_.request_timeout);
  std::mt19937 rng(static_cast<unsigned>(index) * 7919u + 17u);
  const size_t tags = options_.tags.size();
  std::vector<int64_t> last(tags, -1);  // per tag: the newest ID this connection received
  std::vector<std::vector<int64_t>> ids(tags);
  std::vector<std::vector<ServedReply>> replies(tags);
  const int batch_min = std::max(2, options_.batch_max / 2);
  const int batch_max = std::max(batch_min, options_.batch_max);
  const std::string kind = options_.kind == LoadOptions::Kind::kSnowflake ? "snowflake" : "segment";

  for (int64_t i = 0; i < options_.max_requests && !stop_.load(); ++i) {
    if (i > 0 && options_.pause.count() > 0) {
      std::unique_lock lock(mu_);
      if (stop_cv_.wait_for(lock, options_.pause, [this] { return stop_.load(); })) break;
    }
    const size_t t = static_cast<size_t>(i + index) % tags;
    const std::string& tag = options_.tags[t];
    const bool plain =
        options_.mix == LoadOptions::Mix::kAlternate && (i / static_cast<int64_t>(tags)) % 2 == 0;
    const int count =
        plain ? 1
              : batch_min +
                    static_cast<int>(rng() % static_cast<unsigned>(batch_max - batch_min + 1));
    const std::string target =
        plain ? "/api/" + kind + "/get/" + tag
              : "/api/v1/" + kind + "/" + tag + "?count=" + std::to_string(count);
    const int64_t sent = NowNs();
    auto reply = client.Get(target);
    const int64_t done = NowNs();
    if (!reply) {
      Fail("GET " + target + ": " + reply.error());
      continue;  // the client reconnects on the next request
    }
    if (reply->status == 503) {
      auto body = nlohmann::json::parse(reply->body, nullptr, false);
      if (reply->Header("Retry-After").empty() || !body.is_object() || !body.contains("error")) {
        Fail("503 without Retry-After or error body: " + reply->body);
      } else {
        unavailable_.fetch_add(1);
      }
      continue;
    }
    auto got = e2e::IdsOf(*reply, plain, tag);
    if (!got) {
      Fail("GET " + target + ": " + got.error());
      continue;
    }
    if (static_cast<int>(got->size()) != count) {
      Fail("GET " + target + ": " + std::to_string(got->size()) + " IDs");
      continue;
    }
    int64_t previous = last[t];
    bool ordered = true;
    for (int64_t id : *got) {
      if (id <= previous) {
        Fail("GET " + target + ": ID " + std::to_string(id) + " is not above " +
             std::to_string(previous) + " received before on this connection");
        ordered = false;
        break;
      }
      previous = id;
    }
    if (!ordered) continue;
    last[t] = previous;
    ids[t].insert(ids[t].end(), got->begin(), got->end());
    replies[t].push_back({sent, done, got->front(), got->back()});
    ids_count_.fetch_add(static_cast<int64_t>(got->size()));
    replies_.fetch_add(1);
  }
  std::lock_guard lock(mu_);
  for (size_t t = 0; t < tags; ++t) {
    auto& all_ids = ids_[options_.tags[t]];
    all_ids.insert(all_ids.end(), ids[t].begin(), ids[t].end());
    auto& all_replies = replies_by_tag_[options_.tags[t]];
    all_replies.insert(all_replies.end(), replies[t].begin(), replies[t].end());
  }
}

std::string FailureReport(const Load& load, size_t max) {
  const auto& failures = load.failures();
  if (failures.empty()) return "";
  std::string out = load.Summary() + "; the first failures:";
  for (size_t i = 0; i < failures.size() && i < max; ++i) out += "\n  " + failures[i];
  return out;
}

Duplicates FindDuplicates(std::vector<int64_t> ids) {
  Duplicates d;
  std::sort(ids.begin(), ids.end());
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] != ids[i - 1] || (i >= 2 && ids[i - 1] == ids[i - 2])) continue;
    ++d.count;
    if (d.examples.size() < 10) d.examples.push_back(ids[i]);
  }
  return d;
}

std::vector<std::string> OrderViolations(std::vector<ServedReply> replies, size_t limit) {
  std::vector<std::string> out;
  std::sort(replies.begin(), replies.end(),
            [](const ServedReply& a, const ServedReply& b) { return a.done_ns < b.done_ns; });
  // highest[i]: the highest ID of replies[0..i], and which reply held it.
  std::vector<size_t> highest(replies.size());
  for (size_t i = 0; i < replies.size(); ++i) {
    highest[i] = i > 0 && replies[highest[i - 1]].last > replies[i].last ? highest[i - 1] : i;
  }
  for (const auto& r : replies) {
    // Replies received before this request was sent.
    auto before = std::lower_bound(replies.begin(), replies.end(), r.sent_ns,
                                   [](const ServedReply& x, int64_t t) { return x.done_ns < t; });
    if (before == replies.begin()) continue;
    const ServedReply& top = replies[highest[static_cast<size_t>(before - replies.begin()) - 1]];
    if (top.last < r.first) continue;
    out.push_back("a reply with IDs " + std::to_string(r.first) + ".." + std::to_string(r.last) +
                  " came after a reply with ID " + std::to_string(top.last) +
                  " had been received (" + std::to_string((r.sent_ns - top.done_ns) / 1000) +
                  " us before the request)");
    if (out.size() >= limit) break;
  }
  return out;
}

std::vector<int64_t> AllIds(const std::vector<const Load*>& loads, const std::string& tag) {
  std::vector<int64_t> all;
  for (const Load* l : loads) {
    const auto& ids = l->Ids(tag);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

}  // namespace kleaf::integration
