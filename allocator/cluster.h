// The Kafka topics of a kleaf cluster (DESIGN.md, "Topics") and their creation.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "base/error.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::allocator {

inline constexpr char kCorrelationHeader[] = "kleaf-correlation-id";
inline constexpr char kReplyPartitionHeader[] = "kleaf-reply-partition";

struct ClusterTopics {
  std::string requests;  // key = tag; P partitions
  std::string state;     // key = seg/<tag>; compacted; P partitions, co-partitioned with requests
  std::string replies;   // key = node id; R partitions
  int32_t partitions = 12;
  int32_t reply_partitions = 12;
  std::string ids;       // key = tag; ID batches for event-driven consumers; P partitions

  static ClusterTopics For(const std::string& prefix, int32_t partitions, int32_t reply_partitions);
  // The requests/state partition that owns `tag`.
  int32_t PartitionOf(std::string_view tag) const { return kafka::PartitionFor(tag, partitions); }
  // transactional.id of the owner of partition `p`.
  std::string TransactionalId(int32_t p) const { return requests + ".owner." + std::to_string(p); }
};

// Creates the missing topics (state compacted; ids only when named) and checks the partition counts of existing ones.
Result<void> EnsureClusterTopics(const kafka::Properties& props, const ClusterTopics& topics,
                                 int16_t replication_factor, std::chrono::milliseconds timeout);

// A record restored from the state topic, merged with what the store already holds: max_id never
// goes down (a record of a recreated or truncated topic cannot undo reservations the store saw).
state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming);

struct RestoreResult {
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;  // next offset to apply
};

// Applies state-topic partition `p` from the store's applied offset up to the last stable offset
// into the store (with MergeRestored), and records the new applied offset.
Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader, state::Store& store,
                                       const ClusterTopics& topics, int32_t p,
                                       std::chrono::milliseconds timeout);

// Name of the store value holding the next state-topic offset to apply for partition `p`.
std::string AppliedOffsetKey(int32_t p);

}  // namespace kleaf::allocator
