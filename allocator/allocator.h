// The asynchronous interface between gateways (and producers) and allocators: get a segment of a
// tag, administer tags, lease a snowflake worker id. Implemented in-process (LocalAllocator) and,
// in the cluster shape, over Kafka (cluster/allocator_client.h); the wire format stays behind it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "allocator/allocation.h"
#include "allocator/sequences.h"
#include "allocator/worker_registry.h"
#include "allocator/workers.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// Every method returns at once and completes `done` exactly once, on a thread of the
// implementation's choosing (never the caller's I/O thread for blocking work). The worker
// registry's four methods come from WorkerRegistry.
class Allocator : public WorkerRegistry {
 public:
  // A new segment of `tag`; `step` is the size the caller would like (0: the tag's own step).
  virtual void AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) = 0;
  // Live (not deleted) tags, ordered by name.
  virtual void ListTags(Callback<std::vector<state::TagRecord>> done) = 0;
  virtual void GetTag(std::string tag, Callback<state::TagRecord> done) = 0;
  // Creates or updates; answers the record as stored.
  virtual void PutTag(std::string tag, TagUpdate update, Callback<state::TagRecord> done) = 0;
  // Marks the tag deleted (its max_id is kept); answers the record as it was.
  virtual void DeleteTag(std::string tag, Callback<state::TagRecord> done) = 0;

  // Sequence spaces (allocator/sequences.h; docs/architecture.md, I5), administered like tags.
  virtual void ListSpaces(Callback<std::vector<state::SpaceRecord>> done) = 0;
  virtual void GetSpace(std::string space, Callback<state::SpaceRecord> done) = 0;
  virtual void PutSpace(std::string space, SpaceUpdate update,
                        Callback<state::SpaceRecord> done) = 0;
  virtual void DeleteSpace(std::string space, Callback<state::SpaceRecord> done) = 0;
  // The next value of each key (1 to kMaxSeqKeys of them), in order: each strictly above every
  // value answered for its key before (I5).
  virtual void NextSeq(std::string space, std::vector<uint64_t> keys,
                       Callback<std::vector<uint64_t>> done) = 0;
  // The highest value answered for `key`, never below one answered before.
  virtual void CurrentSeq(std::string space, uint64_t key, Callback<uint64_t> done) = 0;
  // Raises the maximum of section `section` (of `section_size` keys) of `space` to `max_seq`,
  // never lowering it, and makes every key of it continue above (op::RaiseSection: what
  // `kleaf state import` restores); answers the maximum after it.
  virtual void RaiseSection(std::string space, uint64_t section, int64_t section_size,
                            uint64_t max_seq, Callback<uint64_t> done) = 0;
};

}  // namespace kleaf::allocator
