// A gateway of the cluster stopped with SIGTERM keeps the unused rest of its segments and, started
// again on the same state, continues with the next unused ID (Leaf would skip to a new segment);
// the rest belongs to the cluster's topic prefix and is never served twice.
#include <gtest/gtest.h>

#include <set>

#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class GatewayRestartIntegrationTest : public KafkaTest {};

std::vector<int64_t> Single(uint16_t port, const std::string& tag, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    auto got = FetchIds(port, tag, 1);
    if (!got) {
      ADD_FAILURE() << got.error();
      break;
    }
    ids.push_back(got->front());
  }
  return ids;
}

TEST_F(GatewayRestartIntegrationTest, SigtermKeepsTheSegmentRestForTheNextStart) {
  Cluster cluster(broker_, "gwrest");
  auto nodes = cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw = *nodes->gateways[0];
  auto put = PutTag(gw.port, "gwrest", R"({"step":1000})");
  ASSERT_TRUE(put) << put.error();

  auto before = Single(gw.port, "gwrest", 20);
  ASSERT_EQ(before.size(), 20u);
  gw.process->Terminate();
  auto status = gw.process->WaitExit(seconds(20));
  ASSERT_TRUE(status.exited && status.code == 0) << status.ToString() << "\n" << gw.Log();
  EXPECT_NE(gw.Log().find("[segment] kept "), std::string::npos) << gw.Log();

  auto started = cluster.Start({&gw});
  ASSERT_TRUE(started) << started.error();
  auto after = Single(gw.port, "gwrest", 20);
  ASSERT_EQ(after.size(), 20u);
  EXPECT_EQ(after.front(), before.back() + 1) << gw.Log();
  std::set<int64_t> all(before.begin(), before.end());
  for (int64_t id : after) EXPECT_TRUE(all.insert(id).second) << "ID " << id << " twice";

  // kill -9 now: what is left of the kept rest was deleted before it was served.
  gw.process->Kill();
  gw.process->WaitExit(seconds(10));
  started = cluster.Start({&gw});
  ASSERT_TRUE(started) << started.error();
  auto last = Single(gw.port, "gwrest", 5);
  ASSERT_EQ(last.size(), 5u);
  EXPECT_GT(last.front(), after.back() + 1) << "the rest came back after a crash";
  for (int64_t id : last) EXPECT_TRUE(all.insert(id).second) << "ID " << id << " twice";
}

}  // namespace
}  // namespace kleaf::integration
