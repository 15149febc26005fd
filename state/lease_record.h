// The sequence lease record of one state partition (docs/architecture.md, "I5 with a lease", R3):
// the key `lse/<p>` of partition p, written by the partition's owner when its lease begins, is
// renewed by a lease-only transaction, and is released; read back by the next owner's restore to
// size its takeover wait (R4). Its rules are in allocator/lease.h; the owner's side (writing,
// renewing, releasing) is cluster/allocator_node.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace kleaf::state {

enum class LeaseState { kHeld, kReleased };

struct LeaseRecord {
  // One more than the highest generation among the lease records the owner's restore found, or 1.
  uint64_t generation = 0;
  // A random token its process drew at start and keeps in memory only: a process recognises its
  // own records by it (R4's third row); a restarted process draws another.
  std::string holder;
  std::string node;  // the node id, for operators
  // The owner's L, or while its own takeover wait runs, the larger of L and that wait's L_w.
  int64_t lease_ms = 0;
  bool waited = false;  // whether the writer's own takeover wait had ended
  LeaseState state = LeaseState::kHeld;
};

// Decoding refuses a generation below 1, a negative lease_ms and an unknown state as corrupt
// (kInternal).
std::string EncodeLease(const LeaseRecord& r);
[[nodiscard]] Result<LeaseRecord> DecodeLease(std::string_view json);
// Key of partition p's lease record: "lse/<p>".
std::string LeaseKey(int32_t partition);
// Whether a state-topic key is a lease record's: readers of the state topic that show or export
// records (state export, replay's counts) skip them, as they skip requests_offset/<p>.
bool IsLeaseKey(std::string_view key);

}  // namespace kleaf::state
