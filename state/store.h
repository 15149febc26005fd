// The local durable store: tag records and named 64-bit values in RocksDB. Every write is synced
// but one: the cluster allocator's view after a committed transaction (AllocatorNode::OnCommitted,
// Write with sync = false), whose records the state topic already holds durably; a crash that loses
// it only makes the next takeover restore more from the topic.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::state {

// The RocksDB version kleaf runs with (e.g. "7.8.3").
std::string RocksDbVersion();

// Owned by the process's wiring code; thread-safe; every call may block on disk.
class Store {
 public:
  // Opens (creating if missing) the RocksDB directory at `path`. Fails with a clear message if
  // another process holds it.
  [[nodiscard]] static Result<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  [[nodiscard]] Result<std::optional<TagRecord>> GetTag(std::string_view tag);
  // Synced: durable when this returns.
  [[nodiscard]] Result<void> PutTag(const TagRecord& record);
  // All tag records, deleted ones included, ordered by tag.
  [[nodiscard]] Result<std::vector<TagRecord>> ListTags();

  [[nodiscard]] Result<std::optional<WorkerRecord>> GetWorker(int64_t worker_id);
  [[nodiscard]] Result<std::vector<WorkerRecord>> ListWorkers();

  // Sequence spaces (allocator/sequences.h) and the persisted maxima of their sections.
  [[nodiscard]] Result<std::optional<SpaceRecord>> GetSpace(std::string_view space);
  // All space records, deleted ones included, ordered by name.
  [[nodiscard]] Result<std::vector<SpaceRecord>> ListSpaces();
  [[nodiscard]] Result<std::optional<SectionRecord>> GetSection(std::string_view space,
                                                                uint64_t section);
  // All section records (of deleted spaces too), ordered by space, then section.
  [[nodiscard]] Result<std::vector<SectionRecord>> ListSections();

  // A consistent copy of the whole store in `dir` (a RocksDB checkpoint: SST files hard-linked
  // when `dir` is on the same file system, copied otherwise), taken while the store serves. `dir`
  // must not exist (RocksDB creates it); it can be opened as a store of its own.
  [[nodiscard]] Result<void> Checkpoint(const std::string& dir);

  // What Write() stores atomically: records of every kind (state/records.h), named values and
  // named text (as PutValue and PutText store them).
  struct Batch : Records {
    std::vector<std::pair<std::string, int64_t>> values = {};
    std::vector<std::pair<std::string, std::string>> texts = {};
  };
  // Writes a batch atomically (one RocksDB write batch); synced if `sync`.
  [[nodiscard]] Result<void> Write(const Batch& batch, bool sync);

  // The unused rest of a segment a gateway kept across a graceful restart (docs/architecture.md,
  // "The rest of a segment across a graceful restart"; Leaf discards it). `scope` names the ID
  // space it belongs to ("standalone", or the cluster's topic prefix), so a state directory moved
  // to another cluster never serves it there.
  struct SegmentRest {
    std::string scope;
    std::string tag;
    int64_t start = 0;
    int64_t end = 0;
  };
  // Stores `rests` (added to any kept before); synced.
  [[nodiscard]] Result<void> PutSegmentRests(const std::vector<SegmentRest>& rests);
  // Returns every kept rest and deletes them all in the same synced write, so a rest is handed
  // back at most once: after a crash while serving it, what was left of it is a gap.
  [[nodiscard]] Result<std::vector<SegmentRest>> TakeSegmentRests();

  [[nodiscard]] Result<std::optional<int64_t>> GetValue(std::string_view name);
  // Synced: durable when this returns.
  [[nodiscard]] Result<void> PutValue(std::string_view name, int64_t value);
  // Named text (e.g. which state topic this store is a view of); synced like PutValue.
  [[nodiscard]] Result<std::optional<std::string>> GetText(std::string_view name);
  [[nodiscard]] Result<void> PutText(std::string_view name, std::string_view text);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::state
