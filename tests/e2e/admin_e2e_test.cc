// The tag admin API with a generated token: authentication, create/read/list/update/delete, the
// refusal to lower max_id, and the token surviving a restart.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;

json BodyOf(const HttpReply& reply) { return json::parse(reply.body, nullptr, false); }

std::string ErrorCode(const HttpReply& reply) {
  json j = BodyOf(reply);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "<no error body>";
  return j["error"].value("code", "<no code>");
}

int64_t SegmentId(HttpClient& client, const std::string& tag) {
  auto reply = client.Get("/api/segment/get/" + tag);
  if (!reply) {
    ADD_FAILURE() << reply.error();
    return -1;
  }
  auto ids = IdsOf(*reply, true, tag);
  if (!ids) {
    ADD_FAILURE() << ids.error();
    return -1;
  }
  return ids->front();
}

TEST(AdminE2eTest, GeneratedTokenGuardsTagAdminAndSurvivesRestart) {
  TempDir dir;
  const auto state = dir.path() / "state";
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(state).Erase("admin.token").Yaml());
  std::string token;
  int64_t last_id = 0;
  {
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    token = ReadFile(state / "admin.token");
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    ASSERT_GE(token.size(), 16u) << "no usable token in " << (state / "admin.token");
    auto perms = std::filesystem::status(state / "admin.token").permissions();
    EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none)
        << "the admin token file is readable by others";

    HttpClient client(server->port);
    // Without the token, with a wrong one, or with another scheme: 401 on every admin route.
    const std::vector<Headers> bad = {
        {}, Bearer("wrong-token-wrong-token-wrong-00"), Bearer(token + "x"), Bearer(""),
        Bearer(token.substr(0, token.size() - 1)), {{"Authorization", "Basic " + token}},
        {{"Authorization", token}}};
    for (const auto& headers : bad) {
      SCOPED_TRACE(headers.empty() ? "no header" : headers.front().second);
      for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
               {"GET", "/api/v1/tags"}, {"GET", "/api/v1/tags/orders"},
               {"PUT", "/api/v1/tags/orders"}, {"DELETE", "/api/v1/tags/orders"}}) {
        auto reply =
            client.Request(method, target, method == "PUT" ? R"({"step":5})" : "", headers);
        ASSERT_TRUE(reply) << reply.error();
        EXPECT_EQ(reply->status, 401) << method << " " << target << ": " << reply->body;
        EXPECT_EQ(ErrorCode(*reply), "unauthenticated");
      }
    }
    // The rejected PUTs created nothing.
    auto none = client.Get("/api/segment/get/orders");
    ASSERT_TRUE(none) << none.error();
    EXPECT_EQ(none->status, 404) << none->body;

    const Headers auth = Bearer(token);
    auto put = client.Put("/api/v1/tags/orders",
                          R"({"step":50,"max_id":1000,"description":"order ids"})", auth);
    ASSERT_TRUE(put) << put.error();
    ASSERT_EQ(put->status, 200) << put->body;
    EXPECT_EQ(BodyOf(*put).value("max_id", int64_t{0}), 1000) << put->body;
    EXPECT_EQ(BodyOf(*put).value("step", int64_t{0}), 50) << put->body;

    auto get = client.Get("/api/v1/tags/orders", auth);
    ASSERT_TRUE(get) << get.error();
    ASSERT_EQ(get->status, 200) << get->body;
    json got = BodyOf(*get);
    EXPECT_EQ(got.value("tag", ""), "orders");
    EXPECT_EQ(got.value("description", ""), "order ids");
    EXPECT_EQ(got.value("max_id", int64_t{0}), 1000);

    auto second = client.Put("/api/v1/tags/users", R"({"step":10})", auth);
    ASSERT_TRUE(second) << second.error();
    ASSERT_EQ(second->status, 200) << second->body;
    auto list = client.Get("/api/v1/tags", auth);
    ASSERT_TRUE(list) << list.error();
    ASSERT_EQ(list->status, 200) << list->body;
    std::set<std::string> names;
    for (const auto& t : BodyOf(*list).value("tags", json::array())) {
      names.insert(t.value("tag", ""));
    }
    EXPECT_EQ(names, (std::set<std::string>{"orders", "users"})) << list->body;

    // IDs of the tag start at its max_id.
    const int64_t first_id = SegmentId(client, "orders");
    EXPECT_GE(first_id, 1000);
    last_id = SegmentId(client, "orders");
    EXPECT_GT(last_id, first_id);

    // Lowering max_id could hand out IDs again: 409. Raising it is fine.
    for (int64_t lower : {int64_t{1}, int64_t{999}, last_id}) {
      auto lowered = client.Put("/api/v1/tags/orders", json{{"max_id", lower}}.dump(), auth);
      ASSERT_TRUE(lowered) << lowered.error();
      EXPECT_EQ(lowered->status, 409) << "max_id " << lower << ": " << lowered->body;
      EXPECT_EQ(ErrorCode(*lowered), "failed_precondition");
    }
    auto raised = client.Put("/api/v1/tags/orders", R"({"max_id":1000000})", auth);
    ASSERT_TRUE(raised) << raised.error();
    EXPECT_EQ(raised->status, 200) << raised->body;
    // Bad bodies are 400.
    for (const std::string body : {"not json", R"({"step":"ten"})", R"({"bogus":1})", "[1,2]",
                                   R"({"step":0})", R"({"max_id":-5})", R"({"step":1.5})"}) {
      auto bad_body = client.Put("/api/v1/tags/orders", body, auth);
      ASSERT_TRUE(bad_body) << bad_body.error();
      EXPECT_EQ(bad_body->status, 400) << body << ": " << bad_body->body;
    }

    const int64_t users_before_delete = SegmentId(client, "users");
    auto del = client.Delete("/api/v1/tags/users", auth);
    ASSERT_TRUE(del) << del.error();
    EXPECT_EQ(del->status, 200) << del->body;
    auto gone = client.Get("/api/v1/tags/users", auth);
    ASSERT_TRUE(gone) << gone.error();
    EXPECT_EQ(gone->status, 404) << gone->body;
    auto gone_ids = client.Get("/api/segment/get/users");
    ASSERT_TRUE(gone_ids) << gone_ids.error();
    EXPECT_EQ(gone_ids->status, 404) << "a deleted tag still hands out IDs: " << gone_ids->body;
    auto del_again = client.Delete("/api/v1/tags/users", auth);
    ASSERT_TRUE(del_again) << del_again.error();
    EXPECT_EQ(del_again->status, 404) << del_again->body;
    // Re-created, the tag continues above everything its earlier life handed out.
    auto recreate_low = client.Put("/api/v1/tags/users", R"({"step":10,"max_id":1})", auth);
    ASSERT_TRUE(recreate_low) << recreate_low.error();
    EXPECT_EQ(recreate_low->status, 409) << "re-created below IDs already handed out: "
                                         << recreate_low->body;
    auto recreate = client.Put("/api/v1/tags/users", R"({"step":10})", auth);
    ASSERT_TRUE(recreate) << recreate.error();
    ASSERT_EQ(recreate->status, 200) << recreate->body;
    EXPECT_GT(SegmentId(client, "users"), users_before_delete);

    server->process->Terminate();
    ExitStatus status = server->process->WaitExit(kExitTimeout);
    EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  }
  {
    auto server = StartStandalone(config);
    ASSERT_TRUE(server) << server.error();
    std::string again = ReadFile(state / "admin.token");
    while (!again.empty() && (again.back() == '\n' || again.back() == '\r')) again.pop_back();
    EXPECT_EQ(again, token) << "the token file changed across a restart";
    HttpClient client(server->port);
    auto get = client.Get("/api/v1/tags/orders", Bearer(token));
    ASSERT_TRUE(get) << get.error();
    EXPECT_EQ(get->status, 200) << "the old token no longer works: " << get->body;
    EXPECT_GE(BodyOf(*get).value("max_id", int64_t{0}), 1000000) << get->body;
    // (The rest of a segment loaded before the restart may still be served: only "above" holds.)
    EXPECT_GT(SegmentId(client, "orders"), last_id);
  }
}

}  // namespace
}  // namespace kleaf::e2e
