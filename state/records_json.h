// A tag, space or section record as a JSON object, for a codec that carries records inside JSON
// documents of its own (cluster/wire.cc), so that a record is never encoded to text only to be
// parsed back. EncodeTag and DecodeTag (records.h) are these objects as text, and so on. The one
// kleaf header that names a third-party type (nlohmann::json, declared only): include it from .cc
// files, never from a header.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::state {

nlohmann::json TagToJson(const TagRecord& r);
[[nodiscard]] Result<TagRecord> TagFromJson(const nlohmann::json& j);
nlohmann::json SpaceToJson(const SpaceRecord& r);
[[nodiscard]] Result<SpaceRecord> SpaceFromJson(const nlohmann::json& j);
nlohmann::json SectionToJson(const SectionRecord& r);
[[nodiscard]] Result<SectionRecord> SectionFromJson(const nlohmann::json& j);

}  // namespace kleaf::state
