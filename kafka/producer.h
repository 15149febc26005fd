// The idempotent producer of requests and replies, which replaces its handle when librdkafka
// declares it failed for good.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

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

  [[nodiscard]] static Result<std::unique_ptr<Producer>> Create(const Properties& props,
                                                                Rebuilt rebuilt = nullptr);
  ~Producer();

  // Queues a message; `value` nullopt sends a tombstone. Fails at once if the local queue is full
  // or the topic/partition is unknown.
  [[nodiscard]] Result<void> Send(const std::string& topic, int32_t partition, std::string_view key,
                                  const std::optional<std::string>& value,
                                  const std::vector<Header>& headers,
                                  Delivered delivered = nullptr);
  // Learns `topic`'s partitions and leaders now, up to `timeout`, so that the first Send to it
  // goes out at once: otherwise librdkafka looks a new topic up on its next one-second scan, and
  // the first request waits for that.
  [[nodiscard]] Result<void> Prepare(const std::string& topic, std::chrono::milliseconds timeout);
  // Waits until every queued message is delivered or failed, up to `timeout`.
  [[nodiscard]] Result<void> Flush(std::chrono::milliseconds timeout);
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

}  // namespace kleaf::kafka
