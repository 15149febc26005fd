// What kleaf sends and reads through Kafka: client properties, messages, topic partitions, and
// kleaf's partitioner.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace kleaf::kafka
