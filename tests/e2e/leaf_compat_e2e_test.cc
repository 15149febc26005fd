// What a Leaf user's clients and tools find on a standalone kleaf (docs/migrating-from-leaf.md):
// the get routes answer every method Leaf's do, /decodeSnowflakeId, /cache and /db (admin) answer
// with Leaf's field names, and `kleaf state import --from-leaf --standalone` carries a leaf_alloc
// dump into a stopped standalone's store, refusing while one runs. The cluster shape of the same
// routes and import: tests/integration/leaf_mariadb_integration_test.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr char kLeafAllow[] = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
constexpr char kLeafHeader[] = "biz_tag\tmax_id\tstep\tdescription\n";

json BodyOf(const HttpReply& reply) { return json::parse(reply.body, nullptr, false); }

std::string ErrorCode(const HttpReply& reply) {
  json j = BodyOf(reply);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "<no error body>";
  return j["error"].value("code", "<no code>");
}

class LeafCompatE2eTest : public ::testing::Test {
 protected:
  std::filesystem::path Config(TestConfig config) {
    return dir_.WriteFile("kleaf.yaml", config.Yaml());
  }
  TestConfig Defaults() { return TestConfig(dir_.path() / "state"); }
  void Start(const std::filesystem::path& config) {
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    server_ = std::move(*server);
    client_ = std::make_unique<HttpClient>(server_.port);
  }
  void Stop() {
    client_.reset();
    server_.process->Signal(SIGTERM);
    auto status = server_.process->WaitExit(kExitTimeout);
    EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  }
  void PutTag(const std::string& tag, int64_t step, int64_t max_id) {
    auto put = client_->Put("/api/v1/tags/" + tag, json{{"step", step}, {"max_id", max_id}}.dump(),
                            Bearer(kAdminToken));
    ASSERT_TRUE(put) << put.error();
    ASSERT_EQ(put->status, 200) << put->body;
  }
  // One ID of a Leaf get route by `method`; -1 (and a failure) for anything else.
  int64_t LeafId(const std::string& method, const std::string& target) {
    auto reply = client_->Request(method, target, "", {});
    if (!reply) {
      ADD_FAILURE() << reply.error();
      return -1;
    }
    EXPECT_EQ(reply->status, 200) << method << " " << target << ": " << reply->body;
    auto ids = IdsOf(*reply, true, "");
    if (!ids) {
      ADD_FAILURE() << method << " " << target << ": " << ids.error();
      return -1;
    }
    return ids->front();
  }
  json GetJson(const std::string& target, const Headers& headers = {}) {
    auto reply = client_->Get(target, headers);
    EXPECT_TRUE(reply) << reply.error();
    if (!reply) return json();
    EXPECT_EQ(reply->status, 200) << target << ": " << reply->body;
    EXPECT_NE(reply->Header("Content-Type").find("application/json"), std::string::npos);
    return BodyOf(*reply);
  }
  // The status line and what follows the header section of a raw HEAD answer.
  std::pair<int, std::string> Head(const std::string& target, const std::string& extra = "") {
    auto raw = RawConnection::Connect(server_.port);
    EXPECT_TRUE(raw) << raw.error();
    if (!raw) return {0, ""};
    raw->Send("HEAD " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra +
              "Connection: close\r\n\r\n");
    auto got = raw->ReadUntilClosed(std::chrono::milliseconds(10000));
    EXPECT_TRUE(got.closed);
    auto end = got.data.find("\r\n\r\n");
    EXPECT_NE(end, std::string::npos) << got.data;
    if (end == std::string::npos || got.data.size() < 12) return {0, got.data};
    return {std::stoi(got.data.substr(9, 3)), got.data.substr(end + 4)};
  }
  CommandResult ImportLeaf(const std::string& dump, const std::filesystem::path& config,
                           const std::string& name = "leaf_alloc.tsv") {
    auto file = dir_.WriteFile(name, dump);
    return RunKleaf({"state", "import", "--from-leaf", file.string(), "--bump", "0", "--standalone",
                     "--config", config.string()});
  }

  TempDir dir_;
  Server server_;
  std::unique_ptr<HttpClient> client_;
};

// Leaf maps /api/segment/get/{key} and /api/snowflake/get/{key} with @RequestMapping and no
// method: Spring serves every method but OPTIONS (which it answers with the Allow list) and
// Tomcat refuses TRACE. kleaf's own routes keep their methods.
TEST_F(LeafCompatE2eTest, GetRoutesAnswerTheMethodsLeafsDo) {
  Start(Config(Defaults()));
  PutTag("orders", 10, 100);
  int64_t last = 99;
  for (const std::string method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    SCOPED_TRACE(method);
    const int64_t id = LeafId(method, "/api/segment/get/orders");
    EXPECT_EQ(id, last + 1) << "segment IDs of one buffer come in order";
    last = id;
    EXPECT_GT(LeafId(method, "/api/snowflake/get/orders"), 0);
  }
  auto [head_status, head_rest] = Head("/api/segment/get/orders");
  EXPECT_EQ(head_status, 200);
  EXPECT_EQ(head_rest, "") << "a HEAD answer has no body";
  ++last;  // the HEAD drew an ID, as Leaf's does (Spring serves HEAD with the GET handler)

  for (const std::string target : {"/api/segment/get/orders", "/api/snowflake/get/orders"}) {
    auto options = client_->Request("OPTIONS", target, "", {});
    ASSERT_TRUE(options) << options.error();
    EXPECT_EQ(options->status, 200) << options->body;
    EXPECT_EQ(options->Header("Allow"), kLeafAllow);
    EXPECT_EQ(options->body, "");
    auto trace = client_->Request("TRACE", target, "", {});
    ASSERT_TRUE(trace) << trace.error();
    EXPECT_EQ(trace->status, 405) << trace->body;
    EXPECT_EQ(ErrorCode(*trace), "method_not_allowed");
    EXPECT_EQ(trace->Header("Allow"), kLeafAllow);
  }
  EXPECT_EQ(LeafId("GET", "/api/segment/get/orders"), last + 1) << "OPTIONS or TRACE drew an ID";

  for (const std::string target : {"/api/v1/segment/orders", "/api/v1/snowflake/orders",
                                   "/decodeSnowflakeId?snowflakeId=1", "/cache", "/db"}) {
    for (const std::string method : {"POST", "DELETE", "OPTIONS"}) {
      auto reply = client_->Request(method, target, "", Bearer(kAdminToken));
      ASSERT_TRUE(reply) << reply.error();
      EXPECT_EQ(reply->status, 405) << method << " " << target << ": " << reply->body;
      EXPECT_EQ(reply->Header("Allow"), "GET, HEAD") << method << " " << target;
    }
  }
  EXPECT_EQ(client_->connections_opened(), 1);
}

TEST_F(LeafCompatE2eTest, DecodeSnowflakeIdAnswersLeafsFieldsWithTheConfiguredLayout) {
  constexpr int64_t kEpoch = 1262304000000;  // 2010-01-01T00:00:00Z
  Start(Config(Defaults()
                   .Set("snowflake.timestamp_bits", "39")
                   .Set("snowflake.worker_bits", "13")
                   .Set("snowflake.sequence_bits", "11")
                   .Set("snowflake.epoch_ms", std::to_string(kEpoch))
                   .Set("snowflake.time_unit_ms", "10")
                   .Set("snowflake.worker_id", "4097")));
  const int64_t id = LeafId("GET", "/api/snowflake/get/any");
  ASSERT_GT(id, 0);
  json kleaf = GetJson("/api/v1/snowflake/decode/" + std::to_string(id));
  ASSERT_TRUE(kleaf.is_object());
  ASSERT_EQ(kleaf.value("worker_id", int64_t{-1}), 4097) << kleaf.dump();
  std::string time = kleaf.value("time", "");  // 2026-01-02T03:04:05.678Z
  ASSERT_EQ(time.size(), 24u) << kleaf.dump();
  time[10] = ' ';
  time.pop_back();

  json leaf = GetJson("/decodeSnowflakeId?snowflakeId=" + std::to_string(id));
  EXPECT_EQ(leaf, json({{"timestamp", std::to_string(kleaf.value("timestamp_ms", int64_t{0})) +
                                          "(" + time + ")"},
                        {"workerId", "4097"},
                        {"sequenceId", std::to_string(kleaf.value("sequence", int64_t{-1}))}}));
  EXPECT_EQ(GetJson("/decodeSnowflakeId?other=1&snowflakeId=" + std::to_string(id)), leaf);
  auto [head_status, head_rest] = Head("/decodeSnowflakeId?snowflakeId=" + std::to_string(id));
  EXPECT_EQ(head_status, 200);
  EXPECT_EQ(head_rest, "");

  for (const std::string bad :
       {"/decodeSnowflakeId", "/decodeSnowflakeId?snowflakeId=", "/decodeSnowflakeId?snowflakeId",
        "/decodeSnowflakeId?id=5", "/decodeSnowflakeId?snowflakeId=abc",
        "/decodeSnowflakeId?snowflakeId=-1",
        "/decodeSnowflakeId?snowflakeId=9223372036854775808"}) {
    SCOPED_TRACE(bad);
    auto reply = client_->Get(bad);
    ASSERT_TRUE(reply) << reply.error();
    EXPECT_EQ(reply->status, 400) << reply->body;
    EXPECT_EQ(ErrorCode(*reply), "invalid_argument") << reply->body;
    EXPECT_NE(reply->body.find("snowflakeId"), std::string::npos) << reply->body;
  }
}

TEST_F(LeafCompatE2eTest, CacheShowsEachBufferAsLeafsSegmentBufferView) {
  Start(Config(Defaults()));
  EXPECT_EQ(GetJson("/cache"), json::object()) << "no tag buffered yet";
  PutTag("orders", 10, 100);
  ASSERT_EQ(LeafId("GET", "/api/segment/get/orders"), 100);
  ASSERT_EQ(LeafId("GET", "/api/segment/get/orders"), 101);
  // Past 10% (segment.preload_percent) of the active segment the standby one is fetched, twice
  // the step (Leaf's dynamic step: the first segment lasted under 15 minutes). Wait for it,
  // bounded.
  json view;
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  do {
    view = GetJson("/cache");
    if (view.contains("orders") && view["orders"].value("nextReady", false)) break;
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(view, json::parse(R"({"orders":{"key":"orders","initOk":true,"nextReady":true,"pos":0,
      "value0":102,"max0":110,"step0":10,"value1":110,"max1":130,"step1":20}})"))
      << view.dump();
  auto [head_status, head_rest] = Head("/cache");
  EXPECT_EQ(head_status, 200);
  EXPECT_EQ(head_rest, "");
}

TEST_F(LeafCompatE2eTest, DbListsTheTagRecordsForAdminsOnly) {
  Start(Config(Defaults()));
  PutTag("orders", 10, 100);
  auto described = client_->Put("/api/v1/tags/users", R"({"step":500,"description":"用户 ids"})",
                                Bearer(kAdminToken));
  ASSERT_TRUE(described) << described.error();
  ASSERT_EQ(described->status, 200) << described->body;

  for (const Headers& bad : std::vector<Headers>{
           {}, Bearer("wrong-token-wrong-token"), {{"Authorization", kAdminToken}}}) {
    auto reply = client_->Get("/db", bad);
    ASSERT_TRUE(reply) << reply.error();
    EXPECT_EQ(reply->status, 401) << reply->body;
    EXPECT_EQ(ErrorCode(*reply), "unauthenticated");
    EXPECT_EQ(reply->body.find("orders"), std::string::npos) << "the records leaked";
  }
  EXPECT_EQ(Head("/db").first, 401);

  json db = GetJson("/db", Bearer(kAdminToken));
  ASSERT_TRUE(db.is_object() && db.contains("items") && db["items"].is_array()) << db.dump();
  ASSERT_EQ(db["items"].size(), 2u) << db.dump();
  json tags = GetJson("/api/v1/tags", Bearer(kAdminToken));
  for (size_t i = 0; i < 2; ++i) {
    const json& row = db["items"][i];
    const json& tag = tags["tags"][i];
    EXPECT_EQ(row, json({{"biz_tag", tag["tag"]},
                         {"max_id", tag["max_id"]},
                         {"step", tag["step"]},
                         {"description", tag["description"]},
                         {"update_time", tag["update_time"]}}));
  }
  EXPECT_EQ(db["items"][0].value("biz_tag", ""), "orders");
  EXPECT_EQ(db["items"][0].value("max_id", int64_t{0}), 100);
  EXPECT_EQ(db["items"][1].value("description", ""), "用户 ids");
  auto [head_status, head_rest] =
      Head("/db", "Authorization: Bearer " + std::string(kAdminToken) + "\r\n");
  EXPECT_EQ(head_status, 200);
  EXPECT_EQ(head_rest, "");
}

// A Leaf user moving to the standalone shape: dump leaf_alloc, import into the store while no
// standalone runs, start it: every ID is at or above Leaf's max_id, and Leaf's rows show in /db.
TEST_F(LeafCompatE2eTest, ImportFromLeafIntoAStoppedStandaloneServesAboveLeafsMaxId) {
  const auto config = Config(Defaults());
  const std::string dump = std::string(kLeafHeader) +
                           "leaf-segment-test\t2001\t2000\tTest leaf Segment Mode Get Id\n"
                           "orders\t4000000000000000000\t100\tNULL\n"
                           "tabbed\t7\t3\tcol\\tumn\\nline \xe8\xae\xa2\xe5\x8d\x95\n";
  auto imported = ImportLeaf(dump, config);
  ASSERT_TRUE(imported.status.exited && imported.status.code == 0)
      << imported.status.ToString() << "\n"
      << imported.out << imported.err;
  EXPECT_NE(imported.out.find("imported 3 Leaf tags"), std::string::npos) << imported.out;
  EXPECT_NE(imported.out.find("3 raised, 0 already as high, 0 failed"), std::string::npos)
      << imported.out;
  // The same dump again raises nothing, and says so.
  auto same = ImportLeaf(dump, config, "same.tsv");
  ASSERT_TRUE(same.status.exited && same.status.code == 0) << same.err;
  EXPECT_NE(same.out.find("0 raised, 3 already as high, 0 failed"), std::string::npos) << same.out;

  Start(config);
  struct Want {
    std::string tag;
    int64_t max_id;
    int64_t step;
    std::string description;
  };
  const std::vector<Want> wants = {
      {"leaf-segment-test", 2001, 2000, "Test leaf Segment Mode Get Id"},
      {"orders", 4000000000000000000, 100, ""},
      {"tabbed", 7, 3, "col\tumn\nline \xe8\xae\xa2\xe5\x8d\x95"}};
  json db = GetJson("/db", Bearer(kAdminToken));
  ASSERT_EQ(db["items"].size(), wants.size()) << db.dump();
  std::map<std::string, int64_t> served;  // the highest ID served, per tag
  for (size_t i = 0; i < wants.size(); ++i) {
    SCOPED_TRACE(wants[i].tag);
    EXPECT_EQ(db["items"][i].value("biz_tag", ""), wants[i].tag);
    EXPECT_EQ(db["items"][i].value("max_id", int64_t{0}), wants[i].max_id);
    EXPECT_EQ(db["items"][i].value("step", int64_t{0}), wants[i].step);
    EXPECT_EQ(db["items"][i].value("description", ""), wants[i].description);
    // The first ID is Leaf's max_id itself: Leaf handed out only IDs below it.
    EXPECT_EQ(LeafId("GET", "/api/segment/get/" + wants[i].tag), wants[i].max_id);
    for (int n = 0; n < 5; ++n) {
      served[wants[i].tag] = LeafId("POST", "/api/segment/get/" + wants[i].tag);
      EXPECT_GT(served[wants[i].tag], wants[i].max_id);
    }
  }

  // While the standalone holds the store, an import is refused and changes nothing.
  auto busy = ImportLeaf(
      std::string(kLeafHeader) + "orders\t4100000000000000000\t100\tNULL\n" + "fresh\t5\t5\tNULL\n",
      config, "busy.tsv");
  EXPECT_TRUE(busy.status.exited && busy.status.code == 1) << busy.status.ToString();
  EXPECT_NE(busy.err.find("another kleaf process"), std::string::npos) << busy.err;
  EXPECT_NE(busy.err.find("stop it, import, then start it again"), std::string::npos) << busy.err;
  auto fresh = client_->Get("/api/v1/tags/fresh", Bearer(kAdminToken));
  ASSERT_TRUE(fresh) << fresh.error();
  EXPECT_EQ(fresh->status, 404) << fresh->body;
  Stop();

  // A re-import (the same dump, or an older one) lowers nothing; a newer max_id raises.
  auto again = ImportLeaf(
      std::string(kLeafHeader) + "leaf-segment-test\t1\t2000\tNULL\n" + "tabbed\t10000\t3\tNULL\n",
      config, "again.tsv");
  ASSERT_TRUE(again.status.exited && again.status.code == 0) << again.err;
  EXPECT_NE(again.out.find("1 raised, 1 already as high, 0 failed"), std::string::npos)
      << again.out;
  Start(config);
  json after = GetJson("/db", Bearer(kAdminToken));
  ASSERT_EQ(after["items"].size(), 3u) << after.dump();
  EXPECT_GT(after["items"][0].value("max_id", int64_t{0}), 2001) << after.dump();
  EXPECT_EQ(after["items"][2].value("max_id", int64_t{0}), 10000) << after.dump();
  // The standalone first serves the unused rest of the segments it held at its stop (below the
  // raised max_id, above everything it served), then IDs from 10000.
  for (const auto& [tag, highest] : served) {
    EXPECT_GT(LeafId("GET", "/api/segment/get/" + tag), highest) << tag;
  }
  auto batch = client_->Get("/api/v1/segment/tabbed?count=50");
  ASSERT_TRUE(batch) << batch.error();
  auto ids = IdsOf(*batch, false, "tabbed");
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_GT(ids->front(), served["tabbed"]);
  EXPECT_GE(ids->back(), 10000) << "the raised max_id was not used";
}

// A dump with one bad row is refused as a whole, naming the line; nothing is imported.
TEST_F(LeafCompatE2eTest, ABadLeafDumpImportsNothing) {
  const auto config = Config(Defaults());
  auto bad = ImportLeaf(std::string(kLeafHeader) + "good\t10\t5\tNULL\n" + "bad tag\t10\t5\tNULL\n",
                        config);
  EXPECT_TRUE(bad.status.exited && bad.status.code == 1) << bad.status.ToString();
  EXPECT_NE(bad.err.find("line 3: biz_tag 'bad tag'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("nothing imported"), std::string::npos) << bad.err;
  auto negative = ImportLeaf(std::string(kLeafHeader) + "good\t-10\t5\tNULL\n", config, "neg.tsv");
  EXPECT_TRUE(negative.status.exited && negative.status.code == 1);
  EXPECT_NE(negative.err.find("line 2: max_id: must not be negative"), std::string::npos)
      << negative.err;

  Start(config);
  json db = GetJson("/db", Bearer(kAdminToken));
  EXPECT_EQ(db, json({{"items", json::array()}})) << "a refused dump imported rows";
}

// A standalone's config (no kafka.bootstrap) without --standalone: the refusal says what to add.
TEST_F(LeafCompatE2eTest, AnImportWithoutKafkaOrStandaloneNamesTheFlag) {
  const auto config = Config(Defaults());
  auto file = dir_.WriteFile("leaf.tsv", std::string(kLeafHeader) + "a\t1\t1\tNULL\n");
  auto run = RunKleaf({"state", "import", "--from-leaf", file.string(), "--bump", "0", "--config",
                       config.string()});
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString() << run.err;
  EXPECT_NE(run.err.find("kafka.bootstrap: required"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("add --standalone"), std::string::npos) << run.err;
}

TEST_F(LeafCompatE2eTest, ImportNeedsExactlyOneSource) {
  auto file = dir_.WriteFile("leaf.tsv", kLeafHeader);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"state", "import", "--bump", "0"},
           {"state", "import", file.string(), "--from-leaf", file.string(), "--bump", "0"},
           {"state", "import", "--from-leaf", file.string()}}) {
    auto run = RunKleaf(args);
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString() << run.err;
  }
}

}  // namespace
}  // namespace kleaf::e2e
