// The ID routes' answers for unknown tags, with and without segment.auto_create.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

// Checks the error shape {"error":{"code":"…","message":"…"}} (docs/architecture.md, "Routes and
// errors") and the code.
void ExpectError(const HttpReply& reply, int status, const std::string& code) {
  EXPECT_EQ(reply.status, status) << reply.body;
  EXPECT_NE(reply.Header("Content-Type").find("application/json"), std::string::npos)
      << reply.Header("Content-Type");
  auto json = nlohmann::json::parse(reply.body, nullptr, false);
  ASSERT_TRUE(json.is_object() && json.contains("error") && json["error"].is_object())
      << reply.body;
  EXPECT_EQ(json["error"].value("code", ""), code) << reply.body;
  ASSERT_TRUE(json["error"].contains("message") && json["error"]["message"].is_string())
      << reply.body;
  EXPECT_FALSE(json["error"]["message"].get<std::string>().empty()) << reply.body;
}

TEST(ApiE2eTest, UnknownTagIs404WithJsonErrorBody) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  for (const std::string target :
       {"/api/v1/segment/no-such-tag", "/api/v1/segment/no-such-tag?count=5",
        "/api/segment/get/no-such-tag", "/api/v1/segment/no-such-tag"}) {
    SCOPED_TRACE(target);
    auto reply = client.Get(target);
    ASSERT_TRUE(reply) << reply.error();
    ExpectError(*reply, 404, "not_found");
    EXPECT_NE(reply->body.find("no-such-tag"), std::string::npos) << "message should name the tag";
  }
  // The errors did not cost the keep-alive connection.
  EXPECT_EQ(client.connections_opened(), 1);
  // Snowflake IDs need no tag record.
  auto snowflake = client.Get("/api/v1/snowflake/no-such-tag?count=3");
  ASSERT_TRUE(snowflake) << snowflake.error();
  auto ids = IdsOf(*snowflake, false, "no-such-tag");
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_EQ(ids->size(), 3u);
}

TEST(ApiE2eTest, UnknownTagIsCreatedWithAutoCreate) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("segment.auto_create", "true")
                                                .Set("segment.default_step", "100")
                                                .Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  auto batch = client.Get("/api/v1/segment/fresh-tag?count=5");
  ASSERT_TRUE(batch) << batch.error();
  ASSERT_EQ(batch->status, 200) << batch->body;
  EXPECT_NE(batch->Header("Content-Type").find("application/json"), std::string::npos);
  auto ids = IdsOf(*batch, false, "fresh-tag");
  ASSERT_TRUE(ids) << ids.error();
  ASSERT_EQ(ids->size(), 5u);
  auto single = client.Get("/api/segment/get/fresh-tag");
  ASSERT_TRUE(single) << single.error();
  ASSERT_EQ(single->status, 200) << single->body;
  EXPECT_NE(single->Header("Content-Type").find("text/plain"), std::string::npos);
  auto one = IdsOf(*single, true, "fresh-tag");
  ASSERT_TRUE(one) << one.error();
  EXPECT_GT(one->front(), ids->back());
  // The created tag is visible to the admin API.
  auto tag = client.Get("/api/v1/tags/fresh-tag", Bearer(kAdminToken));
  ASSERT_TRUE(tag) << tag.error();
  EXPECT_EQ(tag->status, 200) << tag->body;
  auto json = nlohmann::json::parse(tag->body, nullptr, false);
  EXPECT_EQ(json.value("step", int64_t{0}), 100) << tag->body;
  EXPECT_GT(json.value("max_id", int64_t{0}), one->front()) << tag->body;
}

}  // namespace
}  // namespace kleaf::e2e
