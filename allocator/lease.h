// The rules of sequence lease records (docs/architecture.md, "I5 with a lease", R3 and R4): which
// of p's lease records is the newest, what a restore, the rewrite and the store's copy keep of
// them, and how long a new owner waits before it answers p's sequence operations. Pure: the
// restore, the store and the owner call these with what they read (cluster/restore.cc,
// cluster/allocator_node.cc; allocator/lease_clock.h has the clocks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "allocator/lease_clock.h"
#include "base/mutex.h"
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

// R1 (i) to (iii), R2, R5's mark and R9's drop for one served partition: its lease count, its
// anchor (the reading taken just before the first commit call of the last transaction that began
// or renewed its lease) and whether a `held` record of its generation ever committed. Each call
// takes p's lock, so a transaction's noted count, its commit's outcome and a mark or drop are
// ordered (docs/architecture.md, "I5 with a lease", R2).
class PartitionLease {
 public:
  explicit PartitionLease(uint64_t generation) : generation_(generation) {}

  uint64_t generation() const { return generation_; }
  // R2: noted when a transaction of p's producer begins; OnCommitEnded compares it.
  uint64_t NoteBegin() const;
  // What a transaction's end did to the lease.
  enum class Effect { kNone, kBegan, kRenewed };
  // R2: the transaction that noted `noted` ended. `before_commit` is the reading taken just before
  // its first commit call (nullopt: none could be taken), `committed` whether it returned
  // committed, `delivered` whether it delivered a record of its own (else librdkafka never asked
  // the coordinator), `carried_held` whether it held a `held` record of this generation. It begins
  // a lease only with a `held` record, renews one only while an anchor is held, and does neither
  // when a mark or drop came after `noted`.
  Effect OnCommitEnded(uint64_t noted, const std::optional<LeaseReading>& before_commit,
                       bool committed, bool delivered, bool carried_held);
  // R5's first step and R7 (`Mark`), R9 (`Drop`): the count moves on and the anchor is cleared, so
  // nothing open or in flight begins or renews a lease any more. Whether a lease was held.
  bool Mark();
  // R1 (i) to (iii) from a reading `now` taken inside p's lock: whether a value may be computed.
  enum class Verdict { kHeld, kNoLease, kExpired, kClockEvent };
  Verdict Check(const LeaseReading& now, const LeaseTiming& own) const;
  // The clock events since the anchor (none when no lease is held).
  ClockEvents EventsSinceAnchor(const LeaseReading& now) const;
  bool Held() const;
  // H since the anchor; nullopt when no lease is held.
  std::optional<int64_t> AgeNs(const LeaseReading& now) const;
  // Whether a `held` record of this generation ever returned committed (R5, R7).
  bool HeldCommitted() const;

 private:
  const uint64_t generation_;
  mutable Mutex mu_;
  uint64_t count_ KLEAF_GUARDED_BY(mu_) = 0;
  std::optional<LeaseReading> anchor_ KLEAF_GUARDED_BY(mu_);
  bool held_committed_ KLEAF_GUARDED_BY(mu_) = false;
};

}  // namespace kleaf::allocator
