// group.protocol "auto" on three brokers: each broker is asked for its own
// group.coordinator.rebalance.protocols (a broker resource is described only by that broker, and
// librdkafka takes one broker resource per request), so a 4.x cluster is found to offer the
// consumer protocol, and a member opened with "auto" runs it.
#include <gtest/gtest.h>

#include <string>

#include "kafka/client.h"
#include "kafka/topics.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class GroupProtocolCluster3Test : public Kafka3Test {};

TEST_F(GroupProtocolCluster3Test, EveryBrokerOfAKafka4ClusterOffersTheConsumerProtocol) {
  const kafka::Properties props{{"bootstrap.servers", kafka_.bootstrap}};
  auto offered = kafka::ConsumerGroupProtocolSupport(props, seconds(30));
  ASSERT_TRUE(offered) << offered.error().message;
  EXPECT_TRUE(offered->every_broker) << offered->why;
  auto consumer = kafka::GroupConsumer::Create({{"bootstrap.servers", kafka_.bootstrap},
                                                {"group.id", "kleaf-it-auto3"},
                                                {"group.protocol", "auto"}},
                                               {"kleaf-it-auto3-unused"});
  ASSERT_TRUE(consumer) << consumer.error().message;
  EXPECT_EQ((*consumer)->Protocol(), "consumer");
  (*consumer)->Close();
}

}  // namespace
}  // namespace kleaf::integration
