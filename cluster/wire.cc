#include "cluster/wire.h"

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "allocator/id_format.h"
#include "base/plain_json.h"
#include "state/records_json.h"

namespace kleaf::cluster::wire {
namespace {

using allocator::Segment;
using allocator::WorkerCounts;
using allocator::WorkerLeaseInfo;
using nlohmann::json;
namespace op = allocator::op;

// ---- requests ----

json ClaimantJson(const allocator::Claimant& c, int64_t worker_id, int64_t node_now_ms,
                  int64_t last_timestamp_ms) {
  json j = {{"node_id", c.node_id},
            {"worker_id", worker_id},
            {"node_now", node_now_ms},
            {"last_timestamp", last_timestamp_ms}};
  if (!c.holder.empty()) j["holder"] = c.holder;
  if (!c.previous_holder.empty()) j["previous_holder"] = c.previous_holder;
  return j;
}

json UpdateJson(const allocator::TagUpdate& update) {
  json u = json::object();
  if (update.step) u["step"] = *update.step;
  if (update.max_id) u["max_id"] = *update.max_id;
  if (update.description) u["description"] = *update.description;
  if (update.id_mode) u["id_mode"] = state::IdModeName(*update.id_mode);
  if (update.restore_id_format) {
    // A tag record's own encoding (state/records.h), as an object of this request.
    u["restore"] = state::TagToJson(*update.restore_id_format);
  }
  return u;
}

// The fields of each operation besides "op" and "partitions".
json FieldsOf(const op::Allocate& r) { return {{"tag", r.tag}, {"step", r.step}}; }
json FieldsOf(const op::GetTag& r) { return {{"tag", r.tag}}; }
json FieldsOf(const op::PutTag& r) { return {{"tag", r.tag}, {"update", UpdateJson(r.update)}}; }
json FieldsOf(const op::DeleteTag& r) { return {{"tag", r.tag}}; }
json FieldsOf(const op::ListTags&) { return json::object(); }
json FieldsOf(const op::ClaimWorker& r) {
  return ClaimantJson(r.claim.claimant, -1, r.claim.node_now_ms, 0);
}
json FieldsOf(const op::RenewWorker& r) {
  return ClaimantJson(r.report.claimant, r.report.worker_id, r.report.node_now_ms,
                      r.report.last_timestamp_ms);
}
json FieldsOf(const op::ReleaseWorker& r) { return FieldsOf(op::RenewWorker{r.report}); }
json FieldsOf(const op::WorkerStatus&) { return ClaimantJson({}, -1, 0, 0); }
json SpaceUpdateJson(const allocator::SpaceUpdate& update) {
  json u = json::object();
  if (update.section_size) u["section_size"] = *update.section_size;
  if (update.step) u["step"] = *update.step;
  if (update.description) u["description"] = *update.description;
  return u;
}
json FieldsOf(const op::GetSpace& r) { return {{"space", r.space}}; }
json FieldsOf(const op::PutSpace& r) {
  return {{"space", r.space}, {"update", SpaceUpdateJson(r.update)}};
}
json FieldsOf(const op::DeleteSpace& r) { return {{"space", r.space}}; }
json FieldsOf(const op::ListSpaces&) { return json::object(); }
json FieldsOf(const op::NextSeq& r) {
  // Both 0 without a shape: the bytes of earlier versions, which read 0 and 0 as "no shape".
  const op::SpaceShape shape = r.shape.value_or(op::SpaceShape{});
  return {{"space", r.space},
          {"keys", r.keys},
          {"section_size", shape.section_size},
          {"step", shape.step}};
}
json FieldsOf(const op::CurrentSeq& r) {
  return {{"space", r.space}, {"key", r.key}, {"section_size", r.section_size.value_or(0)}};
}
json FieldsOf(const op::RaiseSection& r) {
  return {{"space", r.space},
          {"section", r.section},
          {"section_size", r.section_size},
          {"max_seq", r.max_seq}};
}

allocator::SpaceUpdate SpaceUpdateFrom(const json& u) {
  allocator::SpaceUpdate update;
  if (u.contains("section_size")) update.section_size = u.at("section_size").get<int64_t>();
  if (u.contains("step")) update.step = u.at("step").get<int64_t>();
  if (u.contains("description")) update.description = u.at("description").get<std::string>();
  return update;
}

[[nodiscard]] Result<allocator::TagUpdate> UpdateFrom(const json& u) {
  allocator::TagUpdate update;
  if (u.contains("step")) update.step = u.at("step").get<int64_t>();
  if (u.contains("max_id")) update.max_id = u.at("max_id").get<int64_t>();
  if (u.contains("description")) update.description = u.at("description").get<std::string>();
  if (u.contains("id_mode")) {
    auto mode = state::ParseIdMode(u.at("id_mode").get<std::string>());
    if (!mode) return std::unexpected(mode.error());
    update.id_mode = *mode;
  }
  if (u.contains("restore")) {
    auto restore = state::TagFromJson(u.at("restore"));
    if (!restore) return std::unexpected(restore.error());
    update.restore_id_format = *restore;
  }
  return update;
}

allocator::Claimant ClaimantFrom(const json& j) {
  return {j.value("node_id", ""), j.value("holder", ""), j.value("previous_holder", "")};
}

allocator::WorkerReport ReportFrom(const json& j) {
  return {ClaimantFrom(j), j.value("worker_id", int64_t{-1}), j.value("node_now", int64_t{0}),
          j.value("last_timestamp", int64_t{0})};
}

// Field `field` of `j` as an unsigned 64-bit integer; throws (a malformed request) for a negative
// or fractional number, which get<uint64_t> would convert.
uint64_t UnsignedOf(const json& j, const char* field) {
  const json& v = j.at(field);
  if (!v.is_number_unsigned()) {
    throw std::invalid_argument(std::string(field) + ": not an unsigned 64-bit integer");
  }
  return v.get<uint64_t>();
}

// The operation named `name`, read from `j`; nullopt for an unknown name.
std::optional<Result<allocator::Request>> RequestFrom(const std::string& name, const json& j) {
  using R = Result<allocator::Request>;
  if (name == op::Allocate::kName) {
    return R(op::Allocate{j.at("tag").get<std::string>(), j.value("step", int64_t{0})});
  }
  if (name == op::GetTag::kName) return R(op::GetTag{j.at("tag").get<std::string>()});
  if (name == op::PutTag::kName) {
    auto update = UpdateFrom(j.at("update"));
    if (!update) return R(std::unexpected(update.error()));
    return R(op::PutTag{j.at("tag").get<std::string>(), std::move(*update)});
  }
  if (name == op::DeleteTag::kName) return R(op::DeleteTag{j.at("tag").get<std::string>()});
  if (name == op::ListTags::kName) return R(op::ListTags{});
  if (name == op::ClaimWorker::kName) {
    return R(op::ClaimWorker{{ClaimantFrom(j), j.value("node_now", int64_t{0})}});
  }
  if (name == op::RenewWorker::kName) return R(op::RenewWorker{ReportFrom(j)});
  if (name == op::ReleaseWorker::kName) return R(op::ReleaseWorker{ReportFrom(j)});
  if (name == op::WorkerStatus::kName) return R(op::WorkerStatus{});
  if (name == op::GetSpace::kName) return R(op::GetSpace{j.at("space").get<std::string>()});
  if (name == op::PutSpace::kName) {
    return R(op::PutSpace{j.at("space").get<std::string>(), SpaceUpdateFrom(j.at("update"))});
  }
  if (name == op::DeleteSpace::kName) return R(op::DeleteSpace{j.at("space").get<std::string>()});
  if (name == op::ListSpaces::kName) return R(op::ListSpaces{});
  if (name == op::NextSeq::kName) {
    const op::SpaceShape shape{j.value("section_size", int64_t{0}), j.value("step", int64_t{0})};
    std::optional<op::SpaceShape> sent;
    if (shape.section_size != 0 || shape.step != 0) sent = shape;  // see FieldsOf
    return R(op::NextSeq{j.at("space").get<std::string>(),
                         j.at("keys").get<std::vector<uint64_t>>(), sent});
  }
  if (name == op::CurrentSeq::kName) {
    const int64_t section_size = j.value("section_size", int64_t{0});
    return R(op::CurrentSeq{j.at("space").get<std::string>(), j.at("key").get<uint64_t>(),
                            section_size != 0 ? std::optional(section_size) : std::nullopt});
  }
  if (name == op::RaiseSection::kName) {
    return R(op::RaiseSection{j.at("space").get<std::string>(), UnsignedOf(j, "section"),
                              j.at("section_size").get<int64_t>(), UnsignedOf(j, "max_seq")});
  }
  return std::nullopt;
}

// ---- replies ----

// A segment's format: {"id_mode","id_key","id_base"} for a permuted tag (the key travels only
// inside the cluster's topics, like the state record it comes from), {"datacenter_index",
// "datacenter_count"} for a plain tag in one datacenter of several, nothing for a plain one.
void FormatToJson(const Segment& s, json& out) {
  if (!s.format) return;
  if (s.format->mode() == state::IdMode::kPlain) {
    out["datacenter_index"] = s.format->datacenter().index;
    out["datacenter_count"] = s.format->datacenter().count;
    return;
  }
  state::TagRecord r;
  s.format->WriteTo(r);
  out["id_mode"] = state::IdModeName(r.id_mode);
  out["id_key"] = r.id_key;
  out["id_base"] = r.id_base;
}

[[nodiscard]] Result<std::shared_ptr<const allocator::IdFormat>> FormatFromJson(
    const std::string& tag, const json& j) {
  if (j.contains("datacenter_count")) {
    const allocator::Datacenter dc{j.at("datacenter_index").get<int64_t>(),
                                   j.at("datacenter_count").get<int64_t>()};
    if (dc.count < 1 || dc.index < 0 || dc.index >= dc.count) {
      return Fail(Code::kInternal, "segment of " + dc.Describe());
    }
    return allocator::IdFormat::PlainIn(dc);
  }
  if (!j.contains("id_mode")) return std::shared_ptr<const allocator::IdFormat>();
  state::TagRecord r;
  r.tag = tag;
  auto mode = state::ParseIdMode(j.at("id_mode").get<std::string>());
  if (!mode) return std::unexpected(mode.error());
  r.id_mode = *mode;
  r.id_key = j.at("id_key").get<std::string>();
  r.id_base = j.at("id_base").get<int64_t>();
  return allocator::IdFormat::Of(r);
}

json ResultJson(const Segment& s) {
  json j = {{"tag", s.tag}, {"start", s.start}, {"end", s.end}, {"min_step", s.min_step}};
  FormatToJson(s, j);
  return {{"segment", j}};
}
json ResultJson(const WorkerLeaseInfo& l) {
  json j = {{"worker_id", l.worker_id},
            {"lease_until", l.lease_until_ms},
            {"not_before", l.not_before_ms},
            {"allocator_now", l.allocator_now_ms}};
  if (!l.notice.empty()) j["notice"] = l.notice;
  return {{"lease", j}};
}
json ResultJson(const WorkerCounts& w) {
  return {{"workers", {{"leased", w.leased}, {"free", w.free}}}};
}

json ResultJson(uint64_t seq) { return {{"seq", seq}}; }

template <typename T>
std::string Encode(const Result<T>& reply) {
  return reply ? ResultJson(*reply).dump() : EncodeError(reply.error());
}

[[nodiscard]] Result<Segment> ResultFrom(const json& j, std::type_identity<Segment>) {
  if (!j.contains("segment")) return Fail(Code::kInternal, "allocator reply without a segment");
  const json& s = j.at("segment");
  Segment segment{s.at("tag").get<std::string>(), s.at("start").get<int64_t>(),
                  s.at("end").get<int64_t>(), s.at("min_step").get<int64_t>()};
  auto format = FormatFromJson(segment.tag, s);
  if (!format) return std::unexpected(format.error());
  segment.format = *format;
  return segment;
}
[[nodiscard]] Result<state::TagRecord> ResultFrom(const json& j,
                                                  std::type_identity<state::TagRecord>) {
  if (!j.contains("tag")) return Fail(Code::kInternal, "allocator reply without a tag");
  return state::TagFromJson(j.at("tag"));
}
[[nodiscard]] Result<std::vector<state::TagRecord>> ResultFrom(
    const json& j, std::type_identity<std::vector<state::TagRecord>>) {
  std::vector<state::TagRecord> tags;
  if (!j.contains("tags")) return tags;  // none: the key is left out
  for (const auto& t : j.at("tags")) {
    auto d = state::TagFromJson(t);
    if (!d) return std::unexpected(d.error());
    tags.push_back(std::move(*d));
  }
  return tags;
}
[[nodiscard]] Result<WorkerLeaseInfo> ResultFrom(const json& j,
                                                 std::type_identity<WorkerLeaseInfo>) {
  if (!j.contains("lease")) return Fail(Code::kInternal, "allocator reply without a lease");
  const json& l = j.at("lease");
  return WorkerLeaseInfo{l.at("worker_id").get<int64_t>(), l.at("lease_until").get<int64_t>(),
                         l.at("not_before").get<int64_t>(), l.value("allocator_now", int64_t{0}),
                         l.value("notice", std::string())};
}
[[nodiscard]] Result<WorkerCounts> ResultFrom(const json& j, std::type_identity<WorkerCounts>) {
  if (!j.contains("workers")) return Fail(Code::kInternal, "allocator reply without counts");
  return WorkerCounts{j["workers"].at("leased").get<int64_t>(),
                      j["workers"].at("free").get<int64_t>()};
}

[[nodiscard]] Result<state::SpaceRecord> ResultFrom(const json& j,
                                                    std::type_identity<state::SpaceRecord>) {
  if (!j.contains("space")) return Fail(Code::kInternal, "allocator reply without a space");
  return state::SpaceFromJson(j.at("space"));
}
[[nodiscard]] Result<std::vector<state::SpaceRecord>> ResultFrom(
    const json& j, std::type_identity<std::vector<state::SpaceRecord>>) {
  std::vector<state::SpaceRecord> spaces;
  if (!j.contains("spaces")) return spaces;  // none: the key is left out
  for (const auto& s : j.at("spaces")) {
    auto d = state::SpaceFromJson(s);
    if (!d) return std::unexpected(d.error());
    spaces.push_back(std::move(*d));
  }
  return spaces;
}
[[nodiscard]] Result<std::vector<uint64_t>> ResultFrom(const json& j,
                                                       std::type_identity<std::vector<uint64_t>>) {
  if (!j.contains("seqs")) return Fail(Code::kInternal, "allocator reply without seqs");
  return j.at("seqs").get<std::vector<uint64_t>>();
}
[[nodiscard]] Result<uint64_t> ResultFrom(const json& j, std::type_identity<uint64_t>) {
  if (!j.contains("seq")) return Fail(Code::kInternal, "allocator reply without a seq");
  return j.at("seq").get<uint64_t>();
}

}  // namespace

namespace {

// next_seq's envelope and its values, the owner hop's and the requests topic's most frequent
// texts, written and read by hand (base/plain_json.h): the same bytes json::dump() writes (members
// in name order), so a peer of either version reads them, and any other text is read by
// nlohmann::json as before.
std::optional<std::string> PlainNextSeq(const op::NextSeq& r, int32_t partitions) {
  if (!plain_json::IsPlain(r.space)) return std::nullopt;
  const op::SpaceShape shape = r.shape.value_or(op::SpaceShape{});  // see FieldsOf
  std::string out;
  out.reserve(96 + r.space.size() + r.keys.size() * 8);
  out += R"({"keys":[)";
  for (size_t i = 0; i < r.keys.size(); ++i) {
    if (i > 0) out += ',';
    plain_json::AppendUint(out, r.keys[i]);
  }
  out += R"(],"op":")";
  out += op::NextSeq::kName;
  out += '"';
  if (partitions > 0) {
    out += R"(,"partitions":)";
    plain_json::AppendInt(out, partitions);
  }
  out += R"(,"section_size":)";
  plain_json::AppendInt(out, shape.section_size);
  out += R"(,"space":")";
  out += r.space;
  out += R"(","step":)";
  plain_json::AppendInt(out, shape.step);
  out += '}';
  return out;
}

std::optional<Envelope> ReadPlainNextSeq(std::string_view text) {
  plain_json::Reader in(text);
  op::NextSeq next;
  op::SpaceShape shape;
  int64_t partitions = 0;
  std::string_view space;
  if (!in.Literal(R"({"keys":)") || !in.UintList(next.keys, SIZE_MAX) ||
      !in.Literal(R"(,"op":")") || !in.Literal(op::NextSeq::kName) || !in.Literal(R"(",)")) {
    return std::nullopt;
  }
  if (in.Literal(R"("partitions":)")) {
    if (!in.Int(partitions) || partitions < 0 || partitions > INT32_MAX || !in.Literal(",")) {
      return std::nullopt;
    }
  }
  if (!in.Literal(R"("section_size":)") || !in.Int(shape.section_size) ||
      !in.Literal(R"(,"space":)") || !in.String(space) || !in.Literal(R"(,"step":)") ||
      !in.Int(shape.step) || !in.Literal("}") || !in.AtEnd()) {
    return std::nullopt;
  }
  next.space = space;
  if (shape.section_size != 0 || shape.step != 0) next.shape = shape;  // see RequestFrom
  return Envelope{std::move(next), static_cast<int32_t>(partitions)};
}

std::string PlainSeqs(const std::vector<uint64_t>& seqs) {
  std::string out;
  out.reserve(16 + seqs.size() * 12);
  out += R"({"seqs":[)";
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (i > 0) out += ',';
    plain_json::AppendUint(out, seqs[i]);
  }
  out += "]}";
  return out;
}

std::optional<std::vector<uint64_t>> ReadPlainSeqs(std::string_view text) {
  plain_json::Reader in(text);
  std::vector<uint64_t> seqs;
  if (!in.Literal(R"({"seqs":)") || !in.UintList(seqs, SIZE_MAX) || !in.Literal("}") ||
      !in.AtEnd()) {
    return std::nullopt;
  }
  return seqs;
}

}  // namespace

std::string EncodeRequest(const Envelope& e) {
  if (const auto* next = std::get_if<op::NextSeq>(&e.request)) {
    if (auto plain = PlainNextSeq(*next, e.partitions)) return std::move(*plain);
  }
  json j = std::visit([](const auto& r) { return FieldsOf(r); }, e.request);
  j["op"] = allocator::OpName(static_cast<int>(e.request.index()));
  if (e.partitions > 0) j["partitions"] = e.partitions;
  return j.dump();
}

Result<Envelope> DecodeRequest(std::string_view text) {
  if (auto plain = ReadPlainNextSeq(text)) return std::move(*plain);
  try {
    json j = json::parse(text);
    const std::string name = j.at("op").get<std::string>();
    auto request = RequestFrom(name, j);
    if (!request) return Fail(Code::kInvalidArgument, "unknown request op '" + name + "'");
    if (!*request) return std::unexpected(request->error());
    return Envelope{std::move(**request), j.value("partitions", int32_t{0})};
  } catch (const std::exception& e) {
    return Fail(Code::kInvalidArgument, std::string("malformed request: ") + e.what());
  }
}

std::string EncodeError(const Error& error) {
  return json{{"error", {{"code", CodeName(error.code)}, {"message", error.message}}}}.dump();
}

std::string EncodeReply(const Result<Segment>& reply) { return Encode(reply); }
std::string EncodeReply(const Result<WorkerLeaseInfo>& reply) { return Encode(reply); }
std::string EncodeReply(const Result<WorkerCounts>& reply) { return Encode(reply); }

// Tag records keep their own encoding (state/records.h), put into the reply as it is.
std::string EncodeReply(const Result<state::TagRecord>& reply) {
  if (!reply) return EncodeError(reply.error());
  return R"({"tag":)" + state::EncodeTag(*reply) + "}";
}
std::string EncodeReply(const Result<std::vector<state::TagRecord>>& reply) {
  if (!reply) return EncodeError(reply.error());
  if (reply->empty()) return "{}";
  std::string out = R"({"tags":[)";
  for (size_t i = 0; i < reply->size(); ++i) {
    if (i > 0) out += ',';
    out += state::EncodeTag((*reply)[i]);
  }
  return out + "]}";
}

std::string EncodeReply(const Result<state::SpaceRecord>& reply) {
  if (!reply) return EncodeError(reply.error());
  return R"({"space":)" + state::EncodeSpace(*reply) + "}";
}
std::string EncodeReply(const Result<std::vector<state::SpaceRecord>>& reply) {
  if (!reply) return EncodeError(reply.error());
  if (reply->empty()) return "{}";
  std::string out = R"({"spaces":[)";
  for (size_t i = 0; i < reply->size(); ++i) {
    if (i > 0) out += ',';
    out += state::EncodeSpace((*reply)[i]);
  }
  return out + "]}";
}
std::string EncodeReply(const Result<std::vector<uint64_t>>& reply) {
  return reply ? PlainSeqs(*reply) : EncodeError(reply.error());
}
std::string EncodeReply(const Result<uint64_t>& reply) { return Encode(reply); }

template <typename T>
Result<T> DecodeReply(std::string_view text) {
  if constexpr (std::is_same_v<T, std::vector<uint64_t>>) {
    if (auto plain = ReadPlainSeqs(text)) return std::move(*plain);
  }
  try {
    json j = json::parse(text);
    if (j.contains("error")) {
      return std::unexpected(Error{CodeFromName(j["error"].at("code").get<std::string>()),
                                   j["error"].at("message").get<std::string>()});
    }
    return ResultFrom(j, std::type_identity<T>{});
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("malformed reply: ") + e.what());
  }
}

template Result<Segment> DecodeReply<Segment>(std::string_view);
template Result<state::TagRecord> DecodeReply<state::TagRecord>(std::string_view);
template Result<std::vector<state::TagRecord>> DecodeReply<std::vector<state::TagRecord>>(
    std::string_view);
template Result<WorkerLeaseInfo> DecodeReply<WorkerLeaseInfo>(std::string_view);
template Result<WorkerCounts> DecodeReply<WorkerCounts>(std::string_view);
template Result<state::SpaceRecord> DecodeReply<state::SpaceRecord>(std::string_view);
template Result<std::vector<state::SpaceRecord>> DecodeReply<std::vector<state::SpaceRecord>>(
    std::string_view);
template Result<std::vector<uint64_t>> DecodeReply<std::vector<uint64_t>>(std::string_view);
template Result<uint64_t> DecodeReply<uint64_t>(std::string_view);

std::string EncodeLayout(const ClusterLayout& l) {
  return nlohmann::json{{"partitions", l.partitions},
                        {"state_topic_id", l.state_topic_id},
                        {"written_by", l.written_by},
                        {"written_ms", l.written_ms},
                        {"datacenter_index", l.datacenter.index},
                        {"datacenter_count", l.datacenter.count}}
      .dump();
}

Result<ClusterLayout> DecodeLayout(std::string_view json) {
  try {
    auto j = nlohmann::json::parse(json);
    ClusterLayout l;
    l.partitions = j.at("partitions").get<int32_t>();
    l.state_topic_id = j.value("state_topic_id", std::string());
    l.written_by = j.value("written_by", std::string());
    l.written_ms = j.value("written_ms", int64_t{0});
    l.datacenter.index = j.value("datacenter_index", int64_t{0});
    l.datacenter.count = j.value("datacenter_count", int64_t{1});
    if (l.partitions <= 0) return Fail(Code::kInternal, "layout record with no partition count");
    if (l.datacenter.count < 1 || l.datacenter.index < 0 ||
        l.datacenter.index >= l.datacenter.count) {
      return Fail(Code::kInternal, "layout record with datacenter " +
                                       std::to_string(l.datacenter.index) + " of " +
                                       std::to_string(l.datacenter.count));
    }
    return l;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("unreadable layout record: ") + e.what());
  }
}

std::string EncodeRequestsOffset(int64_t next) { return std::to_string(next); }

std::optional<int64_t> DecodeRequestsOffset(std::string_view value) {
  int64_t next = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), next);
  if (ec != std::errc() || end != value.data() + value.size() || next < 0) return std::nullopt;
  return next;
}

namespace {

// Reads "<number> " or "<number>\n" at the front of `in`, and drops it.
template <typename T>
bool TakeNumber(std::string_view& in, T& out, char end) {
  const auto [ptr, ec] = std::from_chars(in.data(), in.data() + in.size(), out);
  if (ec != std::errc() || ptr == in.data() + in.size() || *ptr != end) return false;
  in.remove_prefix(static_cast<size_t>(ptr - in.data()) + 1);
  return true;
}

// Takes `length` bytes off the front of `in`.
bool TakeBytes(std::string_view& in, size_t length, std::string& out) {
  if (length > in.size()) return false;
  out.assign(in.substr(0, length));
  in.remove_prefix(length);
  return true;
}

}  // namespace

std::string EncodeHopCalls(const std::vector<HopCall>& calls) {
  std::string out;
  for (const auto& c : calls) {
    out += std::to_string(c.partition) + " " + std::to_string(c.request.size()) + "\n";
    out += c.request;
  }
  return out;
}

Result<std::vector<HopCall>> DecodeHopCalls(std::string_view body) {
  std::vector<HopCall> calls;
  while (!body.empty()) {
    if (calls.size() == kMaxHopCalls) {
      return Fail(Code::kInvalidArgument,
                  "more than " + std::to_string(kMaxHopCalls) + " calls in one owner-hop request");
    }
    HopCall c;
    size_t length = 0;
    if (!TakeNumber(body, c.partition, ' ') || !TakeNumber(body, length, '\n') ||
        !TakeBytes(body, length, c.request)) {
      return Fail(Code::kInvalidArgument,
                  "not an owner-hop request: parts of \"<partition> <length>\\n<request>\"");
    }
    calls.push_back(std::move(c));
  }
  if (calls.empty()) return Fail(Code::kInvalidArgument, "an owner-hop request without calls");
  return calls;
}

std::string EncodeHopReplies(const std::vector<HopReply>& replies) {
  std::string out;
  for (const auto& r : replies) {
    out += std::to_string(r.status) + " " + std::to_string(r.generation) + " " +
           std::to_string(r.body.size()) + "\n";
    out += r.body;
  }
  return out;
}

Result<std::vector<HopReply>> DecodeHopReplies(std::string_view body) {
  std::vector<HopReply> replies;
  while (!body.empty()) {
    HopReply r;
    size_t length = 0;
    if (!TakeNumber(body, r.status, ' ') || !TakeNumber(body, r.generation, ' ') ||
        !TakeNumber(body, length, '\n') || !TakeBytes(body, length, r.body)) {
      return Fail(Code::kInternal, "an owner-hop answer that is not one");
    }
    replies.push_back(std::move(r));
  }
  return replies;
}

}  // namespace kleaf::cluster::wire
