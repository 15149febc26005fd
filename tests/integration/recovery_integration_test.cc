// Disaster recovery of the state topic: `kleaf state replay` rebuilds a RocksDB that a standalone
// kleaf serves with the live cluster's tags, and `kleaf state export` + `kleaf state import
// --bump` carry the tags to a new topic prefix (a lost topic) above every ID served before.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class RecoveryIntegrationTest : public KafkaTest {};

// Loads each gateway of `gateways` with 2 clients over `tags` for at most a few seconds; returns
// the highest ID served per tag (with ADD_FAILUREs for whatever went wrong).
std::map<std::string, int64_t> ServeSome(const std::vector<Node*>& gateways,
                                         const std::vector<std::string>& tags) {
  std::vector<std::unique_ptr<Load>> loads;
  for (const Node* gw : gateways) {
    LoadOptions o;
    o.name = gw->name;
    o.port = gw->port;
    o.tags = tags;
    o.threads = 2;
    o.batch_max = 40;
    o.max_requests = 250;
    loads.push_back(std::make_unique<Load>(o));
  }
  std::map<std::string, int64_t> highest;
  std::vector<const Load*> all;
  for (auto& l : loads) {
    EXPECT_TRUE(l->WaitFor([](auto& c) { return c.replies >= 500; }, seconds(60))) << l->Summary();
    l->Stop();
    std::cout << l->Summary() << std::endl;
    if (!l->failures().empty()) ADD_FAILURE() << FailureReport(*l);
    all.push_back(l.get());
  }
  for (const auto& tag : tags) {
    auto ids = AllIds(all, tag);
    EXPECT_FALSE(ids.empty()) << tag;
    EXPECT_EQ(FindDuplicates(ids).count, 0) << tag;
    highest[tag] = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end());
  }
  return highest;
}

TEST_F(RecoveryIntegrationTest, ReplayedStateServedByStandaloneEqualsTheLiveCluster) {
  Cluster cluster(broker_, "replay", {{"segment.max_step", "1000"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  const uint16_t admin_port = nodes->gateways[0]->port;
  std::vector<std::string> tags;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    tags.push_back(TagOnPartition("replay", p, Cluster::kPartitions));
    auto put = PutTag(admin_port, tags.back(), R"({"step":20})");
    ASSERT_TRUE(put) << put.error();
  }
  // Set by hand, never served; and one served, then deleted.
  auto put =
      PutTag(admin_port, "replay-manual", R"({"step":30,"max_id":5000,"description":"by hand"})");
  ASSERT_TRUE(put) << put.error();
  put = PutTag(admin_port, "replay-gone", R"({"step":10})");
  ASSERT_TRUE(put) << put.error();
  auto gone_ids = FetchIds(admin_port, "replay-gone", 5);
  ASSERT_TRUE(gone_ids) << gone_ids.error();
  auto deleted = DeleteTag(admin_port, "replay-gone");
  ASSERT_TRUE(deleted) << deleted.error();

  ServeSome(nodes->gateways, tags);
  // The loaded gateways go (no preload of theirs can land later); a fresh one lists the state.
  for (Node* gw : nodes->gateways) {
    gw->process->Terminate();
    auto status = gw->process->WaitExit(seconds(20));
    EXPECT_TRUE(status.exited && status.code == 0) << gw->name << ": " << status.ToString();
  }
  Node& lister = cluster.AddGateway("gw-lister", 2);
  auto started = cluster.Start({&lister});
  ASSERT_TRUE(started) << started.error();
  auto live = ListTags(lister.port);
  ASSERT_TRUE(live) << live.error();
  EXPECT_EQ(live->size(), tags.size() + 1);
  EXPECT_FALSE(live->contains("replay-gone"));
  ASSERT_TRUE(live->contains("replay-manual"));
  EXPECT_EQ(live->at("replay-manual"), (TagState{5000, 30, "by hand"}));

  // Replay into a fresh state.path, then serve that state with a standalone kleaf.
  const auto replayed_state = cluster.dir() / "replayed-state";
  auto replay_config =
      cluster.WriteConfig("replay.yaml", cluster.Config("replayer", replayed_state));
  auto replay = cluster.Run({"state", "replay", "--config", replay_config.string()});
  ASSERT_TRUE(replay.status.exited && replay.status.code == 0)
      << replay.status.ToString() << "\nstdout:\n"
      << replay.out << "\nstderr:\n"
      << replay.err;
  std::cout << "replay: " << replay.out;
  EXPECT_NE(replay.out.find("replayed"), std::string::npos) << replay.out;
  auto standalone_config = cluster.WriteConfig("standalone.yaml", e2e::TestConfig(replayed_state));
  auto standalone = e2e::StartStandalone(standalone_config);
  ASSERT_TRUE(standalone) << standalone.error();
  auto replayed = ListTags(standalone->port);
  ASSERT_TRUE(replayed) << replayed.error();

  auto live_after = ListTags(lister.port);
  ASSERT_TRUE(live_after) << live_after.error();
  EXPECT_EQ(*live_after, *live) << "the live state moved while the test compared it";
  EXPECT_EQ(replayed->size(), live->size());
  for (const auto& [tag, state] : *live) {
    SCOPED_TRACE(tag);
    auto it = replayed->find(tag);
    ASSERT_NE(it, replayed->end()) << "missing from the replayed state";
    EXPECT_EQ(it->second.max_id, state.max_id);
    EXPECT_EQ(it->second.step, state.step);
    EXPECT_EQ(it->second.description, state.description);
  }
  for (const auto& [tag, state] : *replayed) {
    EXPECT_TRUE(live->contains(tag)) << tag << ": only in the replayed state";
  }
}

TEST_F(RecoveryIntegrationTest, ExportThenImportOnANewPrefixContinuesAboveEveryIdServed) {
  constexpr int64_t kBump = 100000;
  e2e::TempDir export_dir;  // outlives both clusters
  const auto export_file = export_dir.path() / "tags.json";
  std::vector<std::string> tags;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    tags.push_back(TagOnPartition("export", p, Cluster::kPartitions));
  }
  std::map<std::string, int64_t> served;     // highest ID served per tag before the loss
  std::map<std::string, TagState> exported;  // the live tags at export time
  {
    Cluster old_cluster(broker_, "export", {{"segment.max_step", "1000"}});
    auto nodes = old_cluster.StartNodes(1, 1);
    ASSERT_TRUE(nodes) << nodes.error();
    const uint16_t port = nodes->gateways[0]->port;
    for (const auto& tag : tags) {
      auto put = PutTag(port, tag, R"({"step":25,"description":"exported"})");
      ASSERT_TRUE(put) << put.error();
    }
    served = ServeSome(nodes->gateways, tags);
    auto live = ListTags(port);
    ASSERT_TRUE(live) << live.error();
    exported = *live;

    auto result = old_cluster.Run({"state", "export", export_file.string(), "--config",
                                   nodes->allocators[0]->config.string()});
    ASSERT_TRUE(result.status.exited && result.status.code == 0)
        << result.status.ToString() << "\nstdout:\n"
        << result.out << "\nstderr:\n"
        << result.err;
    std::cout << "export: " << result.out;
  }  // the old cluster and its topics are gone for good (the "loss")

  auto file = nlohmann::json::parse(e2e::ReadFile(export_file), nullptr, false);
  ASSERT_TRUE(file.is_object() && file.contains("tags") && file["tags"].is_array()) << file.dump();
  std::map<std::string, nlohmann::json> in_file;
  for (const auto& t : file["tags"]) in_file[t.value("tag", std::string())] = t;
  EXPECT_EQ(in_file.size(), exported.size()) << "the export file:\n" << file.dump(2);
  for (const auto& [tag, state] : exported) {
    SCOPED_TRACE(tag);
    EXPECT_GT(state.max_id, served[tag]) << "an ID at or above the durable max_id was served";
    EXPECT_TRUE(in_file.contains(tag)) << "missing from the export";
    if (!in_file.contains(tag)) continue;
    EXPECT_EQ(in_file[tag].value("max_id", int64_t{-1}), state.max_id);
    EXPECT_EQ(in_file[tag].value("step", int64_t{-1}), state.step);
  }

  Cluster new_cluster(broker_, "import", {{"segment.max_step", "1000"}});
  auto nodes = new_cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  const uint16_t port = nodes->gateways[0]->port;
  auto import_config = new_cluster.WriteConfig(
      "import.yaml", new_cluster.Config("importer", new_cluster.dir() / "importer-state")
                         .Set("kafka.reply_partition", "3"));
  auto result = new_cluster.Run({"state", "import", export_file.string(), "--bump",
                                 std::to_string(kBump), "--config", import_config.string()});
  ASSERT_TRUE(result.status.exited && result.status.code == 0)
      << result.status.ToString() << "\nstdout:\n"
      << result.out << "\nstderr:\n"
      << result.err;
  std::cout << "import: " << result.out;

  auto live = ListTags(port);
  ASSERT_TRUE(live) << live.error();
  for (const auto& [tag, state] : exported) {
    if (!in_file.contains(tag)) continue;  // reported above
    SCOPED_TRACE(tag);
    ASSERT_TRUE(live->contains(tag)) << "not imported";
    EXPECT_EQ(live->at(tag).max_id, state.max_id + kBump);
    EXPECT_EQ(live->at(tag).step, state.step);
    EXPECT_EQ(live->at(tag).description, state.description);
    for (int count : {1, 30}) {
      auto ids = FetchIds(port, tag, count);
      ASSERT_TRUE(ids) << ids.error();
      for (int64_t id : *ids) {
        EXPECT_GT(id, served[tag]) << "an ID served before the loss can come again";
        EXPECT_GE(id, state.max_id + kBump);
      }
    }
  }
}

}  // namespace
}  // namespace kleaf::integration
