// What `kleaf state import` does in either shape: tag records (an export, or a Leaf dump)
// republished through an Allocator with their max_id raised.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "allocator/allocator.h"
#include "state/records.h"

namespace kleaf::allocator {

struct ImportCounts {
  int64_t raised = 0;  // max_id set to the record's plus the bump
  int64_t kept = 0;    // the live max_id was as high or higher already: kept
  int failed = 0;      // reported on `errors`, one line each
};
// Sets each record's step, description and max_id + `bump` through `allocator` (PutTag), one tag
// at a time, then deletes the tags the records mark deleted. Blocks until each call is answered.
ImportCounts ImportTags(Allocator& allocator, const std::vector<state::TagRecord>& records,
                        int64_t bump, std::ostream& errors);

}  // namespace kleaf::allocator
