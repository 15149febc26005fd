// Disaster recovery of the state topic: `kleaf state replay` rebuilds a RocksDB that a standalone
// kleaf serves with the live cluster's tags, and `kleaf state export` + `kleaf state import
// --bump` carry the tags, the sequence spaces and their section maxima to a new topic prefix (a
// lost topic) above every ID and sequence value served before.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/e2e/http_client.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class RecoveryIntegrationTest : public KafkaTest {};

// `kleaf state export FILE` of `cluster`, with the config of `allocator`; must exit 0.
void ExportState(Cluster& cluster, const std::filesystem::path& file, const Node& allocator) {
  auto result =
      cluster.Run({"state", "export", file.string(), "--config", allocator.config.string()});
  ASSERT_TRUE(result.status.exited && result.status.code == 0)
      << result.status.ToString() << "\nstdout:\n"
      << result.out << "\nstderr:\n"
      << result.err;
  std::cout << "export: " << result.out;
}

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

    ExportState(old_cluster, export_file, *nodes->allocators[0]);
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

// The next value of `key` of `space` through the gateway at `port`; 0 (with a failure) on error.
uint64_t NextSeq(e2e::HttpClient& http, const std::string& space, uint64_t key) {
  auto reply = http.Get("/api/v1/seq/" + space + "/" + std::to_string(key));
  if (!reply || reply->status != 200) {
    ADD_FAILURE() << "seq " << space << "/" << key << ": "
                  << (reply ? std::to_string(reply->status) + " " + reply->body : reply.error());
    return 0;
  }
  return std::stoull(nlohmann::json::parse(reply->body)["seq"].get<std::string>());
}

TEST_F(RecoveryIntegrationTest, ExportThenImportCarriesSequencesAboveEveryValueServed) {
  constexpr int64_t kBump = 1000;
  constexpr uint64_t kSectionSize = 10;
  constexpr uint64_t kKeys = 120;  // 12 sections, spread over every partition
  e2e::TempDir export_dir;
  const auto export_file = export_dir.path() / "state.json";
  std::map<uint64_t, uint64_t> served;  // key of "inbox" -> the highest value served
  uint64_t gone_served = 0;             // key 3 of the deleted space "gone"
  {
    Cluster old_cluster(broker_, "seqexport");
    auto nodes = old_cluster.StartNodes(1, 1);
    ASSERT_TRUE(nodes) << nodes.error();
    const uint16_t port = nodes->gateways[0]->port;
    ASSERT_TRUE(AdminCall(port, "PUT", "/api/v1/spaces/inbox",
                          R"({"section_size":10,"step":7,"description":"mail"})"));
    ASSERT_TRUE(AdminCall(port, "PUT", "/api/v1/spaces/gone", R"({"section_size":5,"step":3})"));
    ASSERT_TRUE(AdminCall(port, "PUT", "/api/v1/spaces/clash", R"({"section_size":10})"));
    e2e::HttpClient http(port);
    for (uint64_t round = 0; round < 4; ++round) {
      for (uint64_t key = 0; key < kKeys; key += 1 + round)
        served[key] = NextSeq(http, "inbox", key);
    }
    for (int i = 0; i < 5; ++i) gone_served = NextSeq(http, "gone", 3);
    NextSeq(http, "clash", 1);
    ASSERT_TRUE(AdminCall(port, "DELETE", "/api/v1/spaces/gone", ""));
    ExportState(old_cluster, export_file, *nodes->allocators[0]);
  }  // the old cluster and its topics are gone for good

  auto file = nlohmann::json::parse(e2e::ReadFile(export_file), nullptr, false);
  ASSERT_TRUE(file.is_object()) << e2e::ReadFile(export_file);
  EXPECT_EQ(file.value("version", 0), 2);
  ASSERT_TRUE(file.contains("spaces") && file.contains("sections")) << file.dump(2);
  std::map<std::string, nlohmann::json> spaces;
  for (const auto& sp : file["spaces"]) spaces[sp.value("space", std::string())] = sp;
  ASSERT_EQ(spaces.size(), 3u) << file.dump(2);
  EXPECT_EQ(spaces["inbox"].value("section_size", 0), 10);
  EXPECT_EQ(spaces["inbox"].value("step", 0), 7);
  EXPECT_TRUE(spaces["gone"].value("deleted", false));
  std::map<uint64_t, uint64_t> exported_max;  // section of "inbox" -> max_seq
  for (const auto& sec : file["sections"]) {
    if (sec.value("space", std::string()) == "inbox") {
      exported_max[sec["section"].get<uint64_t>()] = sec["max_seq"].get<uint64_t>();
    }
  }
  ASSERT_EQ(exported_max.size(), kKeys / kSectionSize) << file.dump(2);
  for (const auto& [key, value] : served) {
    EXPECT_LE(value, exported_max[key / kSectionSize]) << "key " << key << " above its section";
  }

  Cluster new_cluster(broker_, "seqimport");
  auto nodes = new_cluster.StartNodes(1, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  const uint16_t port = nodes->gateways[0]->port;
  // A space of the same name with another section_size: refused by name, the rest imported.
  ASSERT_TRUE(AdminCall(port, "PUT", "/api/v1/spaces/clash", R"({"section_size":20})"));
  auto import_config = new_cluster.WriteConfig(
      "import.yaml", new_cluster.Config("importer", new_cluster.dir() / "importer-state")
                         .Set("kafka.reply_partition", "3"));
  auto result = new_cluster.Run({"state", "import", export_file.string(), "--bump",
                                 std::to_string(kBump), "--config", import_config.string()});
  std::cout << "import: " << result.out << result.err;
  EXPECT_TRUE(result.status.exited && result.status.code == 1) << result.status.ToString();
  EXPECT_NE(result.err.find("space clash: section_size: cannot change from 20 to 10"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("2 of 3 spaces, " + std::to_string(exported_max.size() + 1) +
                            " sections raised, 0 already as high, 1 failed"),
            std::string::npos)
      << result.out;

  auto inbox = AdminCall(port, "GET", "/api/v1/spaces/inbox", "");
  ASSERT_TRUE(inbox) << inbox.error();
  EXPECT_EQ((*inbox)["section_size"], 10);
  EXPECT_EQ((*inbox)["step"], 7);
  EXPECT_EQ((*inbox)["description"], "mail");
  e2e::HttpClient http(port);
  for (uint64_t key = 0; key < kKeys; ++key) {
    SCOPED_TRACE("key " + std::to_string(key));
    const uint64_t next = NextSeq(http, "inbox", key);
    EXPECT_GT(next, exported_max[key / kSectionSize] + kBump);
    if (served.contains(key)) {
      EXPECT_GT(next, served[key] + kBump);
    }
  }
  // The deleted space stays deleted; re-created, it continues above its exported maximum.
  auto refused = http.Get("/api/v1/seq/gone/3");
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_EQ(refused->status, 404) << refused->body;
  ASSERT_TRUE(AdminCall(port, "PUT", "/api/v1/spaces/gone", "{}"));
  EXPECT_GT(NextSeq(http, "gone", 3), gone_served + kBump);
}

}  // namespace
}  // namespace kleaf::integration
