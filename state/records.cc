#include "state/records.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "state/records_json.h"

namespace kleaf::state {

const char* IdModeName(IdMode mode) {
  switch (mode) {
    case IdMode::kPlain:
      return "plain";
    case IdMode::kObfuscated:
      return "obfuscated";
    case IdMode::kObfuscatedTime:
      return "obfuscated_time";
  }
  return "plain";
}

Result<IdMode> ParseIdMode(std::string_view name) {
  for (IdMode m : {IdMode::kPlain, IdMode::kObfuscated, IdMode::kObfuscatedTime}) {
    if (name == IdModeName(m)) return m;
  }
  return Fail(
      Code::kInvalidArgument,
      "id_mode: expected plain, obfuscated or obfuscated_time, not '" + std::string(name) + "'");
}

std::string TagKey(std::string_view tag) { return "seg/" + std::string(tag); }

nlohmann::json TagToJson(const TagRecord& r) {
  nlohmann::json j = {{"tag", r.tag},
                      {"max_id", r.max_id},
                      {"step", r.step},
                      {"description", r.description},
                      {"update_time", r.update_time_ms},
                      {"deleted", r.deleted}};
  if (r.id_mode != IdMode::kPlain) {  // plain records stay as they were before id modes
    j["id_mode"] = IdModeName(r.id_mode);
    j["id_key"] = r.id_key;
    j["id_base"] = r.id_base;
  }
  return j;
}

std::string EncodeTag(const TagRecord& r) { return TagToJson(r).dump(); }

Result<TagRecord> TagFromJson(const nlohmann::json& j) {
  try {
    TagRecord r;
    r.tag = j.at("tag").get<std::string>();
    r.max_id = j.at("max_id").get<int64_t>();
    r.step = j.at("step").get<int64_t>();
    r.description = j.value("description", "");
    r.update_time_ms = j.value("update_time", int64_t{0});
    r.deleted = j.value("deleted", false);
    auto mode = ParseIdMode(j.value("id_mode", "plain"));
    if (!mode) return std::unexpected(mode.error());
    r.id_mode = *mode;
    if (r.id_mode != IdMode::kPlain) {
      r.id_key = j.at("id_key").get<std::string>();
      r.id_base = j.at("id_base").get<int64_t>();
    }
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt tag record: ") + e.what());
  }
}

Result<TagRecord> DecodeTag(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt tag record: ") + e.what());
  }
  return TagFromJson(j);
}

std::string EncodeWorker(const WorkerRecord& r) {
  nlohmann::json j{{"worker_id", r.worker_id},
                   {"node_id", r.node_id},
                   {"lease_until", r.lease_until_ms},
                   {"last_timestamp", r.last_timestamp_ms}};
  if (!r.holder.empty()) j["holder"] = r.holder;
  return j.dump();
}

Result<WorkerRecord> DecodeWorker(std::string_view json) {
  try {
    auto j = nlohmann::json::parse(json);
    return WorkerRecord{j.at("worker_id").get<int64_t>(), j.at("node_id").get<std::string>(),
                        j.at("lease_until").get<int64_t>(), j.at("last_timestamp").get<int64_t>(),
                        j.value("holder", std::string())};
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt worker record: ") + e.what());
  }
}

std::string WorkerKey(int64_t worker_id) { return "wrk/" + std::to_string(worker_id); }

namespace {

// nlohmann converts any number to any integer type without a word (-1 becomes 2^64 - 1, 2.5
// becomes 2), so the fields that must be exact are checked by kind first.
uint64_t UnsignedField(const nlohmann::json& j, const char* field) {
  const auto& v = j.at(field);
  if (!v.is_number_unsigned()) {
    throw std::invalid_argument(std::string(field) + ": not an unsigned 64-bit integer");
  }
  return v.get<uint64_t>();
}

// An int64 field that must be at least 1 (a divisor, a step).
int64_t PositiveField(const nlohmann::json& j, const char* field) {
  const auto& v = j.at(field);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
      v.get<int64_t>() < 1) {
    throw std::invalid_argument(std::string(field) + ": not a positive 64-bit integer");
  }
  return v.get<int64_t>();
}

[[nodiscard]] Result<nlohmann::json> Parse(std::string_view json, const char* what) {
  try {
    return nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt ") + what + " record: " + e.what());
  }
}

}  // namespace

std::string SpaceKey(std::string_view space) { return "spc/" + std::string(space); }

nlohmann::json SpaceToJson(const SpaceRecord& r) {
  return {{"space", r.space},
          {"section_size", r.section_size},
          {"step", r.step},
          {"description", r.description},
          {"update_time", r.update_time_ms},
          {"deleted", r.deleted}};
}

Result<SpaceRecord> SpaceFromJson(const nlohmann::json& j) {
  try {
    SpaceRecord r;
    r.space = j.at("space").get<std::string>();
    r.section_size = PositiveField(j, "section_size");
    r.step = PositiveField(j, "step");
    r.description = j.value("description", "");
    r.update_time_ms = j.value("update_time", int64_t{0});
    r.deleted = j.value("deleted", false);
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt space record: ") + e.what());
  }
}

std::string EncodeSpace(const SpaceRecord& r) { return SpaceToJson(r).dump(); }

Result<SpaceRecord> DecodeSpace(std::string_view json) {
  auto j = Parse(json, "space");
  if (!j) return std::unexpected(j.error());
  return SpaceFromJson(*j);
}

std::string SectionKey(std::string_view space, uint64_t section) {
  return "sec/" + std::string(space) + "/" + std::to_string(section);
}

nlohmann::json SectionToJson(const SectionRecord& r) {
  return {{"space", r.space},
          {"section", r.section},
          {"section_size", r.section_size},
          {"max_seq", r.max_seq}};
}

Result<SectionRecord> SectionFromJson(const nlohmann::json& j) {
  try {
    SectionRecord r;
    r.space = j.at("space").get<std::string>();
    r.section = UnsignedField(j, "section");
    r.section_size = PositiveField(j, "section_size");
    r.max_seq = UnsignedField(j, "max_seq");
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt section record: ") + e.what());
  }
}

std::string EncodeSection(const SectionRecord& r) { return SectionToJson(r).dump(); }

Result<SectionRecord> DecodeSection(std::string_view json) {
  auto j = Parse(json, "section");
  if (!j) return std::unexpected(j.error());
  return SectionFromJson(*j);
}

void Records::Append(Records more) {
  const auto append = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(tags, more.tags);
  append(workers, more.workers);
  append(spaces, more.spaces);
  append(sections, more.sections);
}

}  // namespace kleaf::state
