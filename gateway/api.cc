#include "gateway/api.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/tag.h"
#include "gateway/leaf_views.h"
#include "http/ops_routes.h"

namespace kleaf::gateway {

using http::ErrorResponse;
using http::HttpRequest;
using http::HttpResponse;
using http::MethodNotAllowed;
using http::ReadyCheck;
using http::Respond;

namespace {

using nlohmann::json;

// The segments of a path ("/api/v1/x" -> "api", "v1", "x"), without allocating (this runs twice per
// request). A path of more than kMaxParts segments keeps the rest in the last one: no route has
// that many, so it still matches none.
class PathParts {
 public:
  explicit PathParts(std::string_view path) {
    if (!path.empty() && path.front() == '/') path.remove_prefix(1);
    while (true) {
      auto slash = size_ + 1 < kMaxParts ? path.find('/') : std::string_view::npos;
      parts_[size_++] = path.substr(0, slash);
      if (slash == std::string_view::npos) break;
      path.remove_prefix(slash + 1);
    }
  }
  operator std::span<const std::string_view>() const { return {parts_.data(), size_}; }
  size_t size() const { return size_; }
  std::string_view operator[](size_t i) const { return parts_[i]; }

 private:
  static constexpr size_t kMaxParts = 8;
  std::array<std::string_view, kMaxParts> parts_;
  size_t size_ = 0;
};

// The value of `name` in a query string ("a=1&count=5"), if present.
std::optional<std::string_view> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

[[nodiscard]] Result<int64_t> ParseCount(std::string_view query, int64_t max_batch) {
  auto text = QueryParam(query, "count");
  if (!text) return 1;
  int64_t count = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), count);
  if (text->empty() || ec != std::errc() || ptr != text->data() + text->size() || count < 1 ||
      count > max_batch) {
    return Fail(Code::kInvalidArgument,
                "count: must be an integer between 1 and " + std::to_string(max_batch));
  }
  return count;
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  out.append(buf, ptr);
}

HttpResponse PlainId(int64_t id) {
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  AppendInt(r.body, id);
  return r;
}

// {"tag":"…","ids":["…",…]} built by hand: this is the hot path of batch requests.
template <typename ForEach>
HttpResponse IdList(const std::string& tag, int64_t count, ForEach for_each) {
  HttpResponse r;
  r.body.reserve(32 + tag.size() + static_cast<size_t>(count) * 22);
  r.body += "{\"tag\":\"";
  r.body += tag;  // validated: no characters that need escaping
  r.body += "\",\"ids\":[";
  bool first = true;
  for_each([&](int64_t id) {
    if (!first) r.body += ',';
    first = false;
    r.body += '"';
    AppendInt(r.body, id);
    r.body += '"';
  });
  r.body += "]}";
  return r;
}

// The answer for `ranges` drawn from `buffer`: plain ranges are written as they are (the hot
// path); obfuscated ones go through their tag's permutation first.
[[nodiscard]] Result<HttpResponse> SegmentIds(const SegmentBuffer& buffer, int64_t count,
                                              bool plain, const std::vector<IdRange>& ranges) {
  const bool permuted = std::any_of(ranges.begin(), ranges.end(),
                                    [](const IdRange& r) { return r.format != nullptr; });
  if (permuted) {
    std::vector<int64_t> ids;
    ids.reserve(static_cast<size_t>(count));
    if (auto r = buffer.AppendIds(ranges, ids); !r) return std::unexpected(r.error());
    if (plain) return PlainId(ids.front());
    return IdList(buffer.tag(), count, [&](auto emit) {
      for (int64_t id : ids) emit(id);
    });
  }
  if (plain) return PlainId(ranges.front().start);
  return IdList(buffer.tag(), count, [&](auto emit) {
    for (const auto& range : ranges) {
      for (int64_t id = range.start; id < range.end; ++id) emit(id);
    }
  });
}

// A tag as the admin routes show it. Never id_key: the permutation's secret is served by no API.
json TagJson(const state::TagRecord& r) {
  return json{{"tag", r.tag},
              {"max_id", r.max_id},
              {"step", r.step},
              {"description", r.description},
              {"id_mode", state::IdModeName(r.id_mode)},
              {"update_time", FormatUtcMs(r.update_time_ms)}};
}

// Leaf's get routes are @RequestMapping without a method: Spring serves them for every method but
// OPTIONS, which it answers itself with this Allow list (HEAD comes to kleaf's Api as a GET);
// Tomcat refuses TRACE.
constexpr std::string_view kLeafGetAllow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

HttpResponse JsonResponse(const json& j, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = j.dump();
  return r;
}

[[nodiscard]] Result<allocator::TagUpdate> ParseTagUpdate(const std::string& body) {
  json j;
  try {
    j = json::parse(body.empty() ? "{}" : body);
  } catch (const std::exception&) {
    return Fail(Code::kInvalidArgument,
                "body: expected a JSON object {step, max_id?, description?, id_mode?}");
  }
  if (!j.is_object()) return Fail(Code::kInvalidArgument, "body: expected a JSON object");
  allocator::TagUpdate u;
  for (auto& [key, value] : j.items()) {
    if (key == "step" || key == "max_id") {
      if (!value.is_number_integer()) return Fail(Code::kInvalidArgument, key + ": expected an integer");
      (key == "step" ? u.step : u.max_id) = value.get<int64_t>();
    } else if (key == "description") {
      if (!value.is_string()) return Fail(Code::kInvalidArgument, "description: expected a string");
      u.description = value.get<std::string>();
    } else if (key == "id_mode") {
      if (!value.is_string()) return Fail(Code::kInvalidArgument, "id_mode: expected a string");
      auto mode = state::ParseIdMode(value.get<std::string>());
      if (!mode) return std::unexpected(mode.error());
      u.id_mode = *mode;
    } else {
      return Fail(Code::kInvalidArgument,
                  key + ": unknown field (expected step, max_id, description, id_mode)");
    }
  }
  return u;
}

// A path segment with its %XX escapes decoded ("%2B08%3A00" -> "+08:00"); nullopt for a broken
// escape.
std::optional<std::string> PercentDecoded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    auto [ptr, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (ec != std::errc() || ptr != text.data() + i + 3) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

}  // namespace

Api::Api(ApiOptions options, SegmentCache& segments, snowflake::SnowflakeGenerator& snowflake,
         allocator::Allocator& allocator, WorkerPool& blocking)
    : options_(std::move(options)),
      segments_(segments),
      snowflake_(snowflake),
      allocator_(allocator),
      blocking_(blocking),
      uuid7_layout_(snowflake::Id128Kind::kUuid7, snowflake.layout()),
      ulid_layout_(snowflake::Id128Kind::kUlid, snowflake.layout()) {}

void Api::Handle(HttpRequest request, Respond respond) {
  const std::string_view target = request.target;
  const auto qmark = target.find('?');
  const PathParts parts(target.substr(0, qmark));
  const std::string_view query = qmark == std::string_view::npos ? "" : target.substr(qmark + 1);
  if (parts.size() == 1 && ServeTopLevel(request, parts[0], respond)) return;
  if (parts.size() == 1 && ServeLeafMonitor(request, parts[0], query, respond)) return;
  if (parts.size() < 3 || parts[0] != "api") return NoSuchPath(respond);
  // Leaf-compatible: /api/segment/get/{tag}, /api/snowflake/get/{tag}
  if (parts.size() == 4 && parts[2] == "get" &&
      (parts[1] == "segment" || parts[1] == "snowflake")) {
    return ServeIds(request, parts[1], parts[3], "", /*leaf=*/true, std::move(respond));
  }
  if (parts[1] != "v1") return NoSuchPath(respond);
  ServeV1(request, parts, query, std::move(respond));
}

std::string_view Api::RouteOf(std::string_view target) {
  const PathParts parts(target.substr(0, target.find('?')));
  if (parts.size() == 1) {
    if (parts[0].empty()) return "/";
    // Leaf's monitor routes (ServeLeafMonitor).
    for (std::string_view leaf : {"/cache", "/db", "/decodeSnowflakeId"}) {
      if (leaf.substr(1) == parts[0]) return leaf;
    }
    return http::OpsRouteOf(target);
  }
  if (parts.size() < 3 || parts[0] != "api") return "other";
  if (parts.size() == 4 && parts[2] == "get") {
    if (parts[1] == "segment") return "/api/segment/get/{tag}";
    if (parts[1] == "snowflake") return "/api/snowflake/get/{tag}";
  }
  if (parts[1] != "v1") return "other";
  if (auto time_ordered = TimeOrderedRouteOf(parts); !time_ordered.empty()) return time_ordered;
  const std::string_view route = parts[2];
  if (parts.size() == 5 && route == "snowflake" && parts[3] == "decode") {
    return "/api/v1/snowflake/decode/{id}";
  }
  if (parts.size() == 4 && route == "segment") return "/api/v1/segment/{tag}";
  if (parts.size() == 4 && route == "snowflake") return "/api/v1/snowflake/{tag}";
  if (parts.size() == 3 && route == "status") return "/api/v1/status";
  if (parts.size() == 3 && route == "workers") return "/api/v1/workers";
  if (parts.size() == 3 && route == "tags") return "/api/v1/tags";
  if (parts.size() == 4 && route == "tags") return "/api/v1/tags/{tag}";
  return "other";
}

bool Api::ServeTopLevel(const HttpRequest& request, std::string_view name, const Respond& respond) {
  const http::ReadyChecks readiness = [this] {
    return options_.monitor ? options_.monitor->Readiness() : std::vector<ReadyCheck>{};
  };
  if (http::ServeOpsRoute(name, request.method, readiness, respond)) return true;
  if (!name.empty() || !options_.monitor) return false;
  if (!IsGet(request, respond)) return true;
  HttpResponse page;
  page.content_type = "text/html; charset=utf-8";
  page.body = Monitor::Page();
  page.headers.emplace_back("Cache-Control", "no-cache");
  respond(std::move(page));
  return true;
}

bool Api::ServeLeafMonitor(const HttpRequest& request, std::string_view name,
                           std::string_view query, const Respond& respond) {
  if (name == "decodeSnowflakeId") {
    if (!IsGet(request, respond)) return true;
    auto id = QueryParam(query, "snowflakeId");
    if (!id) {
      Reject(respond, Error{Code::kInvalidArgument, "snowflakeId: required (?snowflakeId=<id>)"});
      return true;
    }
    auto described = snowflake::DecodeToLeafJson(snowflake_.layout(), *id);
    if (!described) {
      Reject(respond, described.error());
      return true;
    }
    HttpResponse r;
    r.body = std::move(*described);
    respond(std::move(r));
    return true;
  }
  if (name == "cache") {
    if (!IsGet(request, respond)) return true;
    HttpResponse r;
    r.body = LeafCacheJson(segments_.Snapshots());
    r.headers.emplace_back("Cache-Control", "no-store");
    respond(std::move(r));
    return true;
  }
  if (name == "db") {
    if (!IsGet(request, respond) || !Admitted(request, respond)) return true;
    allocator_.ListTags([this, respond](Result<std::vector<state::TagRecord>> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      HttpResponse db;
      db.body = LeafDbJson(*r);
      db.headers.emplace_back("Cache-Control", "no-store");
      respond(std::move(db));
    });
    return true;
  }
  return false;
}

void Api::ServeV1(const HttpRequest& request, std::span<const std::string_view> parts,
                  std::string_view query, Respond respond) {
  if (ServeTimeOrdered(request, parts, query, respond)) return;
  const std::string_view route = parts[2];
  if (parts.size() == 5 && route == "snowflake" && parts[3] == "decode") {
    if (!IsGet(request, respond)) return;
    return Decode(std::string(parts[4]), std::move(respond));
  }
  if (parts.size() == 4 && (route == "segment" || route == "snowflake")) {
    return ServeIds(request, route, parts[3], query, /*leaf=*/false, std::move(respond));
  }
  if (parts.size() == 3 && route == "status" && options_.monitor) {
    if (!IsGet(request, respond)) return;
    HttpResponse status;
    status.body = options_.monitor->StatusJson();
    status.headers.emplace_back("Cache-Control", "no-store");
    return respond(std::move(status));
  }
  if (parts.size() == 3 && route == "workers") {
    if (!IsGet(request, respond) || !Admitted(request, respond)) return;
    return Workers(std::move(respond));
  }
  if (route == "tags" && (parts.size() == 3 || parts.size() == 4)) {
    if (!Admitted(request, respond)) return;
    return Tags(request, parts.size() == 4 ? std::string(parts[3]) : std::string(),
                std::move(respond));
  }
  NoSuchPath(respond);
}

void Api::ServeIds(const HttpRequest& request, std::string_view mode, std::string_view tag_text,
                   std::string_view query, bool leaf, Respond respond) {
  if (!(leaf ? IsLeafGetMethod(request, respond) : IsGet(request, respond))) return;
  std::string tag(tag_text);
  if (auto v = ValidateTag(tag); !v) return Reject(respond, v.error());
  auto count = leaf ? Result<int64_t>(1) : ParseCount(query, options_.max_batch);
  if (!count) return Reject(respond, count.error());
  if (mode == "segment") return Segment(tag, *count, leaf, std::move(respond));
  Snowflake(tag, *count, leaf, std::move(respond));
}

bool Api::IsGet(const HttpRequest& request, const Respond& respond) {
  if (request.method == "GET") return true;
  respond(MethodNotAllowed("GET"));
  return false;
}

bool Api::IsLeafGetMethod(const HttpRequest& request, const Respond& respond) {
  const std::string& m = request.method;
  if (m == "GET" || m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE") return true;
  if (m == "OPTIONS") {
    HttpResponse allow;
    allow.content_type = {};
    allow.headers.emplace_back("Allow", kLeafGetAllow);
    respond(std::move(allow));
    return false;
  }
  respond(MethodNotAllowed(std::string(kLeafGetAllow)));
  return false;
}

bool Api::Admitted(const HttpRequest& request, const Respond& respond) const {
  if (Authorized(request.authorization)) return true;
  Reject(respond,
         Error{Code::kUnauthenticated, "admin routes need 'Authorization: Bearer <admin token>'"});
  return false;
}

void Api::Reject(const Respond& respond, const Error& error) const {
  respond(ErrorResponse(error, options_.retry_after_s));
}

void Api::NoSuchPath(const Respond& respond) const {
  Reject(respond, Error{Code::kNotFound, "no such path"});
}

void Api::Segment(const std::string& tag, int64_t count, bool plain, Respond respond) {
  auto buffer = segments_.Get(tag);
  std::vector<IdRange> ranges;
  if (buffer->TryTake(count, ranges) == count) {
    auto answer = SegmentIds(*buffer, count, plain, ranges);
    if (!answer) return Reject(respond, answer.error());
    buffer->CountIssued(count);
    return respond(std::move(*answer));
  }
  // Both segments are empty: wait for the fetch, off the I/O thread, for a bounded time.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.wait_ms);
  int64_t missing = count;
  for (const auto& r : ranges) missing -= r.size();
  blocking_.Post([this, buffer = std::move(buffer), tag, count, missing, plain, deadline,
                  ranges = std::move(ranges), respond = std::move(respond)]() mutable {
    auto more = buffer->Take(missing, deadline);
    if (!more) {
      if (more.error().code == Code::kNotFound) segments_.Forget(tag, buffer.get());
      return respond(ErrorResponse(more.error(), options_.retry_after_s));
    }
    ranges.insert(ranges.end(), more->begin(), more->end());
    auto answer = SegmentIds(*buffer, count, plain, ranges);
    if (!answer) return respond(ErrorResponse(answer.error(), options_.retry_after_s));
    buffer->CountIssued(count);
    respond(std::move(*answer));
  });
}

void Api::Snowflake(const std::string& tag, int64_t count, bool plain, Respond respond) {
  auto issue = [this, tag, count, plain](Respond respond) {
    std::vector<int64_t> ids;
    if (auto r = snowflake_.NextBatch(count, ids); !r) {
      return respond(ErrorResponse(r.error(), options_.retry_after_s));
    }
    SnowflakeIssued(tag).Inc(static_cast<uint64_t>(count));
    if (plain) return respond(PlainId(ids.front()));
    respond(IdList(tag, count, [&](auto emit) {
      for (int64_t id : ids) emit(id);
    }));
  };
  IssueOffTheIoThreadIfLarge(count, std::move(issue), std::move(respond));
}

void Api::IssueOffTheIoThreadIfLarge(int64_t count, std::function<void(Respond)> issue,
                                     Respond respond) {
  constexpr int64_t kInlineLimit = 256;
  if (count <= kInlineLimit) return issue(std::move(respond));
  blocking_.Post([issue = std::move(issue), respond = std::move(respond)]() mutable {
    issue(std::move(respond));
  });
}

void Api::Decode(const std::string& id_text, Respond respond) {
  auto described = snowflake::DecodeToJson(snowflake_.layout(), id_text);
  if (!described) return respond(ErrorResponse(described.error()));
  HttpResponse r;
  r.body = std::move(*described);
  respond(std::move(r));
}

void Api::Tags(const HttpRequest& request, const std::string& tag, Respond respond) {
  auto reply = [this, respond](int status) {
    return [this, respond, status](Result<state::TagRecord> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      respond(JsonResponse(TagJson(*r), status));
    };
  };
  if (tag.empty()) {
    if (request.method != "GET") return respond(MethodNotAllowed("GET"));
    return allocator_.ListTags([this, respond](Result<std::vector<state::TagRecord>> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      json list = json::array();
      for (const auto& t : *r) list.push_back(TagJson(t));
      respond(JsonResponse(json{{"tags", list}}));
    });
  }
  if (auto v = ValidateTag(tag); !v) return respond(ErrorResponse(v.error()));
  if (request.method == "GET") return allocator_.GetTag(tag, reply(200));
  if (request.method == "PUT") {
    auto update = ParseTagUpdate(request.body);
    if (!update) return respond(ErrorResponse(update.error()));
    return allocator_.PutTag(tag, std::move(*update), reply(200));
  }
  if (request.method == "DELETE") {
    return allocator_.DeleteTag(tag, [this, tag, respond](Result<state::TagRecord> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      segments_.Forget(tag);
      respond(JsonResponse(json{{"deleted", TagJson(*r)}}));
    });
  }
  respond(MethodNotAllowed("GET, PUT, DELETE"));
}

void Api::Workers(Respond respond) {
  if (!options_.lease_status) {
    return respond(JsonResponse(json{{"source", "config"}, {"worker_id", snowflake_.worker_id()}}));
  }
  json node = json::parse(options_.lease_status());
  allocator_.WorkerStatus([this, node, respond](Result<allocator::WorkerCounts> r) {
    if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
    respond(JsonResponse(
        json{{"source", "registry"}, {"node", node}, {"leased", r->leased}, {"free", r->free}}));
  });
}

metrics::Counter& Api::Issued(TagSeries& series, const std::string& tag) {
  {
    ReaderMutexLock lock(series.mu);
    if (auto it = series.counters.find(tag); it != series.counters.end()) return *it->second;
    if (series.counters.size() >= kMaxSnowflakeTagSeries) {
      if (auto other = series.counters.find("_other"); other != series.counters.end()) {
        return *other->second;
      }
    }
  }
  WriterMutexLock lock(series.mu);
  const bool own = series.counters.size() < kMaxSnowflakeTagSeries;
  auto& slot = series.counters[own ? tag : std::string("_other")];
  if (slot == nullptr) {
    slot = &metrics::Registry::Default().GetCounter(
        "kleaf_ids_issued_total", "IDs handed to clients, per tag and mode.",
        {{"tag", own ? tag : std::string("_other")}, {"mode", series.mode}});
  }
  return *slot;
}

bool Api::Authorized(const std::string& authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (options_.admin_token.empty() || !authorization.starts_with(kBearer)) return false;
  std::string_view given = std::string_view(authorization).substr(kBearer.size());
  const std::string& want = options_.admin_token;
  // Constant time in the token's content: always walk the whole expected token.
  unsigned diff = given.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    char g = i < given.size() ? given[i] : 0;
    diff |= static_cast<unsigned char>(g ^ want[i]);
  }
  return diff == 0;
}

// --- UUIDv7, ULID and compose (issue 17): the routes of the time-ordered kinds.

std::string_view Api::TimeOrderedRouteOf(std::span<const std::string_view> parts) {
  if (parts.size() < 4 || parts[0] != "api" || parts[1] != "v1") return {};
  const std::string_view route = parts[2];
  if (parts.size() == 5 && parts[3] == "compose") {
    if (route == "snowflake") return "/api/v1/snowflake/compose/{time}";
    if (route == "uuid7") return "/api/v1/uuid7/compose/{time}";
    if (route == "ulid") return "/api/v1/ulid/compose/{time}";
  }
  if (parts.size() == 4 && route == "uuid7") return "/api/v1/uuid7/{tag}";
  if (parts.size() == 4 && route == "ulid") return "/api/v1/ulid/{tag}";
  return {};
}

bool Api::ServeTimeOrdered(const HttpRequest& request, std::span<const std::string_view> parts,
                           std::string_view query, Respond& respond) {
  const std::string_view route = TimeOrderedRouteOf(parts);
  if (route.empty()) return false;
  if (!IsGet(request, respond)) return true;
  if (parts.size() == 5) {
    Compose(parts[2], parts[4], std::move(respond));
    return true;
  }
  std::string tag(parts[3]);
  if (auto v = ValidateTag(tag); !v) {
    Reject(respond, v.error());
    return true;
  }
  auto count = ParseCount(query, options_.max_batch);
  if (!count) {
    Reject(respond, count.error());
    return true;
  }
  Id128s(parts[2] == "uuid7" ? uuid7_layout_ : ulid_layout_, tag, *count, std::move(respond));
  return true;
}

void Api::Id128s(const snowflake::Id128Layout& layout, const std::string& tag, int64_t count,
                 Respond respond) {
  auto issue = [this, &layout, tag, count](Respond respond) {
    std::vector<snowflake::Id128> ids;
    if (auto r = snowflake::NextId128Batch(snowflake_, layout, count, ids); !r) {
      return respond(ErrorResponse(r.error(), options_.retry_after_s));
    }
    Issued(layout.kind() == snowflake::Id128Kind::kUuid7 ? uuid7_issued_ : ulid_issued_, tag)
        .Inc(static_cast<uint64_t>(count));
    HttpResponse r;
    r.body.reserve(32 + tag.size() + static_cast<size_t>(count) * 39);
    r.body += "{\"tag\":\"";
    r.body += tag;  // validated: no characters that need escaping
    r.body += "\",\"ids\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) r.body += ',';
      r.body += '"';
      r.body += layout.Format(ids[i]);
      r.body += '"';
    }
    r.body += "]}";
    respond(std::move(r));
  };
  IssueOffTheIoThreadIfLarge(count, std::move(issue), std::move(respond));
}

void Api::Compose(std::string_view mode, std::string_view time_text, Respond respond) {
  auto text = PercentDecoded(time_text);
  if (!text) {
    return respond(ErrorResponse(Error{Code::kInvalidArgument, "time: a broken %-escape"}));
  }
  auto composed = mode == "snowflake" ? snowflake::ComposeToJson(snowflake_.layout(), *text)
                                      : snowflake::ComposeToJson(
                                            mode == "uuid7" ? uuid7_layout_ : ulid_layout_, *text);
  if (!composed) return respond(ErrorResponse(composed.error()));
  HttpResponse r;
  r.body = std::move(*composed);
  respond(std::move(r));
}

}  // namespace kleaf::gateway
