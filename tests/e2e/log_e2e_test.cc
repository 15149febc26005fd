// Structured logs: with log.format json every stderr line is one JSON object with time, level,
// component and message, and the events that matter (segment fetched, kept rest) are there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/e2e/e2e_env.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

TEST(LogE2eTest, JsonFormatWritesOneObjectPerLineWithComponentAndLevel) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("log.level", "info")
                                                .Set("log.format", "json")
                                                .Set("segment.auto_create", "true")
                                                .Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  auto reply = client.Get("/api/segment/get/orders");
  ASSERT_TRUE(reply && reply->status == 200);
  server->process->Terminate();
  ExitStatus status = server->process->WaitExit(seconds(10));
  ASSERT_TRUE(status.exited && status.code == 0) << status.ToString();

  std::istringstream lines(server->process->Stderr());
  std::string line;
  int objects = 0;
  bool fetched = false, kept = false;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    ++objects;
    for (const char* field : {"time", "level", "component", "message"}) {
      ASSERT_TRUE(j.contains(field) && j[field].is_string()) << field << " missing: " << line;
    }
    EXPECT_TRUE(j["time"].get<std::string>().ends_with("Z")) << line;
    EXPECT_EQ(j["message"].get<std::string>().rfind("[", 0), std::string::npos)
        << "the component prefix stays out of the message: " << line;
    if (j["component"] == "segment" && j["level"] == "info") {
      const std::string m = j["message"];
      fetched |= m.find("tag orders: fetched [") != std::string::npos;
      kept |= m.find("kept ") != std::string::npos;
    }
  }
  EXPECT_GE(objects, 3);
  EXPECT_TRUE(fetched) << server->process->Stderr();
  EXPECT_TRUE(kept) << server->process->Stderr();
}

}  // namespace
}  // namespace kleaf::e2e
