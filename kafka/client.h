// Thin RAII wrappers over librdkafka (kept private to this folder's .cc files): a producer, a
// transactional producer, a group consumer, a partition reader, and topic creation. Errors come
// back as kleaf Results; transaction errors say whether to retry, abort or give up.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace kleaf::kafka {

// librdkafka properties, e.g. {"bootstrap.servers", "127.0.0.1:9092"}.
using Properties = std::map<std::string, std::string>;

struct Header {
  std::string name;
  std::string value;
};

struct Message {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;
  std::optional<std::string> value;  // nullopt: a tombstone
  std::vector<Header> headers;
  const std::string* header(std::string_view name) const;
};

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1001;  // RD_KAFKA_OFFSET_INVALID: "no offset"
  auto operator<=>(const TopicPartition&) const = default;
};

// kleaf's partitioner (FNV-1a of the key): the same on every node, so a tag's requests and its
// state records land in the same partition number of their topics.
int32_t PartitionFor(std::string_view key, int32_t partitions);

// --- Topics -------------------------------------------------------------------------------------

struct TopicSpec {
  std::string name;
  int32_t partitions = 1;
  int16_t replication_factor = 1;
  std::map<std::string, std::string> configs;
};

// Creates the topics that do not exist yet; existing ones are left alone (their partition counts
// are checked: fewer than asked is an error, since keys would map elsewhere).
Result<void> EnsureTopics(const Properties& props, const std::vector<TopicSpec>& topics,
                          std::chrono::milliseconds timeout);

// Number of partitions of `topic`, from a metadata request.
Result<int32_t> PartitionCount(const Properties& props, const std::string& topic,
                               std::chrono::milliseconds timeout);

struct TopicInfo {
  int32_t partitions = 0;
  std::string id;  // Kafka's topic id (base64, as Kafka prints it): a recreated topic gets a new one
};

// Describes `topic` with the admin API (DescribeTopics): kNotFound when it does not exist,
// kUnavailable when Kafka does not answer within `timeout`.
Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                std::chrono::milliseconds timeout);

// The librdkafka version kleaf runs with (rd_kafka_version_str(), e.g. "2.8.0").
std::string LibraryVersion();

// --- Producer -----------------------------------------------------------------------------------

// Idempotent producer with its own thread serving delivery reports. Thread-safe.
//
// An idempotent producer can fail for good (librdkafka raises a fatal error: e.g. an out-of-order
// sequence after a disconnect with requests in flight, or the broker's fencing of its producer
// id); every later send would fail. This one then replaces its handle by a new one (a new
// producer id) on its own thread: the messages still queued in the old one fail (their Delivered
// callbacks get the error), later sends go through the new one.
class Producer {
 public:
  // Called once per message on the producer's thread: the offset, or the delivery error.
  using Delivered = std::function<void(Result<int64_t>)>;
  // Called on the producer's thread after a fatal error replaced the handle: the error's text.
  using Rebuilt = std::function<void(const std::string& error)>;

  static Result<std::unique_ptr<Producer>> Create(const Properties& props,
                                                  Rebuilt rebuilt = nullptr);
  ~Producer();

  // Queues a message; `value` nullopt sends a tombstone. Fails at once if the local queue is full
  // or the topic/partition is unknown.
  Result<void> Send(const std::string& topic, int32_t partition, std::string_view key,
                    const std::optional<std::string>& value, const std::vector<Header>& headers,
                    Delivered delivered = nullptr);
  // Waits until every queued message is delivered or failed, up to `timeout`.
  Result<void> Flush(std::chrono::milliseconds timeout);
  // How many times a fatal error replaced the handle.
  int64_t rebuilds() const;
  // Raises a fatal error in the current handle, as a broken idempotent sequence would
  // (librdkafka's rd_kafka_test_fatal_error): for tests of the rebuild.
  void InjectFatalErrorForTesting();

  struct Impl;

 private:
  explicit Producer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- Transactions -------------------------------------------------------------------------------

struct TxnError {
  enum class Kind {
    kRetriable,  // call the same operation again
    kAbortable,  // abort the transaction, rewind input, begin again
    kFatal,      // drop the producer (e.g. fenced: another owner took over)
  };
  Kind kind;
  bool fenced = false;
  std::string message;
};

template <typename T>
using TxnResult = std::expected<T, TxnError>;

class GroupConsumer;

// A transactional producer (one per owned partition). Not thread-safe: one owner thread.
class TxnProducer {
 public:
  static Result<std::unique_ptr<TxnProducer>> Create(const Properties& props,
                                                      const std::string& transactional_id);
  ~TxnProducer();

  // Fences every older producer with the same transactional.id and aborts its open transaction.
  TxnResult<void> Init(std::chrono::milliseconds timeout);
  TxnResult<void> Begin();
  Result<void> Send(const std::string& topic, int32_t partition, std::string_view key,
                    const std::optional<std::string>& value, const std::vector<Header>& headers);
  // Adds the consumer's offsets (`next` offsets to read) to the transaction.
  TxnResult<void> SendOffsets(const std::vector<TopicPartition>& offsets,
                              GroupConsumer& consumer, std::chrono::milliseconds timeout);
  TxnResult<void> Commit(std::chrono::milliseconds timeout);
  TxnResult<void> Abort(std::chrono::milliseconds timeout);
  // Waits until every message sent so far reached the broker (still uncommitted), up to `timeout`.
  Result<void> Flush(std::chrono::milliseconds timeout);
  // Offsets of the messages delivered since the last call, per (topic, partition): the highest.
  std::map<std::pair<std::string, int32_t>, int64_t> TakeDeliveredOffsets();
  // The fatal error librdkafka raised on this producer (rd_kafka_fatal_error), if any: after one,
  // sends fail with "Local: Fatal error" and the producer must be replaced (a fencing included).
  std::optional<TxnError> FatalError();
  // Raises a fatal error (not a fencing), as librdkafka does when the producer fails for good.
  // For tests of the owners' rebuild.
  void InjectFatalErrorForTesting();

  struct Impl;

 private:
  explicit TxnProducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- Consumers ----------------------------------------------------------------------------------

// A consumer-group member. Rebalances are handled eagerly inside Poll (assign/unassign) and
// reported as events before any message of the new assignment. Not thread-safe.
class GroupConsumer {
 public:
  struct Event {
    enum class Kind { kMessage, kAssigned, kRevoked, kError, kNone };
    Kind kind = Kind::kNone;
    Message message;                        // kMessage
    std::vector<TopicPartition> partitions;  // kAssigned / kRevoked
    std::string error;                      // kError
  };

  static Result<std::unique_ptr<GroupConsumer>> Create(const Properties& props,
                                                        const std::vector<std::string>& topics);
  ~GroupConsumer();

  Event Poll(std::chrono::milliseconds timeout);
  // The committed offsets of `partitions` (offset -1001 when none).
  Result<std::vector<TopicPartition>> Committed(const std::vector<TopicPartition>& partitions,
                                                std::chrono::milliseconds timeout);
  Result<void> Seek(const TopicPartition& position, std::chrono::milliseconds timeout);
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
    explicit PendingCommit(void* queue) : queue_(queue) {}
    void* queue_;  // rd_kafka_queue_t*
  };
  // Starts committing `offsets` (each the next offset to read). The broker checks the member's
  // generation: a member that was dropped from the group gets an error.
  Result<std::unique_ptr<PendingCommit>> StartCommit(const std::vector<TopicPartition>& offsets);
  // StartCommit and Wait up to `timeout`. On a timeout the commit may still land later (callers
  // must treat that as "not claimed", and see PendingCommit for how to know when it is settled).
  Result<void> Commit(const std::vector<TopicPartition>& offsets, std::chrono::milliseconds timeout);
  // The partitions assigned right now (rebalance events still queued for Poll may be older).
  std::vector<TopicPartition> Assignment();
  // Stops / restarts fetching `partitions`. Only partitions this consumer paused are resumed
  // (resuming a partition that was never paused restarted it from a stale position in
  // librdkafka 2.0.2; a resume of nothing is pointless in any version, so the check stays), and
  // a pause never outlives the assignment: on revocation the paused partitions are resumed
  // before they are given up (librdkafka keeps an application's pause across a reassignment,
  // which would leave a partition unread for good).
  Result<void> Pause(const std::vector<TopicPartition>& partitions);
  Result<void> Resume(const std::vector<TopicPartition>& partitions);
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
  std::unique_ptr<Impl> impl_;
};

// Reads a consumer group's committed offsets without joining the group: a consumer handle with
// the group's group.id that never subscribes and never commits. Not thread-safe: one owner thread.
class GroupOffsets {
 public:
  static Result<std::unique_ptr<GroupOffsets>> Create(const Properties& props,
                                                      const std::string& group);
  ~GroupOffsets();

  // The committed offsets of `partitions` (offset -1001 where the group committed none).
  Result<std::vector<TopicPartition>> Committed(const std::vector<TopicPartition>& partitions,
                                                std::chrono::milliseconds timeout);
  // Commits `offsets` (next offsets to read) for the group, as a tool outside the group would: the
  // broker accepts it only while the group has no active members (tests, operators).
  Result<void> Commit(const std::vector<TopicPartition>& offsets);

  struct Impl;

 private:
  explicit GroupOffsets(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads partitions by assign() (no group): for restoring state and for reply partitions.
class PartitionReader {
 public:
  static Result<std::unique_ptr<PartitionReader>> Create(const Properties& props);
  ~PartitionReader();

  // Starts reading `partitions` at their offsets (replaces any previous assignment).
  Result<void> Assign(const std::vector<TopicPartition>& partitions);
  // The next message, or nullopt after `timeout`.
  std::optional<Message> Poll(std::chrono::milliseconds timeout);
  // Low and high watermarks; with isolation.level=read_committed, high is the last stable offset.
  Result<std::pair<int64_t, int64_t>> Watermarks(const std::string& topic, int32_t partition,
                                                 std::chrono::milliseconds timeout);
  // Reads `topic`/`partition` from `from` up to its end (high watermark / last stable offset at
  // the time of the call), handing each message to `fn`. Returns the offset after the last one read.
  Result<int64_t> ReadToEnd(const std::string& topic, int32_t partition, int64_t from,
                            const std::function<void(const Message&)>& fn,
                            std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit PartitionReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::kafka
