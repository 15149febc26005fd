// The records kleaf persists, and their JSON encoding (shared by RocksDB and the state topic).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace kleaf::state {

// How a tag's segment counters become the IDs clients get (allocator/id_format.h): as they are,
// through a keyed permutation of the positive int63 range, or behind an hour prefix.
enum class IdMode { kPlain, kObfuscated, kObfuscatedTime };
// "plain", "obfuscated", "obfuscated_time".
const char* IdModeName(IdMode mode);
[[nodiscard]] Result<IdMode> ParseIdMode(std::string_view name);

// One business tag. Invariant: every ID below `max_id` may have been handed out; the next segment
// of this tag starts at `max_id` or above. `max_id` never decreases, not even across delete.
struct TagRecord {
  std::string tag;
  int64_t max_id = 1;
  int64_t step = 1000;  // the tag's minimum (configured) step
  std::string description;
  int64_t update_time_ms = 0;
  bool deleted = false;  // deleted tags keep max_id so a re-created tag continues above it
  // Set once: a tag's mode only ever leaves kPlain, and then id_key and id_base never change
  // (deleted tags keep them too), so that no two segments of the tag map to the same ID.
  IdMode id_mode = IdMode::kPlain;
  // The permutation's secret, 32 hex digits; empty for kPlain. Never served by an API or logged:
  // only the state topic, RocksDB, allocator replies and state export files carry it.
  std::string id_key = {};
  // max_id when the mode was set: every plain ID of the tag is below it, every permuted one above.
  int64_t id_base = 0;
};

// One snowflake worker id in the registry. Invariant (docs/architecture.md, "Worker-id registry
// (I3 in the cluster)"): at most one node holds an unexpired lease on an id, and a new holder
// issues no timestamp at or before the previous holders' reported timestamps and lease ends.
struct WorkerRecord {
  int64_t worker_id = 0;
  std::string node_id;            // the last holder's node.id
  int64_t lease_until_ms = 0;     // allocator wall clock; expired when <= now
  int64_t last_timestamp_ms = 0;  // the newest timestamp any holder reported
  // The last holder's process: a random token each process draws at start. A node id is a name,
  // not an identity (two processes may share one); only this holder may renew or release.
  // Empty in records written before holders existed.
  std::string holder = {};
};

std::string EncodeTag(const TagRecord& r);
[[nodiscard]] Result<TagRecord> DecodeTag(std::string_view json);

// Store key of a tag record: "seg/<tag>".
std::string TagKey(std::string_view tag);

std::string EncodeWorker(const WorkerRecord& r);
[[nodiscard]] Result<WorkerRecord> DecodeWorker(std::string_view json);
// Store key of a worker record: "wrk/<id>".
std::string WorkerKey(int64_t worker_id);

}  // namespace kleaf::state
