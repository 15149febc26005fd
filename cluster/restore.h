// A partition's state restored from the state topic into the store: what an allocator does after
// it fenced the previous owner and before it serves (docs/architecture.md, I1).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "cluster/topics.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::cluster {

// A record restored from the state topic, merged with what the store already holds: max_id never
// goes down (a record of a recreated or truncated topic cannot undo reservations the store saw).
state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming);

struct RestoreResult {
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;  // next offset to apply
  // The next offset of requests partition `p` to serve, as the last committed batch recorded it
  // (RequestsOffsetKey), or nullopt when no batch of this version was ever committed on p.
  std::optional<int64_t> requests_offset;
};

// Applies state-topic partition `p` from the store's applied offset up to the last stable offset
// into the store (with MergeRestored), and records the new applied offset and the requests offset
// the restored records carry.
[[nodiscard]] Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader,
                                                     state::Store& store,
                                                     const ClusterTopics& topics, int32_t p,
                                                     std::chrono::milliseconds timeout);

// Name of the store value holding the next state-topic offset to apply for partition `p`.
std::string AppliedOffsetKey(int32_t p);

// The consumed position of requests partition `p`: every batch's transaction puts a record with
// this key (in the state topic, partition p) and the next request offset as decimal text beside
// its state records and replies, so the position commits exactly with what it answered. The store
// keeps the last one under the same name. Other readers of the state topic skip the key.
std::string RequestsOffsetKey(int32_t p);

}  // namespace kleaf::cluster
