// What /readyz checks on the cluster's two sides of the allocators: an allocator node (kleaf
// allocator) and a gateway's allocator client.
#pragma once

#include <vector>

#include "base/ready_check.h"
#include "cluster/allocator_client.h"
#include "cluster/allocator_node.h"
#include "kafka/probe.h"

namespace kleaf::cluster {

// An allocator is ready while Kafka answers and it is a member of the allocators' group with
// every assigned partition restored: checks "kafka", "group", "partitions".
std::vector<ReadyCheck> NodeReadiness(const AllocatorNode& node, const kafka::BrokerProbe& probe);
// A gateway loads segments while Kafka answers and the allocators do (no request given up since
// the last reply): checks "kafka", "allocators".
std::vector<ReadyCheck> ClientReadiness(const KafkaAllocatorClient& client,
                                        const kafka::BrokerProbe& probe);

}  // namespace kleaf::cluster
