// The group check of "Allocators of different versions" (docs/architecture.md): a net under the
// order of versions, by which an allocator holds a sequence lease only while every member of the
// allocators' group advertises that it waits out leases after its takeovers (kSeqWaitMark).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "kafka/topics.h"

namespace kleaf::cluster {

// The help of kleaf_sequence_lease_blocked{reason}, exported by SeqWaitCheck and AllocatorNode.
inline constexpr char kLeaseBlockedHelp[] =
    "1 while this allocator holds no sequence lease (a commit per batch instead): old_member, a "
    "member of the allocators' group does not advertise that it waits out leases (client id "
    "without ;seqwait=1: an older version); group_unchecked, the group could not be described "
    "since its membership last changed; clock_drift, the clock's frequency correction stayed "
    "above half of sequence.clock_drift_ppm for 10 minutes.";

// The suffix of the allocators' group member client.id that says the member waits out sequence
// leases after its takeovers (docs/architecture.md, "Allocators of different versions").
inline constexpr char kSeqWaitMark[] = ";seqwait=1";

// Describes the allocators' group on a thread of its own: soon after each Changed() (an assignment
// or a revocation on this node: the group's membership may have changed; nothing is described
// before the first), every `period`, and after `retry` while the last description after a change
// failed. Thread-safe.
//
// Verdicts: kAllWait when a description begun after the last Changed() found every member's client
// id ending in kSeqWaitMark; kOldMember when the newest description found a member without it
// (which would take partitions over without waiting out their leases); kUnchecked when no
// description has succeeded since the last change (Kafka did not answer, or refused; an answer
// without any member counts as a failure, since this node describes its group only as a member). A
// description that fails with no change since the last one leaves that one's verdict; failures are
// retried after `retry`, doubled at each failure up to `period`, and logged when their message
// changes. Metrics:
// kleaf_sequence_lease_blocked{reason="old_member"|"group_unchecked"} (1 while that verdict
// stands), kleaf_sequence_group_checks_total{outcome="ok"|"failed"}.
class SeqWaitCheck {
 public:
  using Describe = std::function<Result<std::vector<kafka::GroupMember>>()>;
  enum class Verdict { kAllWait, kOldMember, kUnchecked };

  SeqWaitCheck(Describe describe, std::chrono::milliseconds period,
               std::chrono::milliseconds retry);
  ~SeqWaitCheck();
  SeqWaitCheck(const SeqWaitCheck&) = delete;
  SeqWaitCheck& operator=(const SeqWaitCheck&) = delete;
  // Ends the thread (after a description in progress returns). Idempotent.
  void Stop();

  // The membership may have changed: kAllWait again only after a new description.
  void Changed();
  Verdict Now() const;
  // Nothing while the verdict is kAllWait; otherwise why not (Why()), read under one lock.
  std::optional<std::string> Blocked() const;
  // Whether the verdict is kAllWait, without a lock (for R1's hot path).
  bool AllWait() const { return all_wait_.load(std::memory_order_acquire); }
  // What the verdict rests on, for logs and refusals: the members without the mark, or the last
  // failure.
  std::string Why() const;
  std::string WhyLocked() const KLEAF_REQUIRES(mu_);
  // How many descriptions have ended (succeeded or failed); for tests.
  int64_t Descriptions() const;

 private:
  void Run();
  void Publish() KLEAF_REQUIRES(mu_);

  const Describe describe_;
  const std::chrono::milliseconds period_;
  const std::chrono::milliseconds retry_;
  mutable Mutex mu_;
  CondVar wake_;
  bool stop_ KLEAF_GUARDED_BY(mu_) = false;
  uint64_t changes_ KLEAF_GUARDED_BY(mu_) = 1;     // the start counts as one
  bool joined_ KLEAF_GUARDED_BY(mu_) = false;      // a Changed() came: this node is in the group
  uint64_t begun_last_ KLEAF_GUARDED_BY(mu_) = 0;  // the changes the last description began after
  uint64_t checked_ KLEAF_GUARDED_BY(mu_) = 0;     // the changes the last success began after
  // The last successful description's members without the mark (MembersThatDoNotWait).
  std::string old_members_ KLEAF_GUARDED_BY(mu_);
  std::string failure_ KLEAF_GUARDED_BY(mu_);  // the last description's error, if it failed
  int64_t descriptions_ KLEAF_GUARDED_BY(mu_) = 0;
  std::atomic<bool> all_wait_{false};  // Now() == kAllWait, set by Publish
  metrics::Gauge* blocked_old_;
  metrics::Gauge* blocked_unchecked_;
  metrics::Counter* ok_;
  metrics::Counter* failed_;
  std::thread thread_;
};

// The members of `members` whose client id lacks kSeqWaitMark, as "client id (host)" joined by
// ", "; empty when every one has it.
std::string MembersThatDoNotWait(const std::vector<kafka::GroupMember>& members);

}  // namespace kleaf::cluster
