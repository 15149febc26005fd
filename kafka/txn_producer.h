// The transactional producer (one per owned partition or producer run) and its errors, each
// classified as retriable, abortable or fatal.
#pragma once

#include <chrono>
#include <expected>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

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
  [[nodiscard]] static Result<std::unique_ptr<TxnProducer>> Create(
      const Properties& props, const std::string& transactional_id);
  ~TxnProducer();

  // Fences every older producer with the same transactional.id and aborts its open transaction.
  [[nodiscard]] TxnResult<void> Init(std::chrono::milliseconds timeout);
  // As Producer::Prepare: `topic`'s leaders are known before the first Send to it.
  [[nodiscard]] Result<void> Prepare(const std::string& topic, std::chrono::milliseconds timeout);
  [[nodiscard]] TxnResult<void> Begin();
  [[nodiscard]] Result<void> Send(const std::string& topic, int32_t partition, std::string_view key,
                                  const std::optional<std::string>& value,
                                  const std::vector<Header>& headers);
  // Adds the consumer's offsets (`next` offsets to read) to the transaction.
  [[nodiscard]] TxnResult<void> SendOffsets(const std::vector<TopicPartition>& offsets,
                                            GroupConsumer& consumer,
                                            std::chrono::milliseconds timeout);
  [[nodiscard]] TxnResult<void> Commit(std::chrono::milliseconds timeout);
  [[nodiscard]] TxnResult<void> Abort(std::chrono::milliseconds timeout);
  // Waits until every message sent so far reached the broker (still uncommitted), up to `timeout`.
  [[nodiscard]] Result<void> Flush(std::chrono::milliseconds timeout);
  // Offsets of the messages delivered since the last call, per (topic, partition): the highest.
  std::map<std::pair<std::string, int32_t>, int64_t> TakeDeliveredOffsets();
  // The same, every message's offset, per (topic, partition) in the order they were sent.
  std::map<std::pair<std::string, int32_t>, std::vector<int64_t>> TakeDelivered();
  // How many of the transaction's own messages were delivered: reset by Begin and Abort, read
  // after Commit (which serves the delivery reports). Apart from TakeDelivered, which any caller
  // may empty. A commit of a transaction that delivered nothing proves nothing: librdkafka
  // completes a transaction without partitions locally and never asks the coordinator, so it
  // cannot have been fenced (docs/architecture.md, "I5 with a lease", R2).
  int64_t DeliveredInTransaction();
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

}  // namespace kleaf::kafka
