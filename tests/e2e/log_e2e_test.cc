// Structured logs: with log.format json every stderr line is one JSON object with time, level,
// component and message, and the events that matter (segment fetched, kept rest) are there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kleaf_process.h"

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

// librdkafka's own lines (here: connections refused by a port nothing listens on) go through
// kleaf's logger: JSON objects of component "kafka" with a mapped level, no line in librdkafka's
// own "%7|…|FAC|" format.
TEST(LogE2eTest, LibrdkafkasLinesGoThroughKleafsJsonLogger) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("log.format", "json")
                                                .Set("node.id", "log-test-gateway")
                                                .Set("kafka.bootstrap", "127.0.0.1:1")
                                                .Yaml());
  ProcessOptions options;
  options.args = {"gateway", "--config", config.string()};
  auto process = KleafProcess::Start(std::move(options));
  ASSERT_TRUE(process) << process.error();
  const bool logged = (*process)->WaitForStderr(R"("component":"kafka")", seconds(30));
  (*process)->Kill();
  (*process)->WaitExit(seconds(10));
  const std::string err = (*process)->Stderr();
  ASSERT_TRUE(logged) << "no librdkafka line through kleaf's logger within 30 s:\n" << err;

  std::istringstream lines(err);
  std::string line;
  int kafka_lines = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON (librdkafka printing on its own?): " << line;
    if (j["component"] != "kafka") continue;
    ++kafka_lines;
    const std::string level = j["level"];
    EXPECT_TRUE(level == "error" || level == "warning" || level == "info" || level == "debug")
        << line;
    EXPECT_NE(j["message"].get<std::string>().find("kleaf-log-test-gateway#"), std::string::npos)
        << "the message names the client (client.id kleaf-NODE): " << line;
  }
  EXPECT_GE(kafka_lines, 1) << err;
}

}  // namespace
}  // namespace kleaf::e2e
