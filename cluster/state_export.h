// What `kleaf state export` reads of a cluster: every live tag, space and section record of the
// state topic (the import goes through an Allocator: allocator/import.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "cluster/topics.h"
#include "kafka/client.h"
#include "state/export_file.h"
#include "state/records.h"

namespace kleaf::cluster {

// Every tag record (records of one tag merged with MergeRestored), every space record (the last of
// each space) and every section record (the highest max_seq of each section) of the state topic,
// read to the last stable offset of each partition; each kind ordered by name (sections by space,
// then section). Deleted tags and spaces are kept.
[[nodiscard]] Result<state::ExportContents> ReadAllState(const kafka::Properties& props,
                                                         const ClusterTopics& topics);

}  // namespace kleaf::cluster
