#include "allocator/lease.h"

#include <algorithm>
#include <limits>

namespace kleaf::allocator {

bool IsNewer(const FoundLease& a, const FoundLease& b) {
  if (a.record.generation != b.record.generation) {
    return a.record.generation > b.record.generation;
  }
  return a.offset > b.offset;
}

FoundLease MergeLease(const std::optional<FoundLease>& kept, const FoundLease& found) {
  FoundLease f = found;
  f.generation_lease_ms = std::max(f.generation_lease_ms, f.record.lease_ms);
  if (!kept) return f;
  const bool found_is_newer = IsNewer(f, *kept);
  FoundLease newest = found_is_newer ? f : *kept;
  const FoundLease& other = found_is_newer ? *kept : f;
  newest.generation_lease_ms = std::max(newest.generation_lease_ms, newest.record.lease_ms);
  if (other.record.generation == newest.record.generation) {
    newest.generation_lease_ms =
        std::max({newest.generation_lease_ms, other.generation_lease_ms, other.record.lease_ms});
  }
  return newest;
}

bool GoesBack(const FoundLease& kept, const state::LeaseRecord& later) {
  return later.generation < kept.record.generation;
}

const char* WaitRowName(WaitRow row) {
  switch (row) {
    case WaitRow::kNone:
      return "none";
    case WaitRow::kReleased:
      return "released";
    case WaitRow::kOwn:
      return "own";
    case WaitRow::kOther:
      return "other";
  }
  return "other";
}

TakeoverWait PlanTakeoverWait(const std::optional<FoundLease>& newest, const std::string& holder,
                              const std::optional<HeldBefore>& before, int64_t own_lease_ms) {
  // No lease record: none was ever committed on p (the store's copy is complete, RestorePartition),
  // and a lease begins only with one, so no earlier owner can hold a lease.
  if (!newest) return TakeoverWait{WaitRow::kNone, 0, 1};
  const state::LeaseRecord& r = newest->record;
  // Saturating: a generation at the top (only a foreign writer makes one) stays there.
  const uint64_t generation =
      r.generation == std::numeric_limits<uint64_t>::max() ? r.generation : r.generation + 1;
  if (r.state == state::LeaseState::kReleased) {
    return TakeoverWait{WaitRow::kReleased, 0, generation};
  }
  // This process's own lease, committed in the generation it last held and waited out before it
  // let p go: nothing older can still serve (R4's third row, R7).
  if (before && !holder.empty() && r.holder == holder && r.generation == before->generation &&
      before->held_committed && before->wait_ended) {
    return TakeoverWait{WaitRow::kOwn, 0, generation};
  }
  const int64_t recorded = std::max(r.lease_ms, newest->generation_lease_ms);
  return TakeoverWait{WaitRow::kOther, std::max(own_lease_ms, recorded), generation};
}

int64_t RecordLeaseMs(int64_t own_lease_ms, const TakeoverWait& wait, bool wait_over) {
  return wait_over ? own_lease_ms : std::max(own_lease_ms, wait.lease_w_ms);
}

uint64_t PartitionLease::NoteBegin() const {
  MutexLock lock(mu_);
  return count_;
}

PartitionLease::Effect PartitionLease::OnCommitEnded(
    uint64_t noted, const std::optional<LeaseReading>& before_commit, bool committed,
    bool delivered, bool carried_held) {
  MutexLock lock(mu_);
  // An aborted, fenced, failed or unknown transaction never counts, nor one that never reached
  // the coordinator. A `held` record that committed counts for R5 and R7 whatever the count says:
  // it is in the log, and the next owner waits for it.
  if (!committed || !delivered) return Effect::kNone;
  if (carried_held) held_committed_ = true;
  // A mark or drop since the transaction began: it begins and renews nothing (R2).
  if (noted != count_ || !before_commit) return Effect::kNone;
  if (anchor_) {
    // Never moves back: a commit whose reading is older than the anchor's renews nothing.
    if (before_commit->monotonic_ns > anchor_->monotonic_ns) anchor_ = *before_commit;
    return Effect::kRenewed;
  }
  if (!carried_held) return Effect::kNone;  // only a `held` record begins a lease (R3)
  anchor_ = *before_commit;
  return Effect::kBegan;
}

bool PartitionLease::Mark() {
  MutexLock lock(mu_);
  ++count_;
  const bool held = anchor_.has_value();
  anchor_.reset();
  return held;
}

PartitionLease::Verdict PartitionLease::Check(const LeaseReading& now,
                                              const LeaseTiming& own) const {
  MutexLock lock(mu_);
  if (!anchor_) return Verdict::kNoLease;
  if (EventsBetween(*anchor_, now).EndsLease()) return Verdict::kClockEvent;
  if (HoldElapsedNs(*anchor_, now) >= HoldLimitNs(own)) return Verdict::kExpired;
  return Verdict::kHeld;
}

ClockEvents PartitionLease::EventsSinceAnchor(const LeaseReading& now) const {
  MutexLock lock(mu_);
  return anchor_ ? EventsBetween(*anchor_, now) : ClockEvents{};
}

bool PartitionLease::Held() const {
  MutexLock lock(mu_);
  return anchor_.has_value();
}

std::optional<int64_t> PartitionLease::AgeNs(const LeaseReading& now) const {
  MutexLock lock(mu_);
  if (!anchor_) return std::nullopt;
  return HoldElapsedNs(*anchor_, now);
}

bool PartitionLease::HeldCommitted() const {
  MutexLock lock(mu_);
  return held_committed_;
}

}  // namespace kleaf::allocator
