#include "kleaf/batch.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace kleaf {
namespace {

using Json = nlohmann::json;

std::expected<int64_t, std::string> ReadId(const Json& j, const char* field) {
  int64_t v = 0;
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
      return std::unexpected(std::string(field) + ": not a decimal integer: \"" + s + "\"");
    }
  } else if (j.is_number_integer()) {
    v = j.get<int64_t>();
  } else {
    return std::unexpected(std::string(field) + ": expected an ID (string or integer)");
  }
  if (v < 0) return std::unexpected(std::string(field) + ": negative ID " + std::to_string(v));
  return v;
}

constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool IsCanonicalUuid7(std::string_view t) {
  if (t.size() != 36) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? t[i] != '-' : !IsLowerHex(t[i])) return false;
  }
  // The version nibble is 7; the variant's two top bits are 10 (8, 9, a or b).
  return t[14] == '7' && (t[19] == '8' || t[19] == '9' || t[19] == 'a' || t[19] == 'b');
}

bool IsCanonicalUlid(std::string_view t) {
  if (t.size() != 26 || t[0] > '7') return false;  // 26 x 5 bits = 130: the top 2 must be 0
  for (char c : t) {
    if (kCrockford.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

int64_t IdBatch::size() const {
  if (mode == Mode::kSegment && ids.empty()) return end - start;
  if (Is128Bit(mode)) return static_cast<int64_t>(texts.size());
  return static_cast<int64_t>(ids.size());
}

int64_t IdBatch::at(int64_t i) const {
  return mode == Mode::kSegment && ids.empty() ? start + i : ids[i];
}

std::string IdBatch::text_at(int64_t i) const {
  return Is128Bit(mode) ? texts[i] : std::to_string(at(i));
}

std::string_view ModeName(IdBatch::Mode mode) {
  switch (mode) {
    case IdBatch::Mode::kSegment:
      return "segment";
    case IdBatch::Mode::kSnowflake:
      return "snowflake";
    case IdBatch::Mode::kUuid7:
      return "uuid7";
    case IdBatch::Mode::kUlid:
      return "ulid";
  }
  return "segment";
}

bool ParseMode(std::string_view name, IdBatch::Mode& mode) {
  for (auto m : {IdBatch::Mode::kSegment, IdBatch::Mode::kSnowflake, IdBatch::Mode::kUuid7,
                 IdBatch::Mode::kUlid}) {
    if (name == ModeName(m)) {
      mode = m;
      return true;
    }
  }
  return false;
}

bool Is128Bit(IdBatch::Mode mode) {
  return mode == IdBatch::Mode::kUuid7 || mode == IdBatch::Mode::kUlid;
}

bool IsCanonical128(IdBatch::Mode mode, std::string_view text) {
  if (mode == IdBatch::Mode::kUuid7) return IsCanonicalUuid7(text);
  if (mode == IdBatch::Mode::kUlid) return IsCanonicalUlid(text);
  return false;
}

std::string StreamTopic(std::string_view ids_topic, std::string_view tag, IdBatch::Mode mode) {
  std::string topic(ids_topic);
  topic += '.';
  topic += ModeName(mode);
  topic += '.';
  for (char c : tag) {
    if (c == '_') {
      topic += "__";
    } else if (c == ':') {
      topic += "_c";
    } else {
      topic += c;
    }
  }
  return topic;
}

std::string EncodeBatch(const IdBatch& batch) {
  Json j = {{"tag", batch.tag}, {"mode", ModeName(batch.mode)}};
  if (!batch.group.empty()) j["group"] = batch.group;
  if (batch.mode == IdBatch::Mode::kSegment && batch.ids.empty()) {
    j["start"] = std::to_string(batch.start);
    j["end"] = std::to_string(batch.end);
  } else if (Is128Bit(batch.mode)) {
    j["ids"] = batch.texts;
  } else {
    Json ids = Json::array();
    for (int64_t id : batch.ids) ids.push_back(std::to_string(id));
    j["ids"] = std::move(ids);
  }
  return j.dump();
}

namespace {

using Decoded = std::expected<void, std::string>;

// A batch's tag and mode, into `b`.
Decoded DecodeTagAndMode(const Json& j, IdBatch& b) {
  auto tag = j.find("tag");
  if (tag == j.end() || !tag->is_string() || tag->get_ref<const std::string&>().empty()) {
    return std::unexpected("tag: missing or not a non-empty string");
  }
  b.tag = tag->get<std::string>();
  auto mode = j.find("mode");
  if (mode == j.end() || !mode->is_string()) return std::unexpected("mode: missing");
  const std::string& mode_name = mode->get_ref<const std::string&>();
  if (!ParseMode(mode_name, b.mode)) {
    return std::unexpected("mode: unknown \"" + mode_name +
                           "\" (segment, snowflake, uuid7 or ulid)");
  }
  if (auto group = j.find("group"); group != j.end()) {
    if (!group->is_string() || group->get_ref<const std::string&>().empty()) {
      return std::unexpected("group: not a non-empty string");
    }
    b.group = group->get<std::string>();
  }
  return {};
}

// A segment batch given as a range of IDs, {start, end}, into b.start and b.end.
Decoded DecodeRange(const Json& j, IdBatch& b) {
  if (!j.contains("start") || !j.contains("end")) {
    return std::unexpected("segment: start and end, or ids, required");
  }
  auto start = ReadId(j.at("start"), "start");
  if (!start) return std::unexpected(start.error());
  auto end = ReadId(j.at("end"), "end");
  if (!end) return std::unexpected(end.error());
  if (*end <= *start) return std::unexpected("segment: end must be greater than start");
  b.start = *start;
  b.end = *end;
  return {};
}

// A batch given as a list of IDs: canonical text for the 128-bit modes, integers for the others.
Decoded DecodeList(const Json& j, IdBatch& b) {
  auto ids = j.find("ids");
  if (ids == j.end() || !ids->is_array() || ids->empty()) {
    return std::unexpected("ids: missing or not a non-empty array");
  }
  if (Is128Bit(b.mode)) {
    b.texts.reserve(ids->size());
    for (const auto& id : *ids) {
      if (!id.is_string() || !IsCanonical128(b.mode, id.get_ref<const std::string&>())) {
        return std::unexpected("ids: not a canonical " + std::string(ModeName(b.mode)) + ": " +
                               id.dump());
      }
      b.texts.push_back(id.get<std::string>());
    }
    return {};
  }
  if (b.mode == IdBatch::Mode::kSegment && (j.contains("start") || j.contains("end"))) {
    return std::unexpected("segment: start and end, or ids, not both");
  }
  b.ids.reserve(ids->size());
  for (const auto& id : *ids) {
    auto v = ReadId(id, "ids");
    if (!v) return std::unexpected(v.error());
    b.ids.push_back(*v);
  }
  return {};
}

}  // namespace

std::expected<IdBatch, std::string> DecodeBatch(std::string_view json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::unexpected("not a JSON object");
  IdBatch b;
  if (auto r = DecodeTagAndMode(j, b); !r) return std::unexpected(r.error());
  const bool range = b.mode == IdBatch::Mode::kSegment && !j.contains("ids");
  if (auto r = range ? DecodeRange(j, b) : DecodeList(j, b); !r) {
    return std::unexpected(r.error());
  }
  return b;
}

}  // namespace kleaf
