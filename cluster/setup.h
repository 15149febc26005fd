// What every cluster node and state tool does first with its config: the Kafka client settings,
// the cluster's topics (created when missing) and the layout every node must agree on.
#pragma once

#include "base/error.h"
#include "cluster/topics.h"
#include "config/config.h"
#include "kafka/client.h"

namespace kleaf::cluster {

// bootstrap.servers and kleaf's client settings; fails if kafka.bootstrap is empty.
[[nodiscard]] Result<kafka::Properties> KafkaProperties(const config::Config& c);
// The cluster's topic names, with kafka.partitions as configured (0: take the topics' count).
ClusterTopics TopicsFor(const config::Config& c);

// A cluster node's Kafka setup: the client properties, the topics, and the layout, checked
// (ResolveLayout); `topics.partitions` is the layout's count, never a configured guess.
struct ClusterSetup {
  kafka::Properties props;
  ClusterTopics topics;
  ClusterLayout layout;
};
// Creates the topics when missing and resolves the layout, within one setup timeout: a node that
// cannot reach Kafka gives up within it. kInvalidArgument when the configuration is at fault
// (e.g. kafka.partitions disagrees with the topics).
[[nodiscard]] Result<ClusterSetup> PrepareCluster(const config::Config& c);

}  // namespace kleaf::cluster
