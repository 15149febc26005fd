// The records kleaf persists, and their JSON encoding (shared by RocksDB and the state topic).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// One sequence space (docs/architecture.md, "I5: sequences only go up"): its keys are unsigned
// 64-bit integers, created by use and never stored one record per key; key k belongs to section
// k / section_size. `section_size` never changes once a space exists, not even across delete:
// keys would move to sections whose maxima do not cover their values.
struct SpaceRecord {
  std::string space;
  int64_t section_size = 100000;
  int64_t step = 10000;  // how far a section's max_seq is raised past the value that passed it
  std::string description;
  int64_t update_time_ms = 0;
  bool deleted = false;  // deleted spaces keep section_size; their sections keep max_seq
};

// The persisted maximum of one section of a space. Invariant: every value ever handed out for any
// key of the section is <= max_seq; max_seq never decreases. No record: 0.
struct SectionRecord {
  std::string space;
  uint64_t section = 0;
  // The space's section_size when written: an owner that is asked with another one maps keys to
  // sections differently and refuses (allocator/sequences.h).
  int64_t section_size = 0;
  uint64_t max_seq = 0;
};

std::string EncodeTag(const TagRecord& r);
[[nodiscard]] Result<TagRecord> DecodeTag(std::string_view json);

// Store key of a tag record: "seg/<tag>".
std::string TagKey(std::string_view tag);

std::string EncodeWorker(const WorkerRecord& r);
[[nodiscard]] Result<WorkerRecord> DecodeWorker(std::string_view json);
// Store key of a worker record: "wrk/<id>".
std::string WorkerKey(int64_t worker_id);

// Decoding refuses a section_size or step below 1 and a negative or fractional uint64 (a value
// nlohmann would otherwise convert silently) as corrupt: kInternal.
std::string EncodeSpace(const SpaceRecord& r);
[[nodiscard]] Result<SpaceRecord> DecodeSpace(std::string_view json);
// Store key of a space record: "spc/<space>".
std::string SpaceKey(std::string_view space);

std::string EncodeSection(const SectionRecord& r);
[[nodiscard]] Result<SectionRecord> DecodeSection(std::string_view json);
// Store key of a section record: "sec/<space>/<section>", the section in decimal. A space name
// has no '/' (tag rules), so the key names one section.
std::string SectionKey(std::string_view space, uint64_t section);

// Every kind of record an operation writes, one list per kind, in one place: an operation's
// effects (allocator::Effects), a batch's section raises appended to them, what an allocator
// produces into the state topic and stages, and what the store writes (Store::Batch). A new kind
// is added here, to KeyOf and Encode, and to ForEachRecord, and every writer takes it.
struct Records {
  std::vector<TagRecord> tags;
  std::vector<WorkerRecord> workers;
  std::vector<SpaceRecord> spaces = {};
  std::vector<SectionRecord> sections = {};

  bool empty() const {
    return tags.empty() && workers.empty() && spaces.empty() && sections.empty();
  }
  // Appends `more`'s records after this one's, kind by kind.
  void Append(Records more);
};

// A record's key (in the state topic and the store) and its encoding, by kind.
inline std::string KeyOf(const TagRecord& r) { return TagKey(r.tag); }
inline std::string KeyOf(const WorkerRecord& r) { return WorkerKey(r.worker_id); }
inline std::string KeyOf(const SpaceRecord& r) { return SpaceKey(r.space); }
inline std::string KeyOf(const SectionRecord& r) { return SectionKey(r.space, r.section); }
inline std::string Encode(const TagRecord& r) { return EncodeTag(r); }
inline std::string Encode(const WorkerRecord& r) { return EncodeWorker(r); }
inline std::string Encode(const SpaceRecord& r) { return EncodeSpace(r); }
inline std::string Encode(const SectionRecord& r) { return EncodeSection(r); }

// Calls `fn` with each record of `records`, kind by kind (tags, workers, spaces, sections), in
// list order; stops at, and returns, the first error `fn` returns.
template <typename Fn>
[[nodiscard]] Result<void> ForEachRecord(const Records& records, Fn&& fn) {
  for (const auto& r : records.tags)
    if (auto done = fn(r); !done) return done;
  for (const auto& r : records.workers)
    if (auto done = fn(r); !done) return done;
  for (const auto& r : records.spaces)
    if (auto done = fn(r); !done) return done;
  for (const auto& r : records.sections)
    if (auto done = fn(r); !done) return done;
  return {};
}

}  // namespace kleaf::state
