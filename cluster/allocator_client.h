// The Allocator interface over Kafka request/reply: what a gateway uses in the cluster shape.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "allocator/allocator.h"
#include "allocator/datacenter.h"
#include "allocator/operations.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "cluster/owner_hop.h"
#include "cluster/sequence_router.h"
#include "cluster/topics.h"
#include "kafka/client.h"

namespace kleaf::cluster {

struct KafkaClientOptions {
  kafka::Properties props;
  ClusterTopics topics;
  std::string node_id;
  int32_t reply_partition = 0;                      // this node's partition of the replies topic
  std::chrono::milliseconds request_timeout{2000};  // per attempt
  int attempts = 3;
  // The layout's datacenter: a segment of another one (allocators configured otherwise, or older
  // than the rule that maps segments in the allocator) is refused.
  allocator::Datacenter datacenter = {};
  // `sequence.owner_hop`: NextSeq and CurrentSeq go straight to their partition's owner where its
  // route is known (OwnerHopCaller; `hop.partitions` is set from `topics`).
  std::optional<OwnerHopOptions> hop = std::nullopt;
};

// Thread-safe. Sends each request to the partition owning its tag with a fresh correlation id
// and this node's reply partition, and completes the callback when the matching reply arrives
// (read_committed: only after the allocator's transaction committed) or, after `attempts`
// timeouts, with kUnavailable. A late reply to an abandoned attempt is ignored: its segment is a
// gap, never used twice. Callbacks run on the client's reply thread. Metrics: the round trip of
// each answered attempt (kleaf_kafka_request_seconds{op}), attempts timed out, calls given up.
class KafkaAllocatorClient final : public allocator::Allocator, private PartitionCaller {
 public:
  [[nodiscard]] static Result<std::unique_ptr<KafkaAllocatorClient>> Start(
      KafkaClientOptions options, Clock& clock);
  ~KafkaAllocatorClient() override;

  // Each operation goes to the partition of its route key (allocator::RouteKey: its tag, its
  // space's name, its section's route key, kWorkersKey for the worker registry); ListTags and
  // ListSpaces go to every partition and answer the records of all of them, ordered by name.
  // A segment of another datacenter than this node's is refused.
  //
  // NextSeq and CurrentSeq go through the SequenceRouter (sequence_router.h), to the partitions
  // of their keys' sections; the space records it routes with are read from the partition of the
  // space's name, and each GetSpace, PutSpace and DeleteSpace answered here updates them. With
  // options.hop they take the owner hop where a route is known. Every reply that names its
  // owner's route (kOwnerRouteHeader) updates the route table, and one of an older lease
  // generation than one seen for its partition is dropped and fails its call (R8).
  void Submit(allocator::AnyCall call) override;

  void Stop();

  // Monotonic times of the last reply received and of the last call given up (-1: never), for
  // readiness: the allocators are unreachable when a call was given up after the last reply.
  int64_t last_reply_mono_ns() const { return last_reply_ns_.load(); }
  // Monotonic nanoseconds now, on the clock of the two above.
  int64_t now_mono_ns() const { return clock_.MonotonicNs(); }
  int64_t last_give_up_mono_ns() const { return last_give_up_ns_.load(); }

  // How many times a fatal error replaced the request producer (kafka::Producer rebuilds it on
  // its own thread; requests lost with the old handle time out and are sent again).
  int64_t producer_rebuilds() const { return producer_->rebuilds(); }
  // Raises a fatal error in the request producer, as a broken idempotent sequence would: for
  // tests of the rebuild.
  void InjectProducerFatalErrorForTesting() { producer_->InjectFatalErrorForTesting(); }

 private:
  // What a pending call does with its reply's text (or the reason there is none): decode it as
  // the result its operation expects and complete the caller's callback.
  using ReplyHandler = std::function<void(Result<std::string_view>)>;
  struct Pending {
    int op;           // allocator::kOpIndex of the operation
    int64_t sent_ns;  // of the current attempt
    int32_t partition;
    std::string key;
    std::string payload;
    int attempts_left;
    int64_t deadline_ns;
    ReplyHandler done;
  };

  KafkaAllocatorClient(KafkaClientOptions options, Clock& clock);
  // Submit() of one operation: its route, and what this node keeps of the answer.
  template <typename Op>
  void Route(Op op, allocator::Callback<typename Op::Result> done);
  // Sends `op` to requests partition `partition` (with record key `key`) and completes `done` with
  // its reply decoded as Op's result.
  template <typename Op>
  void CallPartition(int32_t partition, std::string key, Op op,
                     allocator::Callback<typename Op::Result> done);
  // Every partition's answer to Op (ListTags, ListSpaces), merged and ordered by `name_of`.
  template <typename Op, typename Record>
  void CallEveryPartition(Op op, std::string (*name_of)(const Record&),
                          allocator::Callback<std::vector<Record>> done);
  // PartitionCaller: the sequence router's requests, sent as any other (CallPartition).
  int32_t PartitionOf(std::string_view route_key) const override {
    return options_.topics.PartitionOf(route_key);
  }
  void Call(int32_t partition, std::string route_key, allocator::op::GetSpace get,
            allocator::Callback<state::SpaceRecord> done) override;
  void Call(int32_t partition, std::string route_key, allocator::op::NextSeq next,
            allocator::Callback<std::vector<uint64_t>> done) override;
  void Call(int32_t partition, std::string route_key, allocator::op::CurrentSeq current,
            allocator::Callback<uint64_t> done) override;
  // Sends `pending` under a new correlation id.
  void SendLocked(Pending pending) KLEAF_REQUIRES(mu_);
  void ReplyLoop();
  // Completes the pending call a reply answers (matched by correlation id). Reply thread.
  void OnReply(const std::string* correlation_id, const std::string* owner_route,
               std::string_view reply);
  // Sends again each attempt past its deadline, or fails its call when it has no attempt left.
  // Reply thread.
  void ExpireAttempts();
  // After kReplyStall with attempts timing out and no reply at all, replaces the reply reader by
  // a new handle (assigned at the partition's end: whatever was missed is asked again) and
  // refreshes the request producer's metadata, so that a handle left with stale metadata by a
  // broker that froze or restarted cannot keep the gateway from its allocators. Reply thread.
  void HealIfStalled(int64_t now_ns);

  const KafkaClientOptions options_;
  Clock& clock_;
  std::unique_ptr<kafka::Producer> producer_;
  std::unique_ptr<kafka::PartitionReader> replies_;
  const std::string id_prefix_;  // node id + a per-process nonce
  std::atomic<uint64_t> next_id_{0};
  Mutex mu_;
  std::unordered_map<std::string, Pending> pending_ KLEAF_GUARDED_BY(mu_);  // by correlation id
  // (deadline, correlation id) of every attempt sent, in sending order, which is deadline order
  // (one timeout for all): the reply thread looks only at the front for expired attempts instead
  // of scanning every pending one after each reply (with 20,000 in flight that scan took 3/4 of
  // the process's CPU). Ids answered meanwhile are skipped when they reach the front.
  std::deque<std::pair<int64_t, std::string>> deadlines_ KLEAF_GUARDED_BY(mu_);
  // The owner hop's route table and caller (with options_.hop), and the router of NextSeq and
  // CurrentSeq through it (or straight through this client) with the space records they route
  // with. Declared last but stop_: gone first.
  std::unique_ptr<OwnerRoutes> routes_;
  std::unique_ptr<OwnerHopCaller> hop_;
  std::unique_ptr<SequenceRouter> router_;
  metrics::Counter* older_generation_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::array<metrics::Histogram*, allocator::kOpCount> latency_{};
  metrics::Counter* attempts_timed_out_ = nullptr;
  metrics::Counter* given_up_ = nullptr;
  std::atomic<int64_t> last_reply_ns_{-1};
  std::atomic<int64_t> last_give_up_ns_{-1};
  // Reply thread only: when an attempt last timed out, and the stall clock's start (the last
  // reply or heal, or the start).
  int64_t last_timeout_ns_ = -1;
  int64_t stall_since_ns_ = 0;
};

}  // namespace kleaf::cluster
