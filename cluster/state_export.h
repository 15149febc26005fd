// What `kleaf state export` reads of a cluster: every live tag record of the state topic (the
// import goes through an Allocator: allocator/import.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "base/error.h"
#include "cluster/topics.h"
#include "kafka/client.h"
#include "state/records.h"

namespace kleaf::cluster {

// Every live tag record of the state topic, read to the last stable offset of each partition
// (records of one tag merged with MergeRestored), by tag.
[[nodiscard]] Result<std::map<std::string, state::TagRecord>> ReadAllTags(
    const kafka::Properties& props, const ClusterTopics& topics);

}  // namespace kleaf::cluster
