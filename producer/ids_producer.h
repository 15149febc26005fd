// The producer node's engine: keeps at least K ID batches on every partition of every stream's
// topic (StreamTopic: one topic per (tag, mode)) ahead of the consumer group's committed offsets,
// publishing each top-up round as one Kafka transaction.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "allocator/segment_source.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "base/periodic_task.h"
#include "kafka/client.h"
#include "kafka/transaction.h"
#include "kleaf/batch.h"
#include "producer/top_up.h"
#include "snowflake/snowflake.h"

namespace kleaf::producer {

// The largest segment batch that lists its IDs (an obfuscated tag, or several datacenters): it
// stays below Kafka's default 1 MB record limit. The config checks it at load for several
// datacenters (config/config.h, kMaxListedSegmentBatchSize); a round checks it per segment, since
// a tag's id_mode is known only from its segments.
inline constexpr int64_t kMaxListedSegmentBatch = 20000;

struct Stream {
  std::string tag;
  IdBatch::Mode mode = IdBatch::Mode::kSegment;
  int64_t batch_size = 10000;  // config/config.h: kDefaultSegmentBatchSize
};

struct IdsProducerOptions {
  kafka::Properties props;
  std::string topic;  // <prefix>.ids: the stream topics are StreamTopic(topic, tag, mode)
  std::string group;             // the consumers' group, whose committed offsets count
  int32_t partitions = 12;       // of the ids topic, and of each stream topic created here
  int16_t replication_factor = 0;  // of the stream topics created here; 0: the brokers' default
  std::string transactional_id;  // "<prefix>.producer.<node.id>"
  int64_t batches_ahead = 4;     // K, on every partition of every stream topic
  std::chrono::milliseconds check_interval{200};
  std::chrono::milliseconds txn_timeout{10000};
  std::chrono::milliseconds segment_timeout{10000};  // a round waits this long for a segment
  std::vector<Stream> streams;
  // Test hook: runs after round `round`'s batches reached the broker, before the commit.
  std::function<void(int64_t round)> before_commit;
};

// Owned by the process wiring. Init and RunRound run on the caller's thread until Start; then
// one round thread runs them every check_interval until Stop. The allocator (segments) and the
// generator (snowflake, uuid7, ulid; may be null without such streams) must outlive it.
//
// Guarantees: a batch is published at most once, across restarts and kill -9:
// - segment batches are pieces of segments the allocators handed to this node only (I1); a
//   piece is sent once and dropped whatever the outcome (an aborted piece is a gap);
// - snowflake batches come from the generator of a leased worker id, whose timestamps lie after
//   the lease's not_before and this node's durable mark (I3), so no run repeats an ID; uuid7 and
//   ulid batches are made of draws of the same generator (snowflake/id128.h), so the same holds;
// - each round is one transaction of transactional.id "<prefix>.producer.<node.id>"; Init fences
//   any older run of this node and aborts its open transaction, and read_committed consumers never
//   see the batches of an aborted (or never committed) transaction.
class IdsProducer {
 public:
  IdsProducer(IdsProducerOptions options, allocator::SegmentSource& allocator,
              snowflake::SnowflakeGenerator* generator, Clock& clock);
  ~IdsProducer();

  // Creates the stream topics that are missing and the Kafka clients, fences older runs
  // (init_transactions) and finds where each partition's unconsumed batches start.
  [[nodiscard]] Result<void> Init();

  struct RoundResult {
    int64_t batches = 0;  // published (committed) in this round
    int64_t ids = 0;
    // Partitions the consumers had emptied (no batch ahead) when the round began: they take
    // batches faster than one round per check_interval tops up, so the next round runs at once.
    int64_t drained = 0;
  };
  // One top-up round: reads back what was published, asks the committed offsets, publishes what is
  // missing in one transaction. After a fencing every later round fails; after another fatal
  // error of the transactional producer the next round replaces it first.
  [[nodiscard]] Result<RoundResult> RunRound();

  // Runs rounds on a thread; `on_fatal` is called there once if this producer is fenced (another
  // run of this node took over: the process should exit).
  void Start(std::function<void()> on_fatal);
  // Stops the round thread after the round in progress (committed or aborted).
  void Stop();

  bool fatal() const { return fatal_.load(); }
  // Test hook: the transactional producer raises a fatal error (not a fencing).
  void InjectFatalErrorForTesting() { txn_->InjectFatalErrorForTesting(); }
  // Monotonic time of the last round that completed (-1: none yet), for readiness.
  int64_t last_round_ok_ns() const { return last_round_ok_ns_.load(); }
  // Batches of stream `stream` ahead of the group, all its partitions together.
  int64_t Ahead(size_t stream) const;

 private:
  struct StreamState {
    Stream spec;
    std::string topic;                               // StreamTopic(options.topic, tag, mode)
    std::deque<std::pair<int64_t, int64_t>>
        ranges;  // segment counters [start, end) not yet published
    // More than one datacenter: how the counters become IDs (IdFormat::PlainIn); batches then
    // list their IDs. Null in a single datacenter (a batch is the range of counters).
    std::shared_ptr<const allocator::IdFormat> format;
    metrics::Counter* batches = nullptr;
    metrics::Counter* ids = nullptr;
    metrics::Gauge* ahead = nullptr;
  };
  // A queue is one partition of one stream topic: queue q = stream * partitions + partition. The
  // ledger counts per queue (its "partition" and "stream" are both the queue).
  int32_t Queue(size_t stream, int32_t partition) const {
    return static_cast<int32_t>(stream) * options_.partitions + partition;
  }
  size_t QueueCount() const { return streams_.size() * static_cast<size_t>(options_.partitions); }
  // Every queue as a (topic, partition).
  std::vector<kafka::TopicPartition> QueuePartitions() const;

  struct Sent {
    int32_t queue;
    size_t stream;
    std::string value;
    int64_t ids;
  };

  // Counts the batches of a committed transaction (metrics, and pending in the ledger until they
  // are read back).
  RoundResult CountPublished(std::vector<Sent>& sent);

  // Refuses stream topics on which the claim floor would not hold: compacted, or with unclean
  // leader elections.
  [[nodiscard]] Result<void> CheckStreamTopics();
  [[nodiscard]] Result<void> CatchUp();
  // Per queue, where the consumed batches end: the group's committed offset or the partition's log
  // start (the claim floor, docs/ids-topic.md), whichever is higher.
  [[nodiscard]] Result<std::map<int32_t, int64_t>> ConsumedOffsets();
  [[nodiscard]] Result<void> ReadCommittedOffsets();
  // The next batch of `s`; `wanted` (this round's batches of it still to make) sizes the segment
  // asked for when the stream has none left.
  [[nodiscard]] Result<IdBatch> NextBatch(StreamState& s, int64_t wanted);
  // A batch of UUIDv7s or ULIDs (spec.mode) from the snowflake generator, into batch.texts.
  [[nodiscard]] Result<void> DrawId128Batch(const Stream& spec, IdBatch& batch);
  // Asks the allocator for a segment of `s` sized for `wanted` batches and queues its range.
  [[nodiscard]] Result<void> FetchSegment(StreamState& s, int64_t wanted);
  // Cuts the next batch off the front range of `s`: the counters, or the IDs they map to when
  // the segment has a format.
  [[nodiscard]] Result<void> CutSegmentBatch(StreamState& s, IdBatch& batch);
  // One transaction: the missing batches (per queue) sent, then committed.
  [[nodiscard]] Result<RoundResult> Publish(const std::vector<int64_t>& deficits);
  // Begins the round's transaction at its first batch and sends every batch it can make; how the
  // transaction ended if a step failed.
  std::expected<void, kafka::TxnEnd> SendBatches(const std::vector<int64_t>& deficits,
                                                 std::vector<Sent>& sent);
  // The four ends of a round's transaction (kafka/transaction.h): committed batches are counted;
  // an unknown outcome is resumed before the next round; a fencing is fatal to this run; another
  // fatal error replaces the producer at the next round.
  [[nodiscard]] Result<RoundResult> OnTxnEnd(const kafka::TxnEnd& end, std::vector<Sent>& sent);
  RoundResult OnCommitted(std::vector<Sent>& sent);
  Error OnAborted(const kafka::TxnError& why);
  Error OnUnknown(const kafka::TxnEnd& end, std::vector<Sent>& sent);
  Error OnFatal(const kafka::TxnError& why);
  // Creates txn_ and fences older producers of transactional_id (init_transactions, retried up
  // to `timeout`); forgets any unfinished transaction of the old one.
  [[nodiscard]] Result<void> NewTransactionalProducer(std::chrono::milliseconds timeout);
  // One round of the round thread; after a fencing, calls on_fatal_ and ends the thread.
  void RunScheduledRound();

  const IdsProducerOptions options_;
  allocator::SegmentSource& allocator_;
  snowflake::SnowflakeGenerator* generator_;
  Clock& clock_;
  std::unique_ptr<kafka::TxnProducer> txn_;
  std::unique_ptr<kafka::PartitionReader> reader_;
  std::unique_ptr<kafka::LogStartClient> log_starts_;  // the stream partitions' log starts
  std::unique_ptr<kafka::GroupOffsets> offsets_;
  std::vector<StreamState> streams_;
  std::map<std::string, size_t> stream_of_topic_;
  std::map<int32_t, int64_t> read_to_;      // per queue: next offset to read back
  std::set<int32_t> without_offset_;        // queues whose group offset is gone (warned once each)
  metrics::Gauge* offsets_gone_ = nullptr;  // kleaf_ids_group_offsets_gone: without_offset_'s size
  std::map<int32_t, metrics::Gauge*> lag_;  // per queue
  TopUpLedger ledger_;
  mutable Mutex ahead_mu_;
  std::vector<int64_t> ahead_ KLEAF_GUARDED_BY(ahead_mu_);  // per stream, after the last round
  int64_t round_ = 0;
  std::atomic<bool> fatal_{false};  // fenced
  bool broken_ = false;              // txn_ failed for good (not fenced): the next round replaces it
  // A transaction a round could not finish: its commit timed out (librdkafka wants the commit
  // called again to learn its outcome; an abort meanwhile is refused) or its abort did. The next
  // round finishes it first: Begin on an open transaction would be a fatal state error.
  enum class Unfinished { kNone, kCommit, kAbort };
  Unfinished unfinished_ = Unfinished::kNone;
  std::vector<Sent> unfinished_sent_;  // the batches of an unfinished commit
  // Finishes the unfinished transaction; an error if it still is.
  [[nodiscard]] Result<void> FinishTransaction();
  std::atomic<int64_t> last_round_ok_ns_{-1};

  std::function<void()> on_fatal_;
  PeriodicTask rounds_;
};

}  // namespace kleaf::producer
