// A consumer group's committed offsets, read (and, for tools, written) without joining the group.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

// Reads a consumer group's committed offsets without joining the group: a consumer handle with
// the group's group.id that never subscribes and never commits. Not thread-safe: one owner thread.
class GroupOffsets {
 public:
  [[nodiscard]] static Result<std::unique_ptr<GroupOffsets>> Create(const Properties& props,
                                                                    const std::string& group);
  ~GroupOffsets();

  // The committed offsets of `partitions` (offset -1001 where the group committed none).
  [[nodiscard]] Result<std::vector<TopicPartition>> Committed(
      const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout);
  // Commits `offsets` (next offsets to read) for the group, as a tool outside the group would: the
  // broker accepts it only while the group has no active members (tests, operators).
  [[nodiscard]] Result<void> Commit(const std::vector<TopicPartition>& offsets);

  struct Impl;

 private:
  explicit GroupOffsets(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::kafka
