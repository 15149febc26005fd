// Reads partitions without a group (assign): state restore, reply partitions, watermarks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

// The group.id of every PartitionReader. It never joins nor commits, but librdkafka looks up its
// coordinator, which a broker with an authorizer allows only with DESCRIBE on this group.
inline constexpr char kReaderGroup[] = "kleaf-reader-unused";

// Reads partitions by assign() (no group): for restoring state and for reply partitions.
class PartitionReader {
 public:
  // `name` labels the handle's recoveries (kleaf_kafka_handle_recoveries_total{handle}).
  [[nodiscard]] static Result<std::unique_ptr<PartitionReader>> Create(
      const Properties& props, std::string name = "partition_reader");
  ~PartitionReader();

  // Starts reading `partitions` at their offsets (replaces any previous assignment).
  [[nodiscard]] Result<void> Assign(const std::vector<TopicPartition>& partitions);
  // The next message, or nullopt after `timeout`.
  std::optional<Message> Poll(std::chrono::milliseconds timeout);
  // Low and high watermarks; with isolation.level=read_committed, high is the last stable offset.
  // librdkafka answers these from its metadata cache, and takes a cached partition without a
  // leader (as every partition is for a moment after a broker froze or restarted) for a permanent
  // error that nothing refreshes: every retry here first asks the brokers for the topic's metadata.
  [[nodiscard]] Result<std::pair<int64_t, int64_t>> Watermarks(const std::string& topic,
                                                               int32_t partition,
                                                               std::chrono::milliseconds timeout);
  // Reads `topic`/`partition` from `from` up to its end (high watermark / last stable offset at
  // the time of the call), handing each message to `fn`. Returns the offset after the last one
  // read.
  [[nodiscard]] Result<int64_t> ReadToEnd(const std::string& topic, int32_t partition, int64_t from,
                                          const std::function<void(const Message&)>& fn,
                                          std::chrono::milliseconds timeout);
  // ReadToEnd of many partitions at once: one assignment, so their fetches go together instead
  // of one partition's round trips after another's. Each of `partitions` is read from its
  // offset up to its end at the time of the call; `fn` gets the messages of all of them (in order
  // within a partition). Returns the offset after the last one read, per partition, in the order
  // of `partitions`.
  [[nodiscard]] Result<std::vector<int64_t>> ReadAllToEnd(
      const std::vector<TopicPartition>& partitions, const std::function<void(const Message&)>& fn,
      std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit PartitionReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::kafka
