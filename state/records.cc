#include "state/records.h"

#include <nlohmann/json.hpp>

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

}  // namespace kleaf::state
