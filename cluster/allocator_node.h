// `kleaf allocator`: serves allocation requests from the Kafka requests topic, one transaction
// per batch, with its partitions' state in RocksDB as a view of the compacted state topic.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "allocator/clock_rate.h"
#include "allocator/lease.h"
#include "allocator/lease_clock.h"
#include "allocator/operations.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "cluster/restore.h"
#include "cluster/seq_wait_check.h"
#include "cluster/topics.h"
#include "cluster/wire.h"
#include "kafka/client.h"
#include "kafka/transaction.h"
#include "state/store.h"

namespace kleaf::cluster {

class BatchReader;  // allocator_node.cc: the store overlaid by a batch's staged writes

struct AllocatorNodeOptions {
  kafka::Properties props;  // bootstrap.servers and client settings
  ClusterTopics topics;
  allocator::Rules rules;
  std::string group_id;  // consumer group of all allocators
  int batch_max = 256;   // requests per transaction (per partition) at most
  std::chrono::milliseconds txn_timeout{10000};
  std::chrono::milliseconds session_timeout{6000};  // group membership: bounds failover time
  // The group's protocol: "classic", "consumer" (KIP-848; the broker's session timeout applies,
  // not session_timeout) or "auto" (kafka::GroupConsumer::Create).
  std::string group_protocol = "classic";
  // Called (from the node's thread) when Kafka's authorizer refuses a right the node cannot serve
  // without, with a message naming it; the node keeps trying until stopped. `kleaf allocator`
  // exits with it (docs/operations.md, "Kafka ACLs"); empty: only logged.
  std::function<void(const std::string&)> on_unauthorized;
  // Test hook: called on a takeover before it sends and commits the maxima read past a transaction
  // without an outcome (FenceAndRestore); an error makes that rewrite fail before it appended a
  // record (aborted instead), as a broker that refused or timed out it would. Empty in production.
  std::function<Result<void>(int32_t p)> before_rewrite_commit;
  // L, ρ and δ (config sequence.*): after each takeover p's sequence operations wait until the
  // slower lease clock since the fence reaches L_w·(1+ρ) + δ (docs/architecture.md, "I5 with a
  // lease", R4). With L above 0 the node holds a lease on each partition with sequence calls
  // (R2, R3), renews it every `lease_renew_ms` and releases it (R5) on revocation, at Stop and
  // after `idle_release_ms` (0: never) without a sequence call. Requests-topic answers still come
  // with their batch's commit; the owner hop (SubmitHop) answers from memory under the lease.
  allocator::LeaseTiming lease;
  int64_t lease_renew_ms = 1666;
  int64_t idle_release_ms = 60000;
  std::string node_name = "allocator";  // written in lease records, for operators
  // Where lease clock readings come from; null: the kernel's (allocator::KernelLeaseClocks).
  allocator::LeaseClockSource* lease_clocks = nullptr;
  // The group check (SeqWaitCheck; with L above 0): how often the allocators' group is described
  // besides after each assignment and revocation, and the description itself (empty: Kafka's,
  // kafka::DescribeGroupMembers of group_id within 5 s; a seam for tests).
  std::chrono::milliseconds group_check_period{10000};
  SeqWaitCheck::Describe describe_group;
  // A1's check on the node (with L above 0): where the kernel's clock state is read every second
  // (null: adjtimex), and how long the correction must stay above ρ/2 to count as drift.
  allocator::KernelClockRateSource* clock_rate = nullptr;
  int64_t drift_window_ns = allocator::ClockDriftWatch::kWindowNs;
};

// One thread runs the consumer loop; everything below is owned by it. (A round's commits run on
// threads of their own while the loop waits for them, each with its own partition's producer.)
//
// Invariant (docs/architecture.md, I1): this node serves partition p only between a successful
// init_transactions on p's transactional.id (which fences any previous owner and aborts its open
// transaction) followed by a restore of p's state to the last stable offset, and the first sign
// that it no longer owns p (revocation, fencing, any fatal transaction error). Every state record,
// reply and consumed offset of a batch commits in one transaction, so a reply is visible to
// read_committed gateways only with the state that makes its segment unique. RocksDB is updated
// only after the commit.
class AllocatorNode {
 public:
  AllocatorNode(AllocatorNodeOptions options, state::Store& store, Clock& clock);
  ~AllocatorNode();

  [[nodiscard]] Result<void> Start();
  void Stop();
  // Partitions restored and being served, for status and tests.
  std::vector<int32_t> Serving() const;
  // For /readyz: in the group (the last rebalance event assigned partitions, possibly none) and
  // how many assigned partitions are not restored yet. Safe from any thread.
  struct Status {
    bool member = false;
    // How long ago this node stopped being a member after it was one (a rebalance under way, e.g.
    // while Kafka moves the group coordinator off a dead broker); -1 while a member or never one.
    int64_t left_group_ms_ago = -1;
    int pending = 0;
    // How long some assigned partition has been waiting for its takeover (-1: none waits), and
    // whether every assigned partition was served at some point since Start.
    int64_t pending_for_ms = -1;
    bool served_all_once = false;
    std::vector<int32_t> serving;
    int64_t takeovers = 0;  // partitions taken over (fenced and restored) since Start
  };
  Status status() const;
  // Raises a fatal error (librdkafka's, as a broken producer would) in the transactional
  // producer of partition `p`, on the loop thread at its next turn, if it serves p then: for
  // tests of the rebuild (the partition is released and taken over with a new producer).
  void InjectFatalErrorForTesting(int32_t p) { inject_fatal_.store(p); }

  // The owner hop (docs/architecture.md, "I5 with a lease", R1; issue 38 item 2): one sequence
  // request for partition p, the wire envelope of a NextSeq or CurrentSeq as on the requests
  // topic. Answered on the caller's thread, under the sequence lock, from p's counters while this
  // node serves p, holds its lease and its takeover wait is over (R1), else refused (503,
  // `unavailable`); a request whose values need a raise waits for the raise's commit (a
  // transaction of p at the loop's next turn) and is answered on the loop thread. `done` runs
  // once. Safe from any thread, from Start until Stop (afterwards every call is refused).
  using HopAnswer = wire::HopReply;
  using HopDone = std::function<void(HopAnswer)>;
  void SubmitHop(int32_t p, std::string request, HopDone done);
  // The address ("host:port") gateways reach this node's owner hop at, sent with every sequence
  // answer on the requests topic (kOwnerRouteHeader), from when it is set (the hop's server is
  // up); empty: none. Safe from any thread.
  void SetHopAddress(std::string address);

 private:
  void Run();
  // A group event other than a message of the batch: a message that starts the next batch, an
  // assignment, a revocation, an error.
  void OnEvent(kafka::GroupConsumer::Event& event, std::vector<kafka::Message>& batch);
  // An ACL refusal: logged, and handed to options_.on_unauthorized.
  void Unauthorized(const std::string& why);
  // Publishes the loop's progress to the getters and gauges read by other threads.
  void PublishProgress();
  void OnAssigned(const std::vector<kafka::TopicPartition>& partitions);
  void OnRevoked(const std::vector<kafka::TopicPartition>& partitions);
  static metrics::Counter& RebalanceCounter(const char* event);
  static metrics::Counter& RaisesCounter(bool ahead);
  metrics::Counter& SegmentsAllocated(int32_t p);  // loop thread (and the constructor)
  // A takeover's result: p's new producer, whose init_transactions fenced every earlier one, and
  // p's state restored after that fence.
  struct Fenced {
    std::unique_ptr<kafka::TxnProducer> producer;
    RestoreResult restored;
    int64_t requests_start = 0;  // the first offset of requests partition p, read after the fence
    int64_t requests_end = 0;    // its end
    int64_t started_ns = 0;
    // R4: the lease clocks read right after init_transactions succeeded, and the wait the newest
    // lease record the restore found asks for.
    allocator::LeaseReading fenced_at;
    allocator::TakeoverWait wait;
  };
  // Fences p's previous owner and restores p, on a thread of its own with Kafka handles of its
  // own: a partition whose transaction coordinator or leader is on a broker that is away does not
  // hold up the takeover of the others, and a fresh reader never carries metadata cached before
  // a broker's outage. Touches no member but the options, the store and the clock.
  // `revoked` is set by the loop thread when p is revoked meanwhile: the takeover then gives up
  // at its next step instead of retrying, so a later assignment of p does not wait for it.
  // `before`: this process's memory of p from when it last owned it (R7), if any.
  [[nodiscard]] Result<Fenced> FenceAndRestore(int32_t p, const std::atomic<bool>& revoked,
                                               std::optional<allocator::HeldBefore> before) const;
  // Serves p from its takeover's result; returns the requests offset to read on from.
  [[nodiscard]] Result<int64_t> Serve(int32_t p, Fenced fenced);
  void Release(int32_t p, const std::string& why);
  // Starts a takeover for each pending partition that has none in flight and whose retry time
  // has come, and serves the partitions whose takeover finished.
  void RetryPending();
  void FinishTakeovers();
  bool StillAssigned(int32_t p);
  // One batch of requests per served partition, one transaction each: every transaction is
  // produced on the loop thread, then they commit at once (CommitAll), then each is ended in
  // partition order (EndAll).
  struct OpenBatch;
  void ProcessBatches(std::map<int32_t, std::vector<kafka::Message>> by_partition);
  // Begins p's transaction and produces the batch into it; null when p is not served or nothing
  // of the batch is left to run.
  std::unique_ptr<OpenBatch> OpenTransaction(int32_t p, std::vector<kafka::Message> batch);
  // The batch's records, replies, section raises and consumed position; how the transaction
  // ended if producing failed, nothing when it is ready to commit.
  std::optional<kafka::TxnEnd> ProduceBatch(OpenBatch& open);
  void CommitAll(const std::vector<std::unique_ptr<OpenBatch>>& open);
  void EndAll(const std::vector<std::unique_ptr<OpenBatch>>& open);
  // What one request makes of the partition's state (pure: allocator::Execute): the records to
  // write and the encoded reply.
  struct Decision {
    allocator::Effects effects;
    std::string reply;
    bool segment = false;  // a segment was allocated
    // A sequence call's answer: the generation of p's lease here, sent as the route's
    // (kOwnerRouteHeader) with the owner hop's address; nothing for other operations.
    std::optional<uint64_t> generation = std::nullopt;
  };
  Decision Decide(int32_t p, const kafka::Message& m, BatchReader& reader,
                  allocator::SequenceState& seq);
  // An error to answer p's sequence operations with while its takeover wait runs (R4), or
  // nothing once it is over (then never again until p's next takeover).
  // `count`: a refusal counts in kleaf_sequence_refusals_total (a call's, not a sweep's).
  std::optional<Error> SequenceRefusal(int32_t p, bool count = true) KLEAF_REQUIRES(seq_mu_);
  allocator::LeaseClockSource& LeaseClocks() const;
  // The sequence counters of served partition p (made on first use; dropped when p is released).
  allocator::SequenceCounters& CountersOf(int32_t p) KLEAF_REQUIRES(seq_mu_);
  // Stages `records` in the batch's reader and produces them into p's state partition.
  [[nodiscard]] Result<void> ProduceRecords(int32_t p, const state::Records& records,
                                            kafka::TxnProducer& producer, BatchReader& reader);
  // Sends a decision: state records staged and produced, then the reply.
  [[nodiscard]] Result<void> Produce(int32_t p, const kafka::Message& m, const Decision& decision,
                                     kafka::TxnProducer& producer, BatchReader& reader);
  // The four ends of a batch's transaction (kafka/transaction.h). `next_offset`: where the
  // requests the batch answered end (none for a transaction of lease records only); `lease`: the
  // lease record it carried, kept in the store's copy (R3).
  void OnCommitted(int32_t p, std::optional<int64_t> next_offset, kafka::TxnProducer& producer,
                   BatchReader& reader, int64_t segments,
                   const std::optional<state::LeaseRecord>& lease);
  void OnAborted(int32_t p, int64_t first_offset, const kafka::TxnError& why);
  void OnUnknown(int32_t p, const kafka::TxnError& why);
  void OnFatal(int32_t p, const kafka::TxnError& why);
  // Gives p up and takes it over again with a new producer (whose init_transactions fences any
  // other and settles the open transaction), re-reading from the group's committed offset.
  void Retake(int32_t p, const std::string& why);
  // The owner hop's requests (SubmitHop) taken from the queue, and those waiting for a raise,
  // answered or refused; once per turn of the loop.
  struct HopRequest {
    int32_t p = 0;
    allocator::Request request;  // a NextSeq or a CurrentSeq, routed to p
    HopDone done;
    int64_t since_ns = 0;  // when it began waiting for a raise
  };
  // The loop's turn: answers the owner-hop calls that waited for a raise, once it committed.
  void ServeHop();
  // R1 for one call: its answer or refusal, or nothing when its values need a raise first.
  std::optional<HopAnswer> AnswerHop(const HopRequest& r) KLEAF_REQUIRES(seq_mu_);
  // The lease's upkeep, once per turn of the loop (R2, R3, R5, R9): clock events and expiries,
  // the gauges, idle releases, and a transaction of a `held` record for each partition with
  // sequence calls whose lease is not held or is due for renewal.
  void TendLeases();
  // R5: marks each of `partitions` unserved for sequences and, where its wait had ended and a
  // `held` record of its generation committed, commits a `released` record in a transaction of
  // its own (all at once, each bounded by 1 s). `reason`: revoked, stopping or idle.
  void ReleaseLeases(const std::vector<int32_t>& partitions, const char* reason);
  // The `held` record a transaction of p begun now carries (R3), if it needs one: p has sequence
  // calls and its lease is not held, its first record since its wait ended is due, or `renewal`.
  std::optional<state::LeaseRecord> HeldRecordFor(int32_t p, bool renewal) KLEAF_REQUIRES(seq_mu_);
  state::LeaseRecord LeaseRecordOf(int32_t p, state::LeaseState st) KLEAF_REQUIRES(seq_mu_);
  // Why no lease may be held now (the group check), or nothing when one may.
  std::optional<std::string> LeaseBlocked() const;
  // LeaseBlocked() is empty, read without locks (R1's hot path).
  bool LeaseAllowed() const;
  // Marks every lease held (R5's first step), logged with `why`.
  void MarkAllLeases(const std::string& why);
  struct HeldLease;
  // R9: counts the clock events since h's anchor, and drops the lease (logged) when they end it.
  // Whether it dropped it.
  bool DropAtClockEvent(int32_t p, HeldLease& h, const allocator::LeaseReading& now)
      KLEAF_REQUIRES(seq_mu_);
  void Rewind(int32_t p, int64_t offset);
  // Partition p's ownership series (assignments, takeovers, releases, serving); loop thread only.
  struct PartitionMetrics {
    metrics::Counter& assignments;
    metrics::Counter& takeovers;
    metrics::Counter& releases;
    metrics::Gauge& serving;
    metrics::Counter& open_transaction_restores;
    metrics::Gauge& takeover_waiting;
    metrics::Gauge& takeover_wait_seconds;
    metrics::Counter& waiting_refusals;
    metrics::Counter& lease_records_out_of_order;
    metrics::Gauge& lease_held;
    metrics::Gauge& lease_age_seconds;
    metrics::Counter& renewals_by_record;
    metrics::Counter& renewals_by_transaction;
    metrics::Counter& lease_expiries;
  };
  PartitionMetrics& MetricsOf(int32_t p);

  const AllocatorNodeOptions options_;
  state::Store& store_;
  Clock& clock_;
  std::unique_ptr<kafka::GroupConsumer> consumer_;
  // With L above 0: whether every member of the group waits out leases (no lease held otherwise).
  std::unique_ptr<SeqWaitCheck> seq_wait_check_;
  std::map<int32_t, std::unique_ptr<kafka::TxnProducer>> serving_;  // loop thread only
  std::set<int32_t> pending_;  // assigned but not yet taken over; loop thread only
  // Per served partition, the offset after the last committed batch: requests below it were
  // answered and are never run again, whatever the consumer fetches. Loop thread only.
  std::map<int32_t, int64_t> floor_;
  // Per served partition whose takeover wait (R4) is not over yet: from which reading, how long
  // (W, ns), and why, for the refusal.
  struct SequenceWait {
    allocator::LeaseReading from;
    int64_t wait_ns = 0;
    std::string refused_for_good;  // a committed lease record went back (A4): never over
  };
  // The sequence lock (R1's critical section, for every partition at once): the takeover waits,
  // leases, counters and owner-hop state below are shared by the loop thread and the owner hop's
  // callers.
  Mutex seq_mu_;
  std::map<int32_t, SequenceWait> sequence_waits_ KLEAF_GUARDED_BY(seq_mu_);
  // Per served partition: whether the store's lease copy was complete after its restore (R3);
  // only then does a write that moves the applied offset move the copy's completeness point.
  std::map<int32_t, bool> lease_copy_complete_;
  // Per served partition when L is above 0, its sequence lease (R2, R3, R5), from its takeover to
  // its release.
  struct HeldLease {
    std::unique_ptr<allocator::PartitionLease> lease;
    allocator::TakeoverWait wait;  // the takeover's: the lease_ms its records carry during it
    // The last sequence call of p (monotonic ns) since its takeover or its last release; -1: none,
    // and then p holds no lease and commits no `held` record.
    int64_t last_call_ns = -1;
    int64_t next_try_ns = 0;         // a lease-only transaction of p not before this
    bool waited_written = false;     // a `held` record with waited: true committed
    bool expired = false;            // counted in kleaf_sequence_lease_expiries_total
    bool wall_back_counted = false;  // a step back since the anchor, counted once
  };
  std::map<int32_t, HeldLease> leases_ KLEAF_GUARDED_BY(seq_mu_);
  // R7: for each partition this process owned before, what it held then; used by its next
  // takeover here (R4's third row). Loop thread only.
  std::map<int32_t, allocator::HeldBefore> held_before_;
  const std::string holder_;  // R3: a random token drawn at construction, never stored
  // The owner hop: per partition, the calls waiting for a raise; the partitions it may answer
  // (served, from Serve to Release, and until the loop ends).
  std::map<int32_t, std::vector<HopRequest>> hop_raise_waits_ KLEAF_GUARDED_BY(seq_mu_);
  std::set<int32_t> hop_served_ KLEAF_GUARDED_BY(seq_mu_);
  std::string hop_address_ KLEAF_GUARDED_BY(seq_mu_);
  // Per served partition, its sections' counters (I5).
  std::map<int32_t, std::unique_ptr<allocator::SequenceCounters>> counters_
      KLEAF_GUARDED_BY(seq_mu_);
  // Takeovers under way, one thread each, and when a pending partition whose takeover failed may
  // be tried again. Loop thread only.
  struct Takeover {
    std::shared_ptr<std::atomic<bool>> revoked;
    std::future<Result<Fenced>> result;
  };
  std::map<int32_t, Takeover> takeovers_in_flight_;
  std::map<int32_t, int64_t> retry_at_ns_;
  // Partitions rewound since this turn's poll (Rewind): a message of theirs that this poll
  // returned is delivered again from the new position. Loop thread only.
  std::set<int32_t> rewound_;
  mutable Mutex serving_mu_;
  std::vector<int32_t> serving_snapshot_ KLEAF_GUARDED_BY(serving_mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
  // With L above 0, the clock watch: R9's watchdog (every 100 ms, a clock event in any lease held
  // drops it) and A1's check on the node (every second, the kernel's frequency correction).
  void WatchClocks();
  // The lease timing takeover waits use: the setting, with ρ raised while the clock drifts (A1).
  allocator::LeaseTiming WaitTiming() const;
  std::thread watch_thread_;
  Mutex watch_mu_;
  CondVar watch_wake_;
  bool watch_stop_ KLEAF_GUARDED_BY(watch_mu_) = false;
  std::atomic<bool> drifting_{false};     // A1's check: the correction stayed above ρ/2 (no lease)
  std::atomic<int64_t> wait_rho_ppm_{0};  // ρ for takeover waits (the setting, or more in drift)
  std::atomic<bool> member_{false};
  std::atomic<int64_t> left_group_ns_{-1};  // when member_ last went from true to false; -1: never
  std::atomic<int> pending_count_{0};
  std::atomic<int64_t> pending_since_ns_{-1};  // since when pending_ is not empty; -1: it is
  std::atomic<bool> served_all_once_{false};
  std::atomic<int64_t> takeovers_{0};
  std::atomic<int32_t> inject_fatal_{-1};  // a partition, or -1: see InjectFatalErrorForTesting
  // Metrics, looked up once; the per-partition counters by the loop thread only.
  metrics::Histogram& commit_latency_;
  metrics::Gauge& serving_gauge_;
  std::map<int32_t, metrics::Counter*> segments_allocated_;
  // kleaf_allocator_transactions_total{outcome}, indexed by kafka::TxnOutcome.
  std::array<metrics::Counter*, 4> transactions_{};
  metrics::Counter& assigned_events_;  // kleaf_allocator_rebalances_total{event="assigned"}
  metrics::Counter& revoked_events_;   // ... {event="revoked"}
  metrics::Counter& fenced_;           // kleaf_allocator_fenced_total
  metrics::Counter& raises_at_need_;   // kleaf_sequence_raises_total{ahead="false"}
  metrics::Counter& raises_ahead_;     // ... {ahead="true"}
  metrics::Counter& raise_waits_;      // kleaf_sequence_raise_waits_total
  std::map<int32_t, PartitionMetrics> partition_metrics_;
};

}  // namespace kleaf::cluster
