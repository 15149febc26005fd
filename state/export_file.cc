#include "state/export_file.h"

#include <exception>
#include <nlohmann/json.hpp>

namespace kleaf::state {

std::string EncodeExportFile(const std::string& topic, const std::string& exported_at,
                             const std::vector<TagRecord>& tags) {
  nlohmann::json out = {
      {"topic", topic}, {"exported_at", exported_at}, {"tags", nlohmann::json::array()}};
  for (const auto& r : tags) out["tags"].push_back(nlohmann::json::parse(EncodeTag(r)));
  return out.dump(2) + "\n";
}

Result<std::vector<TagRecord>> DecodeExportFile(std::istream& in) {
  std::vector<TagRecord> records;
  try {
    auto j = nlohmann::json::parse(in);
    for (const auto& t : j.at("tags")) {
      auto r = DecodeTag(t.dump());
      if (!r) return std::unexpected(r.error());
      records.push_back(*r);
    }
  } catch (const std::exception& e) {
    return Fail(Code::kInvalidArgument, std::string("not an export file: ") + e.what());
  }
  return records;
}

}  // namespace kleaf::state
