// Partitions' log start offsets, read and moved forward: the claim floor of the ids topic's stream
// partitions (docs/architecture.md, "The claim floor").
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

// Admin requests on partitions' log starts, through a handle of their own: a consumer's broker
// connections carry its fetches, and a broker answers one connection's requests in order, so a
// request sent behind a fetch waits out the fetch's fetch.wait.max.ms (10 ms a claim, measured).
// The handle never fetches and joins no group. Not thread-safe: one owner thread.
class LogStartClient {
 public:
  // `props`: bootstrap and security settings (a consumer's properties do; group.id is ignored).
  [[nodiscard]] static Result<std::unique_ptr<LogStartClient>> Create(const Properties& props);
  ~LogStartClient();
  LogStartClient(const LogStartClient&) = delete;
  LogStartClient& operator=(const LogStartClient&) = delete;

  // Moves the log start offset of each of `before` up to its offset (DeleteRecords): every record
  // below it is gone for every reader, and a start never moves back. kFailedPrecondition, naming
  // the right or the config, where the broker refuses it (the DELETE right, a compacted topic);
  // kUnavailable without an answer within `timeout` (the deletion may still happen: a start only
  // moves forward). Retried over leader moves until `timeout`.
  [[nodiscard]] Result<void> DeleteRecordsBefore(const std::vector<TopicPartition>& before,
                                                 std::chrono::milliseconds timeout);
  // The log start offset of each of `partitions` (ListOffsets, earliest): below it nothing can be
  // read any more (DeleteRecords, retention).
  [[nodiscard]] Result<std::vector<TopicPartition>> LogStarts(
      const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit LogStartClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::kafka
