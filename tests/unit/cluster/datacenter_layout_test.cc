// The datacenter pair in the cluster's layout record (cluster/topics.h): recorded by the first
// node, checked by every other and against the peers' layouts.
#include <gtest/gtest.h>

#include "cluster/topics.h"
#include "cluster/wire.h"

namespace kleaf::cluster {
namespace {

using allocator::Datacenter;
using wire::DecodeLayout;
using wire::EncodeLayout;

const ClusterTopics kNames = ClusterTopics::For("kleaf", 12, 12);
TopicFacts Facts() { return TopicFacts{12, 12, "id-A", "compact"}; }

TEST(DatacenterLayoutTest, TheFirstNodeRecordsItsDatacenterAndOthersMustMatchIt) {
  auto first = CheckLayout(kNames, Facts(), 0, {}, {1, 2});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->datacenter, (Datacenter{1, 2}));
  auto decoded = DecodeLayout(EncodeLayout(*first));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->datacenter, (Datacenter{1, 2}));

  EXPECT_TRUE(CheckLayout(kNames, Facts(), 0, {*first}, {1, 2}));
  // The tired operator: DC 0's config copied onto a node of DC 1's cluster.
  auto copied = CheckLayout(kNames, Facts(), 0, {*first}, {0, 2});
  ASSERT_FALSE(copied);
  EXPECT_EQ(copied.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(copied.error().message.starts_with("datacenter.index:")) << copied.error().message;
  EXPECT_NE(copied.error().message.find("set datacenter.index: 1 and datacenter.count: 2"),
            std::string::npos)
      << copied.error().message;
  auto count = CheckLayout(kNames, Facts(), 0, {*first}, {1, 3});
  ASSERT_FALSE(count);
  EXPECT_TRUE(count.error().message.starts_with("datacenter.count:")) << count.error().message;
  // Two first nodes that raced with different datacenters.
  ClusterLayout other = *first;
  other.datacenter = {0, 2};
  auto conflict = CheckLayout(kNames, Facts(), 0, {*first, other}, {1, 2});
  ASSERT_FALSE(conflict);
  EXPECT_NE(conflict.error().message.find("conflicting layouts"), std::string::npos);
}

TEST(DatacenterLayoutTest, ALayoutFromBeforeDatacentersIsOneDatacenter) {
  auto old = DecodeLayout(R"({"partitions":12,"state_topic_id":"id-A"})");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->datacenter, (Datacenter{0, 1}));
  EXPECT_TRUE(CheckLayout(kNames, Facts(), 0, {*old}));
  auto grown = CheckLayout(kNames, Facts(), 0, {*old}, {0, 2});
  ASSERT_FALSE(grown) << "a live single-datacenter cluster cannot become one of two";
  EXPECT_TRUE(grown.error().message.starts_with("datacenter.count:")) << grown.error().message;
  EXPECT_FALSE(DecodeLayout(R"({"partitions":12,"datacenter_index":2,"datacenter_count":2})"));
}

TEST(DatacenterLayoutTest, APeerWithTheSameIndexOrAnotherCountOrOurOwnTopicIsRefused) {
  ClusterLayout ours{12, "id-A", "a", 1, {0, 2}};
  ClusterLayout peer{12, "id-B", "b", 1, {1, 2}};
  EXPECT_TRUE(CheckPeerLayout(ours, peer, 0, "dc1:9092"));
  peer.datacenter = {0, 2};
  auto same = CheckPeerLayout(ours, peer, 0, "dc1:9092");
  ASSERT_FALSE(same);
  EXPECT_TRUE(same.error().message.starts_with("datacenter.index: 0 is also the index"))
      << same.error().message;
  EXPECT_NE(same.error().message.find("datacenter.peers[0] (dc1:9092)"), std::string::npos);
  peer.datacenter = {1, 3};
  auto count = CheckPeerLayout(ours, peer, 0, "dc1:9092");
  ASSERT_FALSE(count);
  EXPECT_TRUE(count.error().message.starts_with("datacenter.count:")) << count.error().message;
  peer = ours;
  peer.datacenter = {1, 2};
  auto own = CheckPeerLayout(ours, peer, 1, "dc0:9092");
  ASSERT_FALSE(own);
  EXPECT_NE(own.error().message.find("this cluster's own Kafka"), std::string::npos);
}

}  // namespace
}  // namespace kleaf::cluster
