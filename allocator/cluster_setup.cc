#include "allocator/cluster_setup.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace kleaf::allocator {

Result<kafka::Properties> KafkaProperties(const config::Config& c) {
  if (auto r = config::CheckKafkaBootstrap(c); !r) return std::unexpected(r.error());
  kafka::Properties props{{"bootstrap.servers", c.kafka.bootstrap},
                          {"client.id", "kleaf-" + c.node.id},
                          {"reconnect.backoff.max.ms", "1000"}};
  // kafka.properties holds only keys none of the above is (config::AllowedKafkaProperty).
  props.insert(c.kafka.properties.begin(), c.kafka.properties.end());
  return props;
}

ClusterTopics TopicsFor(const config::Config& c) {
  auto topics =
      ClusterTopics::For(c.kafka.topic_prefix, c.kafka.partitions, c.kafka.reply_partitions);
  topics.ids = c.producer.TopicFor(c.kafka.topic_prefix);
  return topics;
}

Result<ClusterSetup> PrepareCluster(const config::Config& c) {
  constexpr std::chrono::milliseconds kSetupTimeout{30000};
  auto props = KafkaProperties(c);
  if (!props) return std::unexpected(props.error());
  auto topics = TopicsFor(c);
  const auto start = std::chrono::steady_clock::now();
  if (auto r = EnsureClusterTopics(*props, topics, static_cast<int16_t>(c.kafka.replication_factor),
                                   kSetupTimeout);
      !r) {
    return std::unexpected(r.error());
  }
  // Creating topics and checking the layout share one setup timeout: a node that cannot reach
  // Kafka gives up within it (plus librdkafka's teardown of a handle).
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  auto layout = ResolveLayout(*props, topics, c.kafka.partitions, c.node.id,
                              std::max(std::chrono::milliseconds(1000), kSetupTimeout - spent));
  if (!layout) return std::unexpected(layout.error());
  topics.partitions = layout->partitions;
  return ClusterSetup{std::move(*props), std::move(topics), std::move(*layout)};
}

}  // namespace kleaf::allocator
