// Two allocators and two gateways on a real broker: a tag created through one gateway is visible
// through the other, and under load from both the IDs are unique across gateways (I1) and grow per
// gateway and tag.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class ServingIntegrationTest : public KafkaTest {};

// "served by alloc-2 by its log", for messages.
std::string ServedBy(const Cluster& cluster, const std::vector<Node*>& allocators, int32_t p) {
  const Node* owner = cluster.OwnerOf(p, allocators);
  return owner == nullptr ? "no single owner by the logs"
                          : "served by " + owner->name + " by its log";
}

TEST_F(ServingIntegrationTest, TwoGatewaysServeUniqueIdsThatIncreasePerGateway) {
  // A small step cap: segments run out quickly, so both allocators keep serving fetches.
  Cluster cluster(broker_, "serving", {{"segment.max_step", "2000"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw_a = *nodes->gateways[0];
  Node& gw_b = *nodes->gateways[1];

  // One tag on every partition: both allocators take part.
  std::vector<std::string> tags;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    tags.push_back(TagOnPartition("serving", p, Cluster::kPartitions));
  }
  for (const auto& tag : tags) {
    auto put = PutTag(gw_a.port, tag, R"({"step":50,"description":"made through gw-a"})");
    ASSERT_TRUE(put) << put.error();
    EXPECT_EQ(put->step, 50);
  }
  // Visible through the other gateway, one by one and in the list.
  for (const auto& tag : tags) {
    auto got = GetTag(gw_b.port, tag);
    ASSERT_TRUE(got) << tag << ": " << got.error();
    EXPECT_EQ(got->step, 50) << tag;
    EXPECT_EQ(got->description, "made through gw-a") << tag;
  }
  auto listed = ListTags(gw_b.port);
  ASSERT_TRUE(listed) << listed.error();
  for (const auto& tag : tags) {
    ASSERT_TRUE(listed->contains(tag)) << tag << " missing from gw-b's list";
    EXPECT_EQ(listed->at(tag).step, 50) << tag;
  }
  auto unknown = GetTag(gw_b.port, "serving-never-created");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("status 404"), std::string::npos) << unknown.error();

  // A few seconds of load: 3 clients per gateway, single IDs and batches over every tag.
  auto options = [&](const Node& gw) {
    LoadOptions o;
    o.name = gw.name;
    o.port = gw.port;
    o.tags = tags;
    o.threads = 3;
    o.batch_max = 20;
    o.max_requests = 2500;
    return o;
  };
  Load load_a(options(gw_a));
  Load load_b(options(gw_b));
  const auto started = SteadyClock::now();
  WaitUntil([&] { return load_a.counters().replies + load_b.counters().replies >= 2 * 3 * 2500; },
            seconds(6));
  load_a.Stop();
  load_b.Stop();
  std::cout << "load of " << SecondsSince(started) << " s: " << load_a.Summary() << "; "
            << load_b.Summary() << std::endl;

  for (const Load* load : {&load_a, &load_b}) {
    if (!load->failures().empty()) ADD_FAILURE() << FailureReport(*load);
    EXPECT_EQ(load->counters().errors, 0) << load->Summary();
    EXPECT_EQ(load->counters().unavailable, 0) << load->Summary();
    EXPECT_GE(load->counters().replies, 200)
        << "too little load to say anything: " << load->Summary();
  }
  listed = ListTags(gw_b.port);
  ASSERT_TRUE(listed) << listed.error();
  for (const auto& tag : tags) {
    SCOPED_TRACE(tag);
    auto all = AllIds({&load_a, &load_b}, tag);
    ASSERT_FALSE(load_a.Ids(tag).empty());
    ASSERT_FALSE(load_b.Ids(tag).empty());
    auto dup = FindDuplicates(all);
    EXPECT_EQ(dup.count, 0) << "IDs served twice, e.g. "
                            << (dup.examples.empty() ? 0 : dup.examples.front());
    for (const Load* load : {&load_a, &load_b}) {
      for (const auto& v : OrderViolations(load->Replies(tag)))
        ADD_FAILURE() << load->options().name << ": " << v;
    }
    // Every ID served lies below the durable max_id (I2).
    EXPECT_GT(listed->at(tag).max_id, *std::max_element(all.begin(), all.end()));
  }
}

// Allocators often start together (a deployment, a restart of the whole cluster). Whatever order
// their group's rebalances come in, every partition must end up served by its owner.
TEST_F(ServingIntegrationTest, AllocatorsStartedTogetherServeEveryPartition) {
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds && !HasFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Cluster cluster(broker_, "together" + std::to_string(round));
    std::vector<Node*> allocators;
    for (int i = 1; i <= 3; ++i)
      allocators.push_back(&cluster.AddAllocator("alloc-" + std::to_string(i)));
    auto ok = cluster.Start(allocators);
    ASSERT_TRUE(ok) << ok.error();
    ok = cluster.WaitBalanced(allocators, seconds(90));
    ASSERT_TRUE(ok) << ok.error();
    Node& gw = cluster.AddGateway("gw-a", 0);
    ok = cluster.Start({&gw});
    ASSERT_TRUE(ok) << ok.error();
    // A tag on every partition: created, then served.
    for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
      const std::string tag = TagOnPartition("together", p, Cluster::kPartitions);
      auto put = PutTag(gw.port, tag, R"({"step":10})");
      EXPECT_TRUE(put) << "partition " << p << " (" << ServedBy(cluster, allocators, p)
                       << "): " << put.error();
      if (!put) continue;
      auto ids = FetchIds(gw.port, tag, 3);
      EXPECT_TRUE(ids) << "partition " << p << ": " << ids.error();
    }
  }
}

}  // namespace
}  // namespace kleaf::integration
