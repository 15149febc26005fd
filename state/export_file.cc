#include "state/export_file.h"

#include <exception>
#include <nlohmann/json.hpp>

#include "state/records_json.h"

namespace kleaf::state {

std::string EncodeExportFile(const std::string& topic, const std::string& exported_at,
                             const ExportContents& contents) {
  nlohmann::json out = {{"version", kExportFileVersion},     {"topic", topic},
                        {"exported_at", exported_at},        {"tags", nlohmann::json::array()},
                        {"spaces", nlohmann::json::array()}, {"sections", nlohmann::json::array()}};
  for (const auto& r : contents.tags) out["tags"].push_back(TagToJson(r));
  for (const auto& r : contents.spaces) out["spaces"].push_back(SpaceToJson(r));
  for (const auto& r : contents.sections) out["sections"].push_back(SectionToJson(r));
  return out.dump(2) + "\n";
}

namespace {

// Each element of the array `field` of `j` (none when it is absent: a version 1 file) decoded
// with `decode` into `out`.
template <typename Record, typename Decode>
[[nodiscard]] Result<void> ReadArray(const nlohmann::json& j, const char* field, Decode decode,
                                     std::vector<Record>& out) {
  if (!j.contains(field)) return {};
  for (const auto& element : j.at(field)) {
    auto r = decode(element);
    if (!r) return Fail(Code::kInvalidArgument, r.error().message);
    out.push_back(std::move(*r));
  }
  return {};
}

}  // namespace

Result<ExportContents> DecodeExportFile(std::istream& in) {
  ExportContents contents;
  try {
    auto j = nlohmann::json::parse(in);
    contents.version = j.value("version", 1);
    if (contents.version < 1 || contents.version > kExportFileVersion) {
      return Fail(Code::kInvalidArgument,
                  "export file version " + std::to_string(contents.version) +
                      " is not one this kleaf reads (1 to " + std::to_string(kExportFileVersion) +
                      "): import it with the kleaf that wrote it, or a newer one");
    }
    // "tags" is required: it tells an export file from other JSON.
    const auto& tags = j.at("tags");
    for (const auto& t : tags) {
      auto r = DecodeTag(t.dump());
      if (!r) return std::unexpected(r.error());
      contents.tags.push_back(*r);
    }
    if (auto r = ReadArray(j, "spaces", SpaceFromJson, contents.spaces); !r) {
      return std::unexpected(r.error());
    }
    if (auto r = ReadArray(j, "sections", SectionFromJson, contents.sections); !r) {
      return std::unexpected(r.error());
    }
  } catch (const std::exception& e) {
    return Fail(Code::kInvalidArgument, std::string("not an export file: ") + e.what());
  }
  return contents;
}

}  // namespace kleaf::state
