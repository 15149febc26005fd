#include "gateway/api.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "base/tag.h"
#include "gateway/leaf_views.h"
#include "gateway/seq_json.h"

namespace kleaf::gateway {

using http::ErrorResponse;
using http::HttpRequest;
using http::HttpResponse;
using http::MethodNotAllowed;
using http::ReadyCheck;
using http::Respond;
namespace op = allocator::op;

namespace {

using nlohmann::json;

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
  (void)ec;  // 24 chars hold every 64-bit value: to_chars cannot fail here
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

json SpaceJson(const state::SpaceRecord& r) {
  return json{{"space", r.space},
              {"section_size", r.section_size},
              {"step", r.step},
              {"description", r.description},
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

[[nodiscard]] Result<allocator::SpaceUpdate> ParseSpaceUpdate(const std::string& body) {
  json j = json::parse(body.empty() ? "{}" : body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Fail(Code::kInvalidArgument,
                "body: expected a JSON object {section_size?, step?, description?}");
  }
  allocator::SpaceUpdate u;
  for (auto& [key, value] : j.items()) {
    if (key == "section_size" || key == "step") {
      if (!value.is_number_integer())
        return Fail(Code::kInvalidArgument, key + ": expected an integer");
      (key == "step" ? u.step : u.section_size) = value.get<int64_t>();
    } else if (key == "description") {
      if (!value.is_string()) return Fail(Code::kInvalidArgument, "description: expected a string");
      u.description = value.get<std::string>();
    } else {
      return Fail(Code::kInvalidArgument,
                  key + ": unknown field (expected section_size, step, description)");
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

// {"id","time",...}: what a snowflake ID holds (DecodeToJson).
HttpResponse Decoded(const snowflake::SnowflakeLayout& layout, std::string_view id_text) {
  auto described = snowflake::DecodeToJson(layout, id_text);
  if (!described) return ErrorResponse(described.error());
  HttpResponse r;
  r.body = std::move(*described);
  return r;
}

// {"id"}: the smallest ID of `layout` (snowflake, UUIDv7 or ULID) at a time given as a path
// segment, %-escapes and all.
template <typename Layout>
HttpResponse Composed(const Layout& layout, std::string_view time_text) {
  auto text = PercentDecoded(time_text);
  if (!text) return ErrorResponse(Error{Code::kInvalidArgument, "time: a broken %-escape"});
  auto composed = snowflake::ComposeToJson(layout, *text);
  if (!composed) return ErrorResponse(composed.error());
  HttpResponse r;
  r.body = std::move(*composed);
  return r;
}

// This node's lease as /api/v1/workers shows it: {"worker_id","valid_for_ms","last_error"}, the
// last error as "renewal failed" or "".
json LeaseJson(const snowflake::WorkerLease::Status& lease) {
  return json{{"worker_id", lease.worker_id},
              {"valid_for_ms", lease.valid_for_ms},
              {"last_error", lease.last_error.empty() ? "" : "renewal failed"}};
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

// The routes, each declared once: dispatch (Handle), the metric label (RouteOf) and the list of
// labels (RouteLabels) come from here. The order does not matter: no path matches two patterns.
struct Api::Routes {
  using enum Methods;
  using enum Gate;
  static constexpr Route<Handler> kTable[] = {
      // Operator routes; "/" is the monitoring page.
      {"/", kGet, kMonitor, &Api::ServePage},
      {"/metrics", kGet, kOpen, &Api::ServeMetrics},
      {"/healthz", kGet, kOpen, &Api::ServeHealth},
      {"/readyz", kGet, kOpen, &Api::ServeReady},
      {"/api/v1/status", kGet, kMonitor, &Api::ServeStatus},
      // Leaf's routes (docs/migrating-from-leaf.md).
      {"/api/segment/get/{tag}", kLeafGet, kOpen, &Api::ServeLeafSegmentId},
      {"/api/snowflake/get/{tag}", kLeafGet, kOpen, &Api::ServeLeafSnowflakeId},
      {"/cache", kGet, kOpen, &Api::ServeCache},
      {"/db", kGet, kAdminToken, &Api::ServeDb},
      {"/decodeSnowflakeId", kGet, kOpen, &Api::ServeLeafDecode},
      // IDs.
      {"/api/v1/segment/{tag}", kGet, kOpen, &Api::ServeSegmentIds},
      {"/api/v1/snowflake/{tag}", kGet, kOpen, &Api::ServeSnowflakeIds},
      {"/api/v1/uuid7/{tag}", kGet, kOpen, &Api::ServeUuid7s},
      {"/api/v1/ulid/{tag}", kGet, kOpen, &Api::ServeUlids},
      {"/api/v1/snowflake/decode/{id}", kGet, kOpen, &Api::ServeDecode},
      {"/api/v1/snowflake/compose/{time}", kGet, kOpen, &Api::ServeSnowflakeCompose},
      {"/api/v1/uuid7/compose/{time}", kGet, kOpen, &Api::ServeUuid7Compose},
      {"/api/v1/ulid/compose/{time}", kGet, kOpen, &Api::ServeUlidCompose},
      // Admin.
      {"/api/v1/workers", kGet, kAdminToken, &Api::ServeWorkers},
      {"/api/v1/backup", kAny, kAdminToken, &Api::ServeBackup},
      {"/api/v1/tags", kAny, kAdminToken, &Api::ServeTags},
      {"/api/v1/tags/{tag}", kAny, kAdminToken, &Api::ServeTags},
      {"/api/v1/spaces", kAny, kAdminToken, &Api::ServeSpaces},
      {"/api/v1/spaces/{space}", kAny, kAdminToken, &Api::ServeSpaces},
      // Sequences.
      {"/api/v1/seq/{space}", kAny, kOpen, &Api::ServeSpaceSeq},
      {"/api/v1/seq/{space}/{key}", kGet, kOpen, &Api::ServeKeySeq},
      {"/api/v1/seq/{space}/{key}/current", kGet, kOpen, &Api::ServeCurrentSeq},
  };
  static constexpr RouteIndex kIndex{kTable};
  static_assert(kIndex.Valid(),
                "a route pattern is malformed or overlaps another (see RouteIndex::Valid)");
};

void Api::Handle(HttpRequest request, Respond respond) {
  const std::string_view target = request.target;
  const auto qmark = target.find('?');
  const auto match = Routes::kIndex.Find(target.substr(0, qmark));
  if (match.route == nullptr) return NoSuchPath(respond);
  const Route<Handler>& route = *match.route;
  if (route.gate == Gate::kMonitor && options_.monitor == nullptr) return NoSuchPath(respond);
  if (!MethodTaken(route.methods, request, respond)) return;
  if (route.gate == Gate::kAdminToken && !Admitted(request, respond)) return;
  const std::string_view query = qmark == std::string_view::npos ? "" : target.substr(qmark + 1);
  (this->*route.handler)(
      Call{request, match.params.first, match.params.second, query, std::move(respond)});
}

std::string_view Api::RouteOf(std::string_view target) {
  const auto match = Routes::kIndex.Find(target.substr(0, target.find('?')));
  return match.route != nullptr ? match.route->pattern : kNoRoute;
}

std::span<const std::string_view> Api::RouteLabels() { return Routes::kIndex.labels(); }

bool Api::MethodTaken(Methods methods, const HttpRequest& request, const Respond& respond) {
  switch (methods) {
    case Methods::kGet:
      return IsGet(request, respond);
    case Methods::kLeafGet:
      return IsLeafGetMethod(request, respond);
    case Methods::kAny:
      return true;
  }
  return true;
}

// --- The routes' handlers, in the table's order.

void Api::ServePage(Call call) {
  HttpResponse page;
  page.content_type = "text/html; charset=utf-8";
  page.body = Monitor::Page();
  page.headers.emplace_back("Cache-Control", "no-cache");
  call.respond(std::move(page));
}

void Api::ServeMetrics(Call call) { call.respond(http::MetricsResponse()); }

void Api::ServeHealth(Call call) { call.respond(http::HealthResponse()); }

void Api::ServeReady(Call call) {
  call.respond(http::ReadyResponse(options_.monitor ? options_.monitor->Readiness()
                                                    : std::vector<ReadyCheck>{}));
}

void Api::ServeStatus(Call call) {
  HttpResponse status;
  status.body = options_.monitor->StatusJson();
  status.headers.emplace_back("Cache-Control", "no-store");
  call.respond(std::move(status));
}

void Api::ServeLeafSegmentId(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/true)) {
    Segment(asked->tag, asked->count, /*plain=*/true, std::move(call.respond));
  }
}

void Api::ServeLeafSnowflakeId(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/true)) {
    Snowflake(asked->tag, asked->count, /*plain=*/true, std::move(call.respond));
  }
}

void Api::ServeCache(Call call) {
  HttpResponse r;
  r.body = LeafCacheJson(segments_.Snapshots());
  r.headers.emplace_back("Cache-Control", "no-store");
  call.respond(std::move(r));
}

void Api::ServeDb(Call call) {
  allocator_.Run(op::ListTags{}, [this, respond = std::move(call.respond)](
                                     Result<std::vector<state::TagRecord>> r) {
    if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
    HttpResponse db;
    db.body = LeafDbJson(*r);
    db.headers.emplace_back("Cache-Control", "no-store");
    respond(std::move(db));
  });
}

void Api::ServeLeafDecode(Call call) {
  auto id = QueryParam(call.query, "snowflakeId");
  if (!id) {
    return Reject(call.respond,
                  Error{Code::kInvalidArgument, "snowflakeId: required (?snowflakeId=<id>)"});
  }
  auto described = snowflake::DecodeToLeafJson(snowflake_.layout(), *id);
  if (!described) return Reject(call.respond, described.error());
  HttpResponse r;
  r.body = std::move(*described);
  call.respond(std::move(r));
}

void Api::ServeSegmentIds(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/false)) {
    Segment(asked->tag, asked->count, /*plain=*/false, std::move(call.respond));
  }
}

void Api::ServeSnowflakeIds(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/false)) {
    Snowflake(asked->tag, asked->count, /*plain=*/false, std::move(call.respond));
  }
}

void Api::ServeUuid7s(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/false)) {
    Id128s(uuid7_layout_, asked->tag, asked->count, std::move(call.respond));
  }
}

void Api::ServeUlids(Call call) {
  if (auto asked = AskedIds(call, /*leaf=*/false)) {
    Id128s(ulid_layout_, asked->tag, asked->count, std::move(call.respond));
  }
}

void Api::ServeDecode(Call call) { call.respond(Decoded(snowflake_.layout(), call.param)); }

void Api::ServeSnowflakeCompose(Call call) {
  call.respond(Composed(snowflake_.layout(), call.param));
}

void Api::ServeUuid7Compose(Call call) { call.respond(Composed(uuid7_layout_, call.param)); }

void Api::ServeUlidCompose(Call call) { call.respond(Composed(ulid_layout_, call.param)); }

void Api::ServeWorkers(Call call) {
  if (!options_.lease_status) {
    return call.respond(
        JsonResponse(json{{"source", "config"}, {"worker_id", snowflake_.worker_id()}}));
  }
  json node = LeaseJson(options_.lease_status());
  allocator_.Run(op::WorkerStatus{}, [this, node = std::move(node),
                                      respond = std::move(call.respond)](
                                         Result<allocator::WorkerCounts> r) {
    if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
    respond(JsonResponse(
        json{{"source", "registry"}, {"node", node}, {"leased", r->leased}, {"free", r->free}}));
  });
}

void Api::ServeBackup(Call call) {
  if (call.request.method != "POST") return call.respond(MethodNotAllowed("POST"));
  if (!options_.backup) {
    return call.respond(ErrorResponse(
        Error{Code::kUnimplemented,
              "backup: only a standalone node backs up its state; a cluster's state is in Kafka "
              "(kleaf state export)"}));
  }
  json j = json::parse(call.request.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("dir") || !j["dir"].is_string() || j.size() != 1) {
    return call.respond(
        ErrorResponse(Error{Code::kInvalidArgument, "body: expected a JSON object {\"dir\"}"}));
  }
  std::string dir = j["dir"].get<std::string>();
  // A checkpoint flushes and copies files: not on the I/O thread.
  blocking_.Post([this, dir = std::move(dir), respond = std::move(call.respond)] {
    auto done = options_.backup(dir);
    if (!done) return respond(ErrorResponse(done.error(), options_.retry_after_s));
    respond(JsonResponse(json{{"backup", dir}}));
  });
}

void Api::ServeTags(Call call) {
  const HttpRequest& request = call.request;
  Respond respond = std::move(call.respond);
  auto reply = [this, respond](int status) {
    return [this, respond, status](Result<state::TagRecord> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      respond(JsonResponse(TagJson(*r), status));
    };
  };
  if (call.param.empty()) {
    if (request.method != "GET") return respond(MethodNotAllowed("GET"));
    return allocator_.Run(op::ListTags{}, [this, respond](Result<std::vector<state::TagRecord>> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      json list = json::array();
      for (const auto& t : *r) list.push_back(TagJson(t));
      respond(JsonResponse(json{{"tags", list}}));
    });
  }
  std::string tag(call.param);
  if (auto v = ValidateTag(tag); !v) return respond(ErrorResponse(v.error()));
  if (request.method == "GET") return allocator_.Run(op::GetTag{tag}, reply(200));
  if (request.method == "PUT") {
    auto update = ParseTagUpdate(request.body);
    if (!update) return respond(ErrorResponse(update.error()));
    if (!update->id_mode || *update->id_mode == state::IdMode::kPlain) {
      return allocator_.Run(op::PutTag{tag, std::move(*update)}, reply(200));
    }
    // Leaving plain: this node's buffered plain segments would go on handing out countable IDs
    // until used up. They are dropped (a gap); other gateways drop theirs when their next segment
    // arrives (SegmentBuffer::OnFetched), and the answer says so.
    return allocator_.Run(
        op::PutTag{tag, std::move(*update)}, [this, tag, respond](Result<state::TagRecord> r) {
          if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
          segments_.Forget(tag);
          json body = TagJson(*r);
          body["note"] = std::string("id_mode ") + state::IdModeName(r->id_mode) +
                         ": this node dropped its buffered segments of the tag (a gap); other "
                         "gateways serve the rest of their current plain segment until their next "
                         "segment of the tag arrives";
          respond(JsonResponse(body, 200));
        });
  }
  if (request.method == "DELETE") {
    return allocator_.Run(op::DeleteTag{tag}, [this, tag, respond](Result<state::TagRecord> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      segments_.Forget(tag);
      respond(JsonResponse(json{{"deleted", TagJson(*r)}}));
    });
  }
  respond(MethodNotAllowed("GET, PUT, DELETE"));
}

void Api::ServeSpaces(Call call) {
  const HttpRequest& request = call.request;
  auto reply = [this, respond = call.respond](Result<state::SpaceRecord> r) {
    if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
    respond(JsonResponse(SpaceJson(*r)));
  };
  if (call.param.empty()) {
    if (request.method != "GET") return call.respond(MethodNotAllowed("GET"));
    return allocator_.Run(op::ListSpaces{}, [this, respond = std::move(call.respond)](
                                                Result<std::vector<state::SpaceRecord>> r) {
      if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
      json list = json::array();
      for (const auto& s : *r) list.push_back(SpaceJson(s));
      respond(JsonResponse(json{{"spaces", list}}));
    });
  }
  auto space = AskedSpace(call);
  if (!space) return;
  if (request.method == "GET") return allocator_.Run(op::GetSpace{*space}, reply);
  if (request.method == "PUT") {
    auto update = ParseSpaceUpdate(request.body);
    if (!update) return call.respond(ErrorResponse(update.error()));
    return allocator_.Run(op::PutSpace{*space, std::move(*update)}, reply);
  }
  if (request.method == "DELETE") {
    return allocator_.Run(op::DeleteSpace{*space},
                          [this, respond = std::move(call.respond)](Result<state::SpaceRecord> r) {
                            if (!r)
                              return respond(ErrorResponse(r.error(), options_.retry_after_s));
                            respond(JsonResponse(json{{"deleted", SpaceJson(*r)}}));
                          });
  }
  call.respond(MethodNotAllowed("GET, PUT, DELETE"));
}

void Api::ServeSpaceSeq(Call call) {
  const std::string& method = call.request.method;
  if (method != "GET" && method != "POST") return call.respond(MethodNotAllowed("GET, POST"));
  auto space = AskedSpace(call);
  if (!space) return;
  if (method == "GET") return NextSeqs(std::move(*space), {0}, true, std::move(call.respond));
  auto keys = ParseSeqKeys(call.request.body);
  if (!keys) return Reject(call.respond, keys.error());
  NextSeqs(std::move(*space), std::move(*keys), false, std::move(call.respond));
}

void Api::ServeKeySeq(Call call) {
  auto space = AskedSpace(call);
  if (!space) return;
  auto key = AskedKey(call);
  if (!key) return;
  NextSeqs(std::move(*space), {*key}, true, std::move(call.respond));
}

void Api::ServeCurrentSeq(Call call) {
  auto space = AskedSpace(call);
  if (!space) return;
  auto key = AskedKey(call);
  if (!key) return;
  allocator_.Run(
      op::CurrentSeq{*space, *key},
      [this, space = *space, key = *key, respond = std::move(call.respond)](Result<uint64_t> r) {
        if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
        respond(JsonResponse(
            json{{"space", space}, {"key", std::to_string(key)}, {"seq", std::to_string(*r)}}));
      });
}

// --- What the handlers share.

std::optional<std::string> Api::AskedSpace(Call& call) const {
  std::string space(call.param);
  if (auto v = allocator::ValidateSpaceName(space); !v) {
    Reject(call.respond, v.error());
    return std::nullopt;
  }
  return space;
}

std::optional<uint64_t> Api::AskedKey(Call& call) const {
  auto key = ParseSeqKey(call.param2);
  if (!key) {
    Reject(call.respond, key.error());
    return std::nullopt;
  }
  return *key;
}

// One key (`one`): {"space","key","seq"}; a list: {"space","seqs":[{"key","seq"},...]} in the
// order asked. Values and keys as strings: they go past 2^53.
void Api::NextSeqs(std::string space, std::vector<uint64_t> keys, bool one, Respond respond) {
  auto asked = keys;
  allocator_.Run(
      op::NextSeq{space, std::move(keys)},
      [this, space, asked = std::move(asked), one,
       respond = std::move(respond)](Result<std::vector<uint64_t>> r) {
        if (!r) return respond(ErrorResponse(r.error(), options_.retry_after_s));
        if (r->size() != asked.size()) {
          return respond(ErrorResponse(Error{Code::kInternal, "one value per key expected"}));
        }
        if (one) {
          return respond(JsonResponse(json{{"space", space},
                                           {"key", std::to_string(asked.front())},
                                           {"seq", std::to_string(r->front())}}));
        }
        HttpResponse list;
        AppendSeqList(list.body, space, asked, *r);
        respond(std::move(list));
      });
}

std::optional<Api::IdsAsked> Api::AskedIds(Call& call, bool leaf) const {
  std::string tag(call.param);
  if (auto v = ValidateTag(tag); !v) {
    Reject(call.respond, v.error());
    return std::nullopt;
  }
  auto count = leaf ? Result<int64_t>(1) : ParseCount(call.query, options_.max_batch);
  if (!count) {
    Reject(call.respond, count.error());
    return std::nullopt;
  }
  return IdsAsked{std::move(tag), *count};
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

// --- UUIDv7 and ULID (issue 17): drawn from the snowflake generator.

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

}  // namespace kleaf::gateway
