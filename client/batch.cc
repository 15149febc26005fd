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

}  // namespace

int64_t IdBatch::size() const {
  return mode == Mode::kSegment ? end - start : static_cast<int64_t>(ids.size());
}

int64_t IdBatch::at(int64_t i) const { return mode == Mode::kSegment ? start + i : ids[i]; }

std::string_view ModeName(IdBatch::Mode mode) {
  return mode == IdBatch::Mode::kSegment ? "segment" : "snowflake";
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
  if (batch.mode == IdBatch::Mode::kSegment) {
    j["start"] = std::to_string(batch.start);
    j["end"] = std::to_string(batch.end);
  } else {
    Json ids = Json::array();
    for (int64_t id : batch.ids) ids.push_back(std::to_string(id));
    j["ids"] = std::move(ids);
  }
  return j.dump();
}

std::expected<IdBatch, std::string> DecodeBatch(std::string_view json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::unexpected("not a JSON object");
  IdBatch b;
  auto tag = j.find("tag");
  if (tag == j.end() || !tag->is_string() || tag->get_ref<const std::string&>().empty()) {
    return std::unexpected("tag: missing or not a non-empty string");
  }
  b.tag = tag->get<std::string>();
  auto mode = j.find("mode");
  if (mode == j.end() || !mode->is_string()) return std::unexpected("mode: missing");
  if (*mode == "segment") {
    b.mode = IdBatch::Mode::kSegment;
    if (!j.contains("start") || !j.contains("end")) return std::unexpected("segment: start and end required");
    auto start = ReadId(j["start"], "start");
    if (!start) return std::unexpected(start.error());
    auto end = ReadId(j["end"], "end");
    if (!end) return std::unexpected(end.error());
    if (*end <= *start) return std::unexpected("segment: end must be greater than start");
    b.start = *start;
    b.end = *end;
  } else if (*mode == "snowflake") {
    b.mode = IdBatch::Mode::kSnowflake;
    auto ids = j.find("ids");
    if (ids == j.end() || !ids->is_array() || ids->empty()) {
      return std::unexpected("ids: missing or not a non-empty array");
    }
    b.ids.reserve(ids->size());
    for (const auto& id : *ids) {
      auto v = ReadId(id, "ids");
      if (!v) return std::unexpected(v.error());
      b.ids.push_back(*v);
    }
  } else {
    return std::unexpected("mode: unknown \"" + mode->get<std::string>() + "\" (segment or snowflake)");
  }
  return b;
}

}  // namespace kleaf
