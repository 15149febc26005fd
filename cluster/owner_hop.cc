#include "cluster/owner_hop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <charconv>
#include <ctime>
#include <utility>

#include "base/clock.h"
#include "cluster/wire.h"
#include "config/config.h"

namespace kleaf::cluster {
namespace {

namespace bhttp = boost::beast::http;
namespace op = allocator::op;

}  // namespace

std::string EncodeOwnerRoute(const OwnerRoute& route) {
  std::string s = std::to_string(route.generation);
  if (!route.address.empty()) s += " " + route.address;
  return s;
}

std::optional<OwnerRoute> DecodeOwnerRoute(std::string_view value) {
  OwnerRoute route;
  const auto [end, ec] =
      std::from_chars(value.data(), value.data() + value.size(), route.generation);
  if (ec != std::errc()) return std::nullopt;
  std::string_view rest(end, value.data() + value.size() - end);
  if (rest.empty()) return route;
  if (rest.front() != ' ' || rest.size() == 1) return std::nullopt;
  route.address = std::string(rest.substr(1));
  if (!config::ParseEndpoint(route.address)) return std::nullopt;
  return route;
}

OwnerRoutes::OwnerRoutes(int32_t partitions)
    : partitions_(static_cast<size_t>(partitions)), seen_(partitions_, 0), routes_(partitions_) {}

bool OwnerRoutes::Note(int32_t p, const OwnerRoute& route) {
  if (p < 0 || static_cast<size_t>(p) >= partitions_ || route.generation == 0) return true;
  MutexLock lock(mu_);
  const auto i = static_cast<size_t>(p);
  if (route.generation < seen_[i]) return false;
  seen_[i] = route.generation;
  if (route.generation >= routes_[i].generation) routes_[i] = route;
  return true;
}

std::optional<OwnerRoute> OwnerRoutes::RouteOf(int32_t p) const {
  if (p < 0 || static_cast<size_t>(p) >= partitions_) return std::nullopt;
  MutexLock lock(mu_);
  const OwnerRoute& r = routes_[static_cast<size_t>(p)];
  if (r.address.empty()) return std::nullopt;
  return r;
}

void OwnerRoutes::Forget(int32_t p, const OwnerRoute& route) {
  if (p < 0 || static_cast<size_t>(p) >= partitions_) return;
  MutexLock lock(mu_);
  OwnerRoute& r = routes_[static_cast<size_t>(p)];
  if (r == route) r.address.clear();
}

int64_t RawClockNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void OwnerClockRates::Note(const std::string& owner, int64_t owner_raw_ns, int64_t sent_ns,
                           int64_t received_ns) {
  if (received_ns < sent_ns) return;
  const int64_t here = sent_ns + (received_ns - sent_ns) / 2;
  const int64_t half = (received_ns - sent_ns) / 2;
  MutexLock lock(mu_);
  auto [it, fresh] = owners_.try_emplace(owner);
  Owner& o = it->second;
  // The first sample, or an owner whose clock went back (another machine at that address, or two
  // answers noted out of order by concurrent requests): a new window starts here.
  if (fresh || owner_raw_ns <= o.owner_ns) {
    o.owner_ns = owner_raw_ns;
    o.here_ns = here;
    o.half_ns = half;
    return;
  }
  const int64_t span = here - o.here_ns;
  if (span < window_ns_) return;
  Estimate e;
  e.ppm = (static_cast<double>(owner_raw_ns - o.owner_ns) / static_cast<double>(span) - 1.0) * 1e6;
  e.error_ppm = static_cast<double>(o.half_ns + half) / static_cast<double>(span) * 1e6;
  o.last = e;
  if (o.rate == nullptr) {  // exported from the first estimate on
    auto& registry = metrics::Registry::Default();
    o.rate = &registry.GetGauge(
        "kleaf_sequence_owner_clock_rate_ppm",
        "The owner's clock rate relative to this gateway's, less 1, in ppm (CLOCK_MONOTONIC_RAW "
        "readings on owner-hop answers, over windows of 60 s or more): A1's check across nodes.",
        {{"owner", owner}});
    o.error = &registry.GetGauge(
        "kleaf_sequence_owner_clock_rate_error_ppm",
        "The bound on the error of kleaf_sequence_owner_clock_rate_ppm (half a round trip at each "
        "end of its window, over the window), in ppm.",
        {{"owner", owner}});
  }
  o.rate->Set(e.ppm);
  o.error->Set(e.error_ppm);
  o.owner_ns = owner_raw_ns;
  o.here_ns = here;
  o.half_ns = half;
}

std::optional<OwnerClockRates::Estimate> OwnerClockRates::Of(const std::string& owner) const {
  MutexLock lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end()) return std::nullopt;
  return it->second.last;
}

OwnerHopCaller::OwnerHopCaller(PartitionCaller& requests_topic, OwnerRoutes& routes,
                               OwnerHopOptions options)
    : requests_topic_(requests_topic),
      routes_(routes),
      options_(std::move(options)),
      per_owner_(options_.per_owner > 0 ? options_.per_owner : std::max(1, options_.workers / 2)),
      rates_(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.rate_window).count()) {
  auto& registry = metrics::Registry::Default();
  const std::string calls_help =
      "Sequence calls a gateway sent to an owner over the owner hop, by outcome: answered; "
      "refused (not the owner, or no lease: sent again through the requests topic); failed "
      "(transport: sent again through the requests topic); older_generation (an answer of an "
      "older lease generation than one seen, dropped and sent again through the requests topic).";
  answered_ =
      &registry.GetCounter("kleaf_owner_hop_calls_total", calls_help, {{"outcome", "answered"}});
  refused_ =
      &registry.GetCounter("kleaf_owner_hop_calls_total", calls_help, {{"outcome", "refused"}});
  failed_ =
      &registry.GetCounter("kleaf_owner_hop_calls_total", calls_help, {{"outcome", "failed"}});
  older_ = &registry.GetCounter("kleaf_owner_hop_calls_total", calls_help,
                                {{"outcome", "older_generation"}});
  requests_ = &registry.GetCounter(
      "kleaf_owner_hop_requests_total",
      "Requests a gateway sent over the owner hop; each carries every call queued for its owner.");
  latency_ = &registry.GetHistogram(
      "kleaf_owner_hop_seconds",
      "Round trip of a request over the owner hop (the calls of one owner queued together).");
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { Work(); });
}

OwnerHopCaller::~OwnerHopCaller() { Stop(); }

void OwnerHopCaller::Stop() {
  {
    MutexLock lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.NotifyAll();
  for (auto& t : workers_) t.join();
  std::deque<Job> left;
  {
    MutexLock lock(mu_);
    left.swap(queue_);
    idle_.clear();
  }
  for (auto& job : left) job.done(Fail(Code::kUnavailable, "the owner hop is stopping"));
}

void OwnerHopCaller::Call(int32_t partition, std::string route_key, op::NextSeq next,
                          allocator::Callback<std::vector<uint64_t>> done) {
  Hop(partition, std::move(route_key), std::move(next), std::move(done));
}

void OwnerHopCaller::Call(int32_t partition, std::string route_key, op::CurrentSeq current,
                          allocator::Callback<uint64_t> done) {
  Hop(partition, std::move(route_key), std::move(current), std::move(done));
}

template <typename Op>
void OwnerHopCaller::Hop(int32_t partition, std::string route_key, Op op,
                         allocator::Callback<typename Op::Result> done) {
  auto route = routes_.RouteOf(partition);
  if (!route) {
    return requests_topic_.Call(partition, std::move(route_key), std::move(op), std::move(done));
  }
  Job job{*route, {partition, wire::EncodeRequest(wire::Envelope{op, options_.partitions})}, {}};
  job.done = [this, partition, route = *route, route_key = std::move(route_key), op = std::move(op),
              done = std::move(done)](Result<wire::HopReply> r) mutable {
    // Through the requests topic instead: it reaches whoever owns the partition now, and its
    // answer names that owner's route.
    const auto resend = [&](metrics::Counter* outcome, const std::string& why) {
      outcome->Inc();
      routes_.Forget(partition, route);
      spdlog::debug("[owner-hop] partition {} at {}: {}; sent through the requests topic",
                    partition, route.address, why);
      requests_topic_.Call(partition, std::move(route_key), std::move(op), std::move(done));
    };
    if (!r) return resend(failed_, r.error().message);
    auto answer = wire::DecodeReply<typename Op::Result>(r->body);
    if (!answer && answer.error().code == Code::kUnavailable) {
      return resend(refused_, answer.error().message);
    }
    if (!routes_.Note(partition, OwnerRoute{r->generation, route.address})) {
      return resend(older_, "an answer of lease generation " + std::to_string(r->generation) +
                                ", older than one seen (dropped)");
    }
    answered_->Inc();
    done(std::move(answer));
  };
  {
    MutexLock lock(mu_);
    if (!stop_) {
      queue_.push_back(std::move(job));
      wake_.NotifyOne();
      return;
    }
  }
  job.done(Fail(Code::kUnavailable, "the owner hop is stopping"));
}

std::deque<OwnerHopCaller::Job>::iterator OwnerHopCaller::NextSendable() {
  for (auto job = queue_.begin(); job != queue_.end(); ++job) {
    auto it = in_flight_.find(job->route.address);
    if (it == in_flight_.end() || it->second < per_owner_) return job;
  }
  return queue_.end();
}

void OwnerHopCaller::Work() {
  while (true) {
    std::vector<Job> jobs;
    std::string address;
    {
      MutexLock lock(mu_);
      wake_.Wait(lock,
                 [this]() KLEAF_REQUIRES(mu_) { return stop_ || NextSendable() != queue_.end(); });
      if (stop_) return;
      auto first = NextSendable();
      address = first->route.address;
      jobs.push_back(std::move(*first));
      queue_.erase(first);
      // Every other call queued for the same owner goes in the same request.
      for (auto it = queue_.begin(); it != queue_.end() && jobs.size() < wire::kMaxHopCalls;) {
        if (it->route.address == address) {
          jobs.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      ++in_flight_[address];
    }
    const auto started = std::chrono::steady_clock::now();
    requests_->Inc();
    auto replies = Exchange(jobs);
    if (replies) {
      latency_->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    bool more_for_owner = false;
    std::vector<Job> failed_too;
    {
      MutexLock lock(mu_);
      if (--in_flight_[address] == 0) in_flight_.erase(address);
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->route.address != address) {
          ++it;
        } else if (replies) {
          more_for_owner = true;
          break;
        } else {
          // The owner did not answer: its other queued calls go through the requests topic now
          // rather than each waiting its turn to fail the same way.
          failed_too.push_back(std::move(*it));
          it = queue_.erase(it);
        }
      }
    }
    // Calls that waited for this owner's turn may go now (to a worker asleep, if this one takes
    // another owner's next).
    if (more_for_owner) wake_.NotifyOne();
    // This request's calls first (they waited longest), then those drained after it.
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (replies) {
        jobs[i].done(std::move((*replies)[i]));
      } else {
        jobs[i].done(std::unexpected(replies.error()));
      }
    }
    for (auto& job : failed_too) job.done(std::unexpected(replies.error()));
  }
}

Result<std::vector<wire::HopReply>> OwnerHopCaller::Exchange(const std::vector<Job>& jobs) {
  const std::string& address = jobs.front().route.address;
  const bool one = jobs.size() == 1;
  http::ClientRequest request{
      bhttp::verb::post,
      one ? "/internal/v1/seq/" + std::to_string(jobs.front().call.partition) : "/internal/v1/seq",
      11};
  request.set(bhttp::field::host, address);
  request.keep_alive(true);
  if (one) {
    request.set(bhttp::field::content_type, "application/json");
    request.body() = jobs.front().call.request;
  } else {
    std::vector<wire::HopCall> calls;
    calls.reserve(jobs.size());
    for (const auto& job : jobs) calls.push_back(job.call);
    request.body() = wire::EncodeHopCalls(calls);
  }
  request.prepare_payload();
  const int64_t sent_ns = RawClockNs();
  auto response = Send(address, request);
  if (!response) return std::unexpected(response.error());
  NoteRawClock(address, *response, sent_ns, RawClockNs());
  if (one) {
    wire::HopReply reply{static_cast<int>(response->result_int()), std::move(response->body()), 0};
    if (auto g = response->find("Kleaf-Generation"); g != response->end()) {
      const auto v = g->value();
      std::from_chars(v.data(), v.data() + v.size(), reply.generation);
    }
    return std::vector<wire::HopReply>{std::move(reply)};
  }
  if (response->result_int() != 200) {
    return Fail(Code::kUnavailable, "the owner answered " + std::to_string(response->result_int()) +
                                        " to a request of " + std::to_string(jobs.size()) +
                                        " calls: " + response->body());
  }
  auto replies = wire::DecodeHopReplies(response->body());
  if (!replies) return std::unexpected(replies.error());
  if (replies->size() != jobs.size()) {
    return Fail(Code::kUnavailable, "the owner answered " + std::to_string(replies->size()) +
                                        " of " + std::to_string(jobs.size()) + " calls");
  }
  return replies;
}

void OwnerHopCaller::NoteRawClock(const std::string& address, const http::ClientResponse& response,
                                  int64_t sent_ns, int64_t received_ns) {
  auto h = response.find(kRawClockHeader);
  if (h == response.end()) return;  // an owner of an earlier version
  const auto v = h->value();
  int64_t owner_ns = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), owner_ns);
  if (ec != std::errc() || end != v.data() + v.size()) return;
  rates_.Note(address, owner_ns, sent_ns, received_ns);
}

Result<http::ClientResponse> OwnerHopCaller::Send(const std::string& address,
                                                  const http::ClientRequest& request) {
  auto hp = config::ParseEndpoint(address);
  if (!hp) return std::unexpected(hp.error());
  const auto& [host, port] = *hp;
  // A kept-alive connection the owner closed meanwhile fails its next exchange at once: one more
  // try on a new connection. (A call the owner answered whose answer was lost leaves a gap, never
  // a value twice: the next call's values are above it.)
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<http::ClientConnection> c;
    {
      MutexLock lock(mu_);
      if (auto it = idle_.find(address); it != idle_.end() && !it->second.empty()) {
        c = std::move(it->second.back());
        it->second.pop_back();
      }
    }
    const bool reused = c != nullptr;
    if (!c) {
      c = std::make_unique<http::ClientConnection>(options_.tls);
      if (auto open = http::OpenWithin(*c, host, port, options_.check_name, options_.timeout);
          !open) {
        return std::unexpected(open.error());
      }
    }
    const auto started = std::chrono::steady_clock::now();
    auto answer = http::ExchangeWithin(*c, request, options_.timeout);
    // Closed meanwhile fails at once; a slow owner's failure is not tried again.
    if (!answer && reused && std::chrono::steady_clock::now() - started < options_.timeout / 2) {
      continue;
    }
    if (answer && c->open) {
      MutexLock lock(mu_);
      auto& pool = idle_[address];
      if (pool.size() < static_cast<size_t>(options_.workers)) pool.push_back(std::move(c));
    }
    return answer;
  }
  return Fail(Code::kUnavailable, "no connection to " + address);
}

}  // namespace kleaf::cluster
