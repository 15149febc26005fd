// Obfuscated tags in a cluster (issue 17): two gateways draw from the same obfuscated tags, and
// from a plain tag switched to obfuscated while both hold its segments: no ID twice, none <= 0,
// and the admin views through either gateway show the mode but never the key.
#include <gtest/gtest.h>

#include <unordered_set>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

class IdModeIntegrationTest : public KafkaTest {};

constexpr int kBatch = 10000;

// `rounds` batches of kBatch from each gateway in turn, appended to `out`.
void Draw(const std::vector<Node*>& gateways, const std::string& tag, int rounds,
          std::vector<int64_t>& out) {
  for (int i = 0; i < rounds; ++i) {
    for (const Node* gw : gateways) {
      auto ids = FetchIds(gw->port, tag, kBatch);
      ASSERT_TRUE(ids) << gw->name << ", " << tag << ": " << ids.error();
      out.insert(out.end(), ids->begin(), ids->end());
    }
  }
}

TEST_F(IdModeIntegrationTest, TwoGatewaysNeverServeOneObfuscatedIdTwice) {
  Cluster cluster(broker_, "idmode", {{"segment.max_step", "20000"}});
  auto nodes = cluster.StartNodes(1, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  const auto& gws = nodes->gateways;
  ASSERT_TRUE(Ok(PutTag(gws[0]->port, "idmode-obf", R"({"step":3000,"id_mode":"obfuscated"})")));
  ASSERT_TRUE(
      Ok(PutTag(gws[1]->port, "idmode-time", R"({"step":3000,"id_mode":"obfuscated_time"})")));
  ASSERT_TRUE(Ok(PutTag(gws[0]->port, "idmode-live", R"({"step":3000})")));

  std::map<std::string, std::vector<int64_t>> ids;
  for (const std::string tag : {"idmode-obf", "idmode-time", "idmode-live"}) {
    Draw(gws, tag, 25, ids[tag]);  // 500,000 IDs per tag
  }
  // The live switch: both gateways still hold plain segments of idmode-live.
  auto switched = PutTag(gws[1]->port, "idmode-live", R"({"id_mode":"obfuscated"})");
  ASSERT_TRUE(switched) << switched.error();
  Draw(gws, "idmode-live", 25, ids["idmode-live"]);
  for (const std::string tag : {"idmode-obf", "idmode-time"}) Draw(gws, tag, 25, ids[tag]);

  for (const auto& [tag, all] : ids) {
    SCOPED_TRACE(tag);
    std::unordered_set<int64_t> unique;
    for (int64_t id : all) {
      ASSERT_GT(id, 0);
      EXPECT_TRUE(unique.insert(id).second) << "ID " << id << " served twice";
    }
  }
  // Each gateway shows the mode; no answer carries a key (32 hex digits after "id_key").
  for (const Node* gw : gws) {
    e2e::HttpClient client(gw->port);
    for (const std::string target :
         {"/api/v1/tags", "/api/v1/tags/idmode-obf", "/db", "/cache", "/api/v1/status"}) {
      auto reply = client.Get(target, e2e::Bearer(e2e::kAdminToken));
      ASSERT_TRUE(reply) << reply.error();
      EXPECT_EQ(reply->body.find("id_key"), std::string::npos) << gw->name << target;
      if (target == "/api/v1/tags/idmode-obf") {
        EXPECT_NE(reply->body.find(R"("id_mode":"obfuscated")"), std::string::npos) << reply->body;
      }
    }
  }
}

}  // namespace
}  // namespace kleaf::integration
