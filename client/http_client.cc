#include "kleaf/http_client.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <deque>
#include <expected>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "base/mutex.h"
#include "client/connection.h"

namespace kleaf {
namespace {

namespace ssl = boost::asio::ssl;
using client::Connection;
using client::Reply;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using Kind = ClientError::Kind;

ClientError Err(Kind kind, std::string message, int status = 0, std::string code = "") {
  return ClientError{kind, std::move(message), status, std::move(code)};
}

// {"error":{"code","message"}} of a 4xx; the raw body if it is not that.
std::pair<std::string, std::string> ErrorOf(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    return {e.value("code", ""), e.value("message", "")};
  }
  return {"", body.substr(0, 200)};
}

[[nodiscard]] ClientResult<std::vector<int64_t>> ParseIds(const std::string& body, int64_t count) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array()) {
    return std::unexpected(Err(Kind::kInternal, "answer without an ids array: " + body.substr(0, 200)));
  }
  std::vector<int64_t> ids;
  ids.reserve(j["ids"].size());
  for (const auto& v : j["ids"]) {
    int64_t id = -1;
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
      if (ec != std::errc() || end != s.data() + s.size()) id = -1;
    } else if (v.is_number_integer()) {
      id = v.get<int64_t>();
    }
    if (id < 0) return std::unexpected(Err(Kind::kInternal, "bad ID in answer: " + v.dump()));
    ids.push_back(id);
  }
  if (static_cast<int64_t>(ids.size()) != count) {
    return std::unexpected(Err(Kind::kInternal, "asked for " + std::to_string(count) + " IDs, got " +
                                                    std::to_string(ids.size())));
  }
  return ids;
}

// The IDs of {"ids":["…",…]} as the gateway wrote them (UUIDv7s, ULIDs), `count` of them.
[[nodiscard]] ClientResult<std::vector<std::string>> ParseTextIds(const std::string& body,
                                                                  int64_t count) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array()) {
    return std::unexpected(
        Err(Kind::kInternal, "answer without an ids array: " + body.substr(0, 200)));
  }
  std::vector<std::string> ids;
  ids.reserve(j["ids"].size());
  for (const auto& v : j["ids"]) {
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
      return std::unexpected(Err(Kind::kInternal, "bad ID in answer: " + v.dump()));
    }
    ids.push_back(v.get<std::string>());
  }
  if (static_cast<int64_t>(ids.size()) != count) {
    return std::unexpected(Err(Kind::kInternal, "asked for " + std::to_string(count) +
                                                    " IDs, got " + std::to_string(ids.size())));
  }
  return ids;
}

bool ValidTag(const std::string& tag) {
  return !tag.empty() && tag.size() <= 128 && std::all_of(tag.begin(), tag.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == ':' ||
           ch == '-';
  });
}

}  // namespace

ClientResult<std::vector<GatewayAddress>> ParseGateways(std::string_view list) {
  std::vector<GatewayAddress> out;
  for (bool more = !list.empty(); more;) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    more = comma != std::string_view::npos;  // "a:1," has an empty last entry
    list = more ? list.substr(comma + 1) : std::string_view();
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    auto bad = [&](const char* why) {
      return std::unexpected(Err(Kind::kInvalidArgument,
                                 "gateway \"" + std::string(item) + "\": " + why));
    };
    if (item.empty()) return bad("empty entry (want host:port)");
    size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad("want host:port");
    std::string_view host = item.substr(0, colon);
    std::string_view port = item.substr(colon + 1);
    if (host.front() == '[') {
      if (host.size() < 3 || host.back() != ']') return bad("bad [IPv6] host");
      host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string_view::npos) {
      return bad("IPv6 addresses go in brackets: [addr]:port");
    }
    int datacenter = -1;
    if (const size_t at = port.find('@'); at != std::string_view::npos) {
      const std::string_view dc = port.substr(at + 1);
      port = port.substr(0, at);
      auto [dc_end, dc_ec] = std::from_chars(dc.data(), dc.data() + dc.size(), datacenter);
      if (dc.empty() || dc_ec != std::errc() || dc_end != dc.data() + dc.size() || datacenter < 0) {
        return bad("want host:port@N with a datacenter N >= 0");
      }
    }
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return bad("port must be 1..65535");
    }
    out.push_back({std::string(host), static_cast<uint16_t>(value), datacenter});
  }
  if (out.empty()) return std::unexpected(Err(Kind::kInvalidArgument, "no gateway given"));
  return out;
}

std::vector<size_t> GatewayOrder(const std::vector<GatewayAddress>& gateways, int local_datacenter,
                                 size_t preferred, const std::vector<bool>& demoted) {
  const size_t n = gateways.size();
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) order.push_back((preferred + i) % n);
  if (local_datacenter < 0) return order;
  auto tier = [&](size_t g) {
    const bool remote = gateways[g].datacenter != local_datacenter;
    const bool down = g < demoted.size() && demoted[g];
    return (down ? 2 : 0) + (remote ? 1 : 0);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tier(a) < tier(b); });
  return order;
}

struct HttpClient::Impl {
  struct Pool {
    Mutex mu;
    std::vector<std::unique_ptr<Connection>> idle KLEAF_GUARDED_BY(mu);
  };
  struct TagBuffer {
    Mutex mu;  // held while refilling: one fetch per tag at a time
    std::deque<int64_t> ids KLEAF_GUARDED_BY(mu);
  };

  Options options;
  std::shared_ptr<ssl::context> tls;         // options' HTTPS settings; null: plain HTTP
  std::vector<std::unique_ptr<Pool>> pools;  // one per gateway
  std::atomic<size_t> preferred{0};          // the gateway that answered last
  // Per gateway: steady-clock nanoseconds until which it counts as demoted (GatewayOrder), set
  // when it fails with a local datacenter configured.
  std::unique_ptr<std::atomic<int64_t>[]> demoted_until;
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> failovers{0};
  std::atomic<int64_t> connections_opened{0};
  Mutex buffers_mu;
  std::map<std::string, std::shared_ptr<TagBuffer>> buffers KLEAF_GUARDED_BY(buffers_mu);

  // One attempt on gateway `g`: a reused connection that turns out closed is retried once on a
  // fresh one (the server may have closed it while idle).
  std::expected<Reply, std::string> Attempt(size_t g, const std::string& target,
                                            const std::string& body, milliseconds timeout);
  // The body of a 200 answer to GET /api/v1/<path>/<tag>?count=N, trying the gateways in turn.
  ClientResult<std::string> Get(const std::string& path, const std::string& tag, int64_t count) {
    return Ask("/api/v1/" + path + "/" + tag + "?count=" + std::to_string(count), "");
  }
  // The body of a 200 answer to `target` (a POST of `body` if not empty), trying the gateways in
  // turn. Only for requests whose retry can lose a value but never repeat one.
  ClientResult<std::string> Ask(const std::string& target, const std::string& body);
  // The gateways in the order one round of Get tries them (GatewayOrder, with who is demoted now).
  std::vector<size_t> RoundOrder();
  // With a local datacenter configured: gateway `g` failed, so it goes last for failback_after.
  void DemoteAfterFailure(size_t g);
  // `count` IDs in requests of at most max_count_per_request, each answer read by `parse`.
  template <typename Id>
  [[nodiscard]] ClientResult<std::vector<Id>> FetchAs(
      const std::string& path, const std::string& tag, int64_t count,
      ClientResult<std::vector<Id>> (*parse)(const std::string& body, int64_t count));
  [[nodiscard]] ClientResult<std::vector<int64_t>> Fetch(const std::string& path,
                                                         const std::string& tag, int64_t count) {
    return FetchAs<int64_t>(path, tag, count, ParseIds);
  }
  [[nodiscard]] ClientResult<std::vector<std::string>> FetchText(const std::string& path,
                                                                 const std::string& tag,
                                                                 int64_t count) {
    return FetchAs<std::string>(path, tag, count, ParseTextIds);
  }
};

std::expected<Reply, std::string> HttpClient::Impl::Attempt(size_t g, const std::string& target,
                                                            const std::string& body,
                                                            milliseconds timeout) {
  Pool& pool = *pools[g];
  const GatewayAddress& gw = options.gateways[g];
  std::unique_ptr<Connection> c;
  {
    MutexLock lock(pool.mu);
    if (!pool.idle.empty()) {
      c = std::move(pool.idle.back());
      pool.idle.pop_back();
    }
  }
  const auto deadline = SteadyClock::now() + timeout;
  auto left = [&] {
    return std::max(milliseconds(1),
                    std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
  };
  std::expected<Reply, std::string> reply = std::unexpected("not sent");
  for (int pass = 0; pass < 2; ++pass) {
    bool reused = c != nullptr;
    if (!c) {
      c = std::make_unique<Connection>(tls);
      ++connections_opened;
      if (auto r = client::Connect(*c, gw, left()); !r) return std::unexpected(r.error());
    }
    ++requests;
    reply = client::Exchange(*c, gw, target, body, left());
    if (reply || !reused || SteadyClock::now() >= deadline) break;
    c.reset();  // a stale keep-alive connection: try once on a new one
  }
  if (reply && c && c->open) {
    MutexLock lock(pool.mu);
    if (static_cast<int>(pool.idle.size()) < options.max_idle_connections) pool.idle.push_back(std::move(c));
  }
  return reply;
}

namespace {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<size_t> HttpClient::Impl::RoundOrder() {
  const size_t n = options.gateways.size();
  std::vector<bool> demoted(n, false);
  const int64_t asked_ns = SteadyNowNs();
  for (size_t g = 0; g < n; ++g) demoted[g] = demoted_until[g].load() > asked_ns;
  return GatewayOrder(options.gateways, options.local_datacenter, preferred.load(), demoted);
}

void HttpClient::Impl::DemoteAfterFailure(size_t g) {
  if (options.local_datacenter < 0) return;
  demoted_until[g].store(
      SteadyNowNs() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.failback_after).count());
}

ClientResult<std::string> HttpClient::Impl::Ask(const std::string& target,
                                                const std::string& body) {
  const auto deadline = SteadyClock::now() + options.total_timeout;
  std::string last = "no attempt";
  int last_status = 0;
  for (int round = 0;; ++round) {
    for (size_t g : RoundOrder()) {
      auto now = SteadyClock::now();
      if (now >= deadline) break;
      auto timeout = std::min(options.request_timeout,
                              std::chrono::duration_cast<milliseconds>(deadline - now));
      auto reply = Attempt(g, target, body, std::max(timeout, milliseconds(1)));
      const GatewayAddress& gw = options.gateways[g];
      const std::string where = gw.host + ":" + std::to_string(gw.port);
      if (reply && reply->status == 200) {
        preferred.store(g);
        demoted_until[g].store(0);
        return std::move(reply->body);
      }
      if (reply && reply->status >= 400 && reply->status < 500) {
        auto [code, message] = ErrorOf(reply->body);
        return std::unexpected(Err(Kind::kRejected,
                                   where + " answered " + std::to_string(reply->status) + " " +
                                       code + ": " + message,
                                   reply->status, code));
      }
      // An attempt the total deadline cut short (e.g. "resolve: Operation canceled") says less
      // than the full attempt before it: the error reported is the last full attempt's.
      if (timeout >= options.request_timeout || last == "no attempt") {
        last = reply ? where + " answered " + std::to_string(reply->status)
                     : where + ": " + reply.error();
        last_status = reply ? reply->status : 0;
      }
      DemoteAfterFailure(g);
      ++failovers;
    }
    auto now = SteadyClock::now();
    if (now >= deadline) break;
    // Every gateway failed this round: back off a little before going round again.
    auto pause = std::min({milliseconds(50 * (round + 1)), milliseconds(500),
                           std::chrono::duration_cast<milliseconds>(deadline - now)});
    std::this_thread::sleep_for(pause);
  }
  return std::unexpected(Err(Kind::kUnavailable, "no gateway answered (last: " + last + ")", last_status));
}

template <typename Id>
ClientResult<std::vector<Id>> HttpClient::Impl::FetchAs(
    const std::string& path, const std::string& tag, int64_t count,
    ClientResult<std::vector<Id>> (*parse)(const std::string& body, int64_t count)) {
  if (!ValidTag(tag)) {
    return std::unexpected(Err(Kind::kInvalidArgument, "tag: 1-128 characters of [A-Za-z0-9_.:-]"));
  }
  if (count < 1) return std::unexpected(Err(Kind::kInvalidArgument, "count must be >= 1"));
  std::vector<Id> out;
  out.reserve(static_cast<size_t>(count));
  while (static_cast<int64_t>(out.size()) < count) {
    int64_t chunk = std::min(count - static_cast<int64_t>(out.size()), options.max_count_per_request);
    auto body = Get(path, tag, chunk);
    if (!body) return std::unexpected(body.error());
    auto ids = parse(*body, chunk);
    if (!ids) return std::unexpected(ids.error());
    out.insert(out.end(), std::make_move_iterator(ids->begin()),
               std::make_move_iterator(ids->end()));
  }
  return out;
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

ClientResult<std::unique_ptr<HttpClient>> HttpClient::Create(Options options) {
  if (options.gateways.empty()) return std::unexpected(Err(Kind::kInvalidArgument, "no gateway given"));
  if (options.request_timeout.count() <= 0 || options.total_timeout.count() <= 0) {
    return std::unexpected(Err(Kind::kInvalidArgument, "timeouts must be positive"));
  }
  if (options.buffer_size < 0 || options.max_count_per_request < 1 ||
      options.buffer_size > options.max_count_per_request || options.max_idle_connections < 0) {
    return std::unexpected(Err(Kind::kInvalidArgument,
                               "buffer_size must be in [0, max_count_per_request], "
                               "max_count_per_request >= 1, max_idle_connections >= 0"));
  }
  if (options.failback_after.count() < 0) {
    return std::unexpected(Err(Kind::kInvalidArgument, "failback_after must not be negative"));
  }
  if (options.local_datacenter >= 0 &&
      std::none_of(options.gateways.begin(), options.gateways.end(), [&](const GatewayAddress& g) {
        return g.datacenter == options.local_datacenter;
      })) {
    return std::unexpected(
        Err(Kind::kInvalidArgument, "local_datacenter " + std::to_string(options.local_datacenter) +
                                        ": no gateway of that datacenter is listed (host:port@N)"));
  }
  auto tls = client::MakeTlsContext(options);
  if (!tls) return std::unexpected(tls.error());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->tls = std::move(*tls);
  impl->demoted_until = std::make_unique<std::atomic<int64_t>[]>(impl->options.gateways.size());
  for (size_t i = 0; i < impl->options.gateways.size(); ++i) impl->demoted_until[i].store(0);
  for (size_t i = 0; i < impl->options.gateways.size(); ++i) impl->pools.push_back(std::make_unique<Impl::Pool>());
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

ClientResult<int64_t> HttpClient::NextSegment(const std::string& tag) {
  if (impl_->options.buffer_size <= 1) {
    auto ids = impl_->Fetch("segment", tag, 1);
    if (!ids) return std::unexpected(ids.error());
    return ids->front();
  }
  auto ids = Segments(tag, 1);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

ClientResult<std::vector<int64_t>> HttpClient::Segments(const std::string& tag, int64_t count) {
  if (impl_->options.buffer_size <= 1) return impl_->Fetch("segment", tag, count);
  if (!ValidTag(tag)) {
    return std::unexpected(Err(Kind::kInvalidArgument, "tag: 1-128 characters of [A-Za-z0-9_.:-]"));
  }
  if (count < 1) return std::unexpected(Err(Kind::kInvalidArgument, "count must be >= 1"));
  std::shared_ptr<Impl::TagBuffer> buffer;
  {
    MutexLock lock(impl_->buffers_mu);
    auto& slot = impl_->buffers[tag];
    if (!slot) slot = std::make_shared<Impl::TagBuffer>();
    buffer = slot;
  }
  MutexLock lock(buffer->mu);
  std::vector<int64_t> out;
  while (static_cast<int64_t>(out.size()) < count) {
    if (buffer->ids.empty()) {
      int64_t want = count - static_cast<int64_t>(out.size());
      auto ids = impl_->Fetch("segment", tag, std::max<int64_t>(want, impl_->options.buffer_size));
      if (!ids) {
        if (out.empty()) return std::unexpected(ids.error());
        // Hand back what the buffer held rather than lose it.
        buffer->ids.insert(buffer->ids.begin(), out.begin(), out.end());
        return std::unexpected(ids.error());
      }
      buffer->ids.insert(buffer->ids.end(), ids->begin(), ids->end());
    }
    int64_t k = std::min<int64_t>(count - static_cast<int64_t>(out.size()),
                                  static_cast<int64_t>(buffer->ids.size()));
    out.insert(out.end(), buffer->ids.begin(), buffer->ids.begin() + k);
    buffer->ids.erase(buffer->ids.begin(), buffer->ids.begin() + k);
  }
  return out;
}

ClientResult<int64_t> HttpClient::NextSnowflake(const std::string& tag) {
  auto ids = impl_->Fetch("snowflake", tag, 1);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

ClientResult<std::vector<int64_t>> HttpClient::Snowflakes(const std::string& tag, int64_t count) {
  return impl_->Fetch("snowflake", tag, count);
}

ClientResult<std::string> HttpClient::NextUuid7(const std::string& tag) {
  auto ids = impl_->FetchText("uuid7", tag, 1);
  if (!ids) return std::unexpected(ids.error());
  return std::move(ids->front());
}

ClientResult<std::vector<std::string>> HttpClient::Uuid7s(const std::string& tag, int64_t count) {
  return impl_->FetchText("uuid7", tag, count);
}

ClientResult<std::string> HttpClient::NextUlid(const std::string& tag) {
  auto ids = impl_->FetchText("ulid", tag, 1);
  if (!ids) return std::unexpected(ids.error());
  return std::move(ids->front());
}

ClientResult<std::vector<std::string>> HttpClient::Ulids(const std::string& tag, int64_t count) {
  return impl_->FetchText("ulid", tag, count);
}

namespace {

[[nodiscard]] ClientResult<void> CheckSpace(const std::string& space) {
  if (ValidTag(space)) return {};
  return std::unexpected(Err(Kind::kInvalidArgument, "space: 1-128 characters of [A-Za-z0-9_.:-]"));
}

// The "seq" of {"space","key","seq"}, a decimal string.
[[nodiscard]] ClientResult<uint64_t> ParseSeq(const nlohmann::json& j) {
  uint64_t seq = 0;
  if (j.is_object() && j.contains("seq") && j["seq"].is_string()) {
    const auto& text = j["seq"].get_ref<const std::string&>();
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
    if (!text.empty() && ec == std::errc() && ptr == text.data() + text.size()) return seq;
  }
  return std::unexpected(Err(Kind::kInternal, "answer without a seq: " + j.dump().substr(0, 200)));
}

// The seq a GET of /api/v1/seq/<space><rest> answers.
[[nodiscard]] ClientResult<uint64_t> GetSeq(HttpClient::Impl& impl, const std::string& space,
                                            const std::string& rest) {
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  auto body = impl.Ask("/api/v1/seq/" + space + rest, "");
  if (!body) return std::unexpected(body.error());
  return ParseSeq(nlohmann::json::parse(*body, nullptr, false));
}

}  // namespace

ClientResult<uint64_t> HttpClient::NextSeq(const std::string& space, uint64_t key) {
  return GetSeq(*impl_, space, "/" + std::to_string(key));
}

ClientResult<uint64_t> HttpClient::NextSpaceSeq(const std::string& space) {
  return GetSeq(*impl_, space, "");
}

ClientResult<uint64_t> HttpClient::CurrentSeq(const std::string& space, uint64_t key) {
  return GetSeq(*impl_, space, "/" + std::to_string(key) + "/current");
}

ClientResult<std::vector<uint64_t>> HttpClient::NextSeqs(const std::string& space,
                                                         const std::vector<uint64_t>& keys) {
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  std::vector<uint64_t> out;
  out.reserve(keys.size());
  for (size_t from = 0; from < keys.size(); from += kMaxSeqKeysPerRequest) {
    const size_t to = std::min(keys.size(), from + kMaxSeqKeysPerRequest);
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = from; i < to; ++i) list.push_back(std::to_string(keys[i]));
    auto body = impl_->Ask("/api/v1/seq/" + space, nlohmann::json{{"keys", list}}.dump());
    if (!body) return std::unexpected(body.error());
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (!j.is_object() || !j.contains("seqs") || !j["seqs"].is_array() ||
        j["seqs"].size() != to - from) {
      return std::unexpected(
          Err(Kind::kInternal, "answer without one seq per key: " + body->substr(0, 200)));
    }
    for (const auto& entry : j["seqs"]) {
      auto seq = ParseSeq(entry);
      if (!seq) return std::unexpected(seq.error());
      out.push_back(*seq);
    }
  }
  return out;
}

HttpClient::Stats HttpClient::stats() const {
  return Stats{impl_->requests.load(), impl_->failovers.load(), impl_->connections_opened.load()};
}

}  // namespace kleaf
