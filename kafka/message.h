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

// Whether `message` (a Kafka error as kleaf reports it, librdkafka's text included) is an ACL
// refusal: the brokers' authorizer denied the principal a right (TOPIC_, GROUP_, TRANSACTIONAL_ID_
// or CLUSTER_AUTHORIZATION_FAILED). Asking again does not help; an operator must grant the right.
bool IsAuthorizationFailure(std::string_view message);

// Appended to an ACL refusal: where the rights of each role are listed.
inline constexpr char kAclHint[] = "see docs/operations.md, \"Kafka ACLs\"";

}  // namespace kleaf::kafka
