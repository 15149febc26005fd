// Topic administration: creating topics, their partition counts and ids, and the version of
// librdkafka kleaf runs with. Each call ends as soon as the brokers refuse the client's SASL
// credentials or TLS handshake (kUnauthenticated, naming the kafka.properties to check), not at
// its timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

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

// Number of partitions of `topic` (DescribeTopic): kNotFound when it does not exist.
Result<int32_t> PartitionCount(const Properties& props, const std::string& topic,
                               std::chrono::milliseconds timeout);

struct TopicInfo {
  int32_t partitions = 0;
  std::string id;  // Kafka's topic id (URL-safe base64, as Kafka's tools print it): a recreated
                   // topic gets a new one
};

// The values of topic-level configs of `topic`, in one DescribeConfigs request, e.g.
// {"cleanup.policy": "compact"}: the broker's default where the topic does not set one. A name the
// broker does not describe is left out. kNotFound when the topic does not exist.
Result<std::map<std::string, std::string>> TopicConfigs(const Properties& props,
                                                        const std::string& topic,
                                                        const std::vector<std::string>& names,
                                                        std::chrono::milliseconds timeout);

// Describes `topic` with the admin API (DescribeTopics): kNotFound when it does not exist,
// kUnavailable when Kafka does not answer within `timeout`.
Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                std::chrono::milliseconds timeout);

// The librdkafka version kleaf runs with (rd_kafka_version_str(), e.g. "2.8.0").
std::string LibraryVersion();

// kleaf's patch level of that librdkafka (scripts/install-deps.sh, patch_librdkafka): 0 for a
// librdkafka without it, whose transactions each wait 1 ms more before registering partitions.
int LibraryPatchLevel();

}  // namespace kleaf::kafka
