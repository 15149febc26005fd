// A consumer-group member: rebalances as events, pause/resume, commits with a deadline and an
// outcome.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kafka/log.h"
#include "kafka/message.h"

namespace kleaf::kafka {

// A consumer-group member. Rebalances are handled inside Poll and reported as events before any
// message of the new assignment: under the classic protocol (an eager assignor) an assignment is
// the member's whole set and a revocation gives up everything; under the consumer protocol
// (KIP-848) the broker hands partitions over incrementally: an assignment adds partitions, a
// revocation names the ones given up, the others are fetched on. Not thread-safe.
class GroupConsumer {
 public:
  struct Event {
    enum class Kind { kMessage, kAssigned, kRevoked, kError, kNone };
    Kind kind = Kind::kNone;
    Message message;                         // kMessage
    std::vector<TopicPartition> partitions;  // kAssigned / kRevoked
    // kRevoked: the member lost them (its session expired, it was fenced or fell out of the
    // group) rather than handing them over in a rebalance it takes part in.
    bool lost = false;
    std::string error;                       // kError
  };

  // Where the fetch of a newly assigned partition starts.
  enum class Start {
    // The group's committed offset (auto.offset.reset when there is none), as any consumer.
    kCommitted,
    // Nowhere: a newly assigned partition is not fetched until the owner seeks it, to a position
    // it keeps itself. No librdkafka lookup stands between an assignment and its fetch, as one
    // would for a logical start: librdkafka (2.8, still 2.14.2: GroupConsumerTest.
    // APartitionLeftUnfetchedByAFailedOffsetFetchIsFetchedAgainAfterRestart shows it) leaves a
    // partition assigned but never fetched when its committed-offset fetch fails
    // (rdkafka_assignment.c keeps it out of its pending list "until the application unassigns
    // it"), and undoes a seek made while a lookup of its end is in flight (the lookup, answered
    // late, is made again and the fetch goes there).
    kSought,
  };

  // `log` receives this consumer's librdkafka log lines; empty: the sink of SetLogSink, if any.
  // `props` may name "group.protocol": "classic" (the default), "consumer" (KIP-848; the
  // classic-only properties session.timeout.ms, heartbeat.interval.ms and
  // partition.assignment.strategy are then left out: the broker decides them) or "auto": the
  // consumer protocol, and the classic one for the rest of the handle's life once the brokers
  // refuse it (Poll then reports a kError saying so, and a kRevoked of whatever was held).
  [[nodiscard]] static Result<std::unique_ptr<GroupConsumer>> Create(
      const Properties& props, const std::vector<std::string>& topics, LogSink log = nullptr,
      Start start = Start::kCommitted);
  ~GroupConsumer();

  Event Poll(std::chrono::milliseconds timeout);
  // Makes a Poll that waits (now or next) return at once with nothing. Safe from any thread.
  void Wake();
  // The protocol the member runs now: "classic" or "consumer".
  std::string Protocol() const;
  // The committed offsets of `partitions` (offset -1001 when none).
  [[nodiscard]] Result<std::vector<TopicPartition>> Committed(
      const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout);
  // Moves the fetch of an assigned partition. Code::kFailedPrecondition when the partition is
  // not assigned to this member, or (Start::kCommitted) its fetch has not started or is
  // stopping: transient while librdkafka starts an assignment (it waits for commits in flight),
  // for good when the start was lost (Restart). Under Start::kCommitted a seek made while the
  // partition's start is still being looked up (no committed offset: auto.offset.reset) may be
  // undone by that lookup. Under Start::kSought the first seek starts the fetch, and every seek
  // is an assignment of absolute positions that nothing undoes: the other fetched partitions
  // start again where the last message polled (or the last seek) left them, what was fetched of
  // them and not yet polled is dropped and fetched again. A message of the sought partition that
  // Poll held back behind a rebalance event is dropped too: the partition's next message is the
  // one at `position`.
  [[nodiscard]] Result<void> Seek(const TopicPartition& position,
                                  std::chrono::milliseconds timeout);
  // Starts the fetch of every assigned partition again, the only way librdkafka starts a
  // partition whose start was lost: the assignment is replaced by itself, each partition from
  // where Start says (Start::kSought: each sought partition where Seek describes). Messages
  // fetched and not yet polled are dropped; an application's pauses are lifted.
  [[nodiscard]] Result<void> Restart();
  // A commit on its way. Its outcome comes once, through Wait. Dropping it does not cancel the
  // commit (librdkafka goes on with it); it must not outlive its GroupConsumer.
  class PendingCommit {
   public:
    struct Outcome {
      bool committed = false;
      // Not committed, but the request may have reached the broker (a local timeout, a broken
      // connection): it may still be applied.
      bool may_land = false;
      std::string error;
    };
    ~PendingCommit();
    PendingCommit(const PendingCommit&) = delete;
    PendingCommit& operator=(const PendingCommit&) = delete;
    // The outcome, waiting up to `timeout` for it; nullopt while it is unknown.
    std::optional<Outcome> Wait(std::chrono::milliseconds timeout);

   private:
    friend class GroupConsumer;
    struct Queue;  // group_consumer.cc: the commit's librdkafka queue
    explicit PendingCommit(std::unique_ptr<Queue> queue);
    std::unique_ptr<Queue> queue_;
  };
  // Starts committing `offsets` (each the next offset to read). The broker checks the member's
  // generation: a member that was dropped from the group gets an error.
  [[nodiscard]] Result<std::unique_ptr<PendingCommit>> StartCommit(
      const std::vector<TopicPartition>& offsets);
  // StartCommit and Wait up to `timeout`. On a timeout the commit may still land later (callers
  // must treat that as "not claimed", and see PendingCommit for how to know when it is settled).
  [[nodiscard]] Result<void> Commit(const std::vector<TopicPartition>& offsets,
                                    std::chrono::milliseconds timeout);
  // The partitions the group assigned to this member right now, fetched or not (rebalance
  // events still queued for Poll may be older).
  std::vector<TopicPartition> Assignment();
  // Stops / restarts fetching `partitions`. Only partitions this consumer paused are resumed
  // (resuming a partition that was never paused restarted it from a stale position in
  // librdkafka 2.0.2; a resume of nothing is pointless in any version, so the check stays), and
  // a pause never outlives the assignment: on revocation the paused partitions are resumed
  // before they are given up (librdkafka keeps an application's pause across a reassignment,
  // which would leave a partition unread for good).
  [[nodiscard]] Result<void> Pause(const std::vector<TopicPartition>& partitions);
  [[nodiscard]] Result<void> Resume(const std::vector<TopicPartition>& partitions);
  // Leaves the group, waiting up to `timeout` (librdkafka's close waits for the coordinator's
  // answers, up to its request timeouts, and 2.0.2's could hang for good after a lost
  // partition); past it the handle is destroyed without a clean leave (the
  // coordinator drops the member at its session timeout): librdkafka still waits for commits in
  // flight, bounded by socket.timeout.ms (or session.timeout.ms while the coordinator is
  // unknown). False in that case.
  bool Close(std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));

  struct Impl;

 private:
  friend class TxnProducer;
  explicit GroupConsumer(std::unique_ptr<Impl> impl);
  // After a fatal error of the handle (librdkafka drops the assignment without a rebalance
  // event): a new handle (under the classic protocol when "auto" met a coordinator refusing the
  // consumer one), a kRevoked (lost) of what was held queued, and the kError that says so; a
  // reopening that failed is tried again. kNone when there was nothing to do.
  Event RecoverIfFatal();
  [[nodiscard]] Result<void> SeekNow(const TopicPartition& position,
                                     std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::kafka
