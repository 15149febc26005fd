#include "tests/e2e/id_stream.h"

#include <nlohmann/json.hpp>
#include <random>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {

IdStream::IdStream(uint16_t port, int threads, std::vector<IdRoute> routes, int max_count,
                   Transport transport)
    : port_(port),
      routes_(std::move(routes)),
      max_count_(max_count),
      transport_(std::move(transport)) {
  running_ = threads;
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Client(i); });
}

IdStream::~IdStream() { Stop(); }

std::string IdStream::KeyOf(const IdRoute& route) {
  return route.kind == IdRoute::Kind::kSegment ? "segment/" + route.tag : "snowflake";
}

bool IdStream::WaitForIds(int64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return total_ >= n || running_ == 0; });
  return total_ >= n;
}

void IdStream::Stop() {
  stop_.store(true);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int64_t IdStream::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

void IdStream::Client(int index) {
  HttpClient client(port_, std::chrono::seconds(10), transport_);
  std::mt19937 rng(static_cast<unsigned>(index) * 7919u + 1u);
  std::map<std::string, int64_t> last;  // per key: the newest ID this connection received
  auto fail = [&](std::string what) {
    std::lock_guard lock(mu_);
    failures_.push_back("client " + std::to_string(index) + ": " + std::move(what));
  };
  for (int64_t i = 0; !stop_.load(); ++i) {
    const IdRoute& route = routes_[static_cast<size_t>(i + index) % routes_.size()];
    const bool plain = (i / static_cast<int64_t>(routes_.size())) % 2 == 0;
    const bool segment = route.kind == IdRoute::Kind::kSegment;
    const int count =
        plain ? 1 : 2 + static_cast<int>(rng() % static_cast<unsigned>(max_count_ - 1));
    const std::string target =
        plain ? std::string(segment ? "/api/segment/get/" : "/api/snowflake/get/") + route.tag
              : std::string(segment ? "/api/v1/segment/" : "/api/v1/snowflake/") + route.tag +
                    "?count=" + std::to_string(count);
    const bool gone_before = server_gone_.load();
    auto reply = client.Get(target);
    if (!reply) {
      if (!gone_before && !server_gone_.load()) fail("GET " + target + ": " + reply.error());
      break;
    }
    if (reply->status == 503) {
      auto body = nlohmann::json::parse(reply->body, nullptr, false);
      if (reply->Header("Retry-After").empty() || !body.contains("error")) {
        fail("503 without Retry-After or error body: " + reply->body);
      }
      unavailable_.fetch_add(1);
      continue;
    }
    auto ids = IdsOf(*reply, plain, route.tag);
    if (!ids) {
      fail("GET " + target + ": " + ids.error());
      continue;
    }
    if (static_cast<int>(ids->size()) != count) {
      fail("GET " + target + ": " + std::to_string(ids->size()) + " IDs");
      continue;
    }
    const std::string key = KeyOf(route);
    auto it = last.find(key);
    int64_t previous = it == last.end() ? -1 : it->second;
    for (int64_t id : *ids) {
      if (id < 0) fail("negative ID " + std::to_string(id) + " from " + target);
      if (id <= previous) {
        fail("ID " + std::to_string(id) + " from " + target + " is not above " +
             std::to_string(previous) + " received before on this connection");
      }
      previous = id;
    }
    last[key] = previous;
    std::lock_guard lock(mu_);
    auto& all = ids_[key];
    all.insert(all.end(), ids->begin(), ids->end());
    total_ += static_cast<int64_t>(ids->size());
    max_connections_ = std::max(max_connections_, client.connections_opened());
    cv_.notify_all();
  }
  std::lock_guard lock(mu_);
  --running_;
  cv_.notify_all();
}

}  // namespace kleaf::e2e
