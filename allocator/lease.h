// The rules of sequence lease records (docs/architecture.md, "I5 with a lease", R3 and R4): which
// of p's lease records is the newest, what a restore, the rewrite and the store's copy keep of
// them, and how long a new owner waits before it answers p's sequence operations. Pure: the
// restore, the store and the owner call these with what they read (cluster/restore.cc,
// cluster/allocator_node.cc; allocator/lease_clock.h has the clocks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "state/lease_record.h"

namespace kleaf::allocator {

// A lease record of p where it was found: its offset in state partition p, and the largest
// lease_ms among the records of its generation found with it (R3: carried with the newest record,
// because the store keeps one record per key and compaction drops the older ones).
struct FoundLease {
  state::LeaseRecord record;
  int64_t offset = -1;
  int64_t generation_lease_ms = 0;
};

// R3's order: by generation, then by offset. Offset alone is not enough: a fenced producer can
// still append to p after the records of the owner that fenced it.
bool IsNewer(const FoundLease& a, const FoundLease& b);

// `found` merged into what was kept (nothing, or the newest so far): the newer of the two in R3's
// order, with the largest lease_ms of its generation among both. The restore merges the records
// it reads and the store's copy, the rewrite writes the result, and the store's copy keeps it.
FoundLease MergeLease(const std::optional<FoundLease>& kept, const FoundLease& found);

// Whether `later`, read after `kept` in the log, has a lower generation than one read before it.
// Among committed records this protocol never does that (A4): the restore refuses to serve p's
// sequences; in a tail past a transaction without an outcome it is a fenced producer's append
// (A3), counted, and R3's order keeps it from being the newest.
bool GoesBack(const FoundLease& kept, const state::LeaseRecord& later);

// This process's memory of p from when it last owned it (R7): the generation it held, whether a
// `held` record of that generation committed, and whether its own wait had ended when it
// released p. A restarted process has none.
struct HeldBefore {
  uint64_t generation = 0;
  bool held_committed = false;
  bool wait_ended = false;
};

// The row of R4's table a takeover waits by (the label of
// kleaf_sequence_takeover_waits_total{row}).
enum class WaitRow { kNone, kReleased, kOwn, kOther };
const char* WaitRowName(WaitRow row);

struct TakeoverWait {
  WaitRow row = WaitRow::kNone;
  int64_t lease_w_ms = 0;   // L_w: the wait is L_w·(1+ρ) + δ of W (allocator/lease_clock.h)
  uint64_t generation = 1;  // this owner's: one more than the newest record's, or 1
};

// R4's table, for the newest lease record the restore found (`newest`; the log past the applied
// offset merged with the store's copy, which RestorePartition has made complete: a copy behind its
// applied offset is read again). No record gives L_w = 0: none was ever committed
// (docs/architecture.md, (d) "None"). `holder` is this process's token, `before`
// its memory of p, `own_lease_ms` its L.
TakeoverWait PlanTakeoverWait(const std::optional<FoundLease>& newest, const std::string& holder,
                              const std::optional<HeldBefore>& before, int64_t own_lease_ms);

// The lease_ms an owner writes in its records (R3): its own L once its wait is over, the larger of
// L and its wait's L_w while the wait runs, so that an owner fencing it waits out what it waited.
int64_t RecordLeaseMs(int64_t own_lease_ms, const TakeoverWait& wait, bool wait_over);

}  // namespace kleaf::allocator
