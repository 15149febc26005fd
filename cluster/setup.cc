#include "cluster/setup.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "kafka/topics.h"

namespace kleaf::cluster {

Result<kafka::Properties> KafkaProperties(const config::Config& c) {
  if (auto r = config::CheckKafkaBootstrap(c); !r) return std::unexpected(r.error());
  kafka::Properties props{{"bootstrap.servers", c.kafka.bootstrap},
                          {"client.id", "kleaf-" + c.node.id},
                          {"reconnect.backoff.max.ms", "1000"},
                          // Every 5 s, not librdkafka's 5 minutes: a handle whose first metadata
                          // named a leader that had just died (a broker it never reached, so no
                          // disconnect makes it ask again) follows the new leader within seconds.
                          {"topic.metadata.refresh.interval.ms", "5000"}};
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
  // Kafka gives up within it (plus librdkafka's teardown of a handle); peers have their own.
  const allocator::Datacenter dc{c.datacenter.index, c.datacenter.count};
  if (auto ok = allocator::CheckDatacenter(dc, c.snowflake.worker_bits); !ok) {
    return std::unexpected(ok.error());
  }
  const auto peers_start = std::chrono::steady_clock::now();
  if (!c.datacenter.peers.empty()) {
    // Before the layout is recorded: the first node of a cluster whose config was copied from
    // another datacenter must not record that datacenter's index.
    auto state = kafka::DescribeTopic(*props, topics.state, kSetupTimeout);
    if (!state) return std::unexpected(state.error());
    const ClusterLayout candidate{0, state->id, c.node.id, 0, dc};
    if (auto peers = CheckPeers(*props, topics, candidate, c.datacenter.peers,
                                std::chrono::milliseconds(c.datacenter.peer_check_timeout_ms));
        !peers) {
      return std::unexpected(peers.error());
    }
  }
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(peers_start - start);
  auto layout = ResolveLayout(*props, topics, c.kafka.partitions, c.node.id,
                              std::max(std::chrono::milliseconds(1000), kSetupTimeout - spent), dc,
                              c.kafka.allow_unreplicated);
  if (!layout) return std::unexpected(layout.error());
  topics.partitions = layout->partitions;
  return ClusterSetup{std::move(*props), std::move(topics), std::move(*layout)};
}

}  // namespace kleaf::cluster
