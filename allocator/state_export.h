// What `kleaf state export` and `kleaf state import` do with a cluster: read every live tag record
// of the state topic, and republish tag records through the allocators.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/cluster.h"
#include "base/error.h"
#include "kafka/client.h"
#include "state/records.h"

namespace kleaf::allocator {

// Every live tag record of the state topic, read to the last stable offset of each partition
// (records of one tag merged with MergeRestored), by tag.
[[nodiscard]] Result<std::map<std::string, state::TagRecord>> ReadAllTags(
    const kafka::Properties& props, const ClusterTopics& topics);

struct ImportCounts {
  int64_t raised = 0;  // max_id set to the record's plus the bump
  int64_t kept = 0;    // the live max_id was higher already (kFailedPrecondition): kept
  int failed = 0;      // reported on `errors`, one line each
};
// Sets each record's step, description and max_id + `bump` through `allocator` (PutTag), one tag
// at a time, then deletes the tags the records mark deleted. Blocks until each call is answered.
ImportCounts ImportTags(Allocator& allocator, const std::vector<state::TagRecord>& records,
                        int64_t bump, std::ostream& errors);

}  // namespace kleaf::allocator
