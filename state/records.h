// The records kleaf persists, and their JSON encoding (shared by RocksDB and the state topic).
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace kleaf::state {

// One business tag. Invariant: every ID below `max_id` may have been handed out; the next segment
// of this tag starts at `max_id` or above. `max_id` never decreases, not even across delete.
struct TagRecord {
  std::string tag;
  int64_t max_id = 1;
  int64_t step = 1000;  // the tag's minimum (configured) step
  std::string description;
  int64_t update_time_ms = 0;
  bool deleted = false;  // deleted tags keep max_id so a re-created tag continues above it
};

std::string EncodeTag(const TagRecord& r);
Result<TagRecord> DecodeTag(std::string_view json);

// Store key of a tag record: "seg/<tag>".
std::string TagKey(std::string_view tag);

}  // namespace kleaf::state
