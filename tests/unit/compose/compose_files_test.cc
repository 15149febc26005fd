// compose/docker-compose.yml and its kleaf configs: the topology the docs promise (3 KRaft
// brokers, 2 allocators, 2 gateways, 1 producer, replication factor 3), and configs kleaf accepts.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "config/config.h"

namespace kleaf {
namespace {

const std::filesystem::path kCompose = std::filesystem::path(KLEAF_SOURCE_DIR) / "compose";

// node[key], following YAML merge keys ("<<: *anchor"), which yaml-cpp does not resolve.
YAML::Node Lookup(const YAML::Node& node, const std::string& key) {
  if (node[key]) return node[key];
  if (node["<<"]) return Lookup(node["<<"], key);
  return YAML::Node();
}

std::string Env(const YAML::Node& service, const std::string& key) {
  YAML::Node v = Lookup(Lookup(service, "environment"), key);
  return v ? v.as<std::string>() : "";
}

// The non-comment lines of a .gitignore-style file.
std::set<std::string> PatternLines(const std::filesystem::path& file) {
  std::set<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') lines.insert(line);
  }
  return lines;
}

// compose/Dockerfile copies the whole checkout (`COPY . /src`): .dockerignore keeps out the git
// history and everything git ignores (build trees, local runs' state, compose/admin.token, a
// secret), and each of those rules is there in Docker's form (no leading slash).
TEST(ComposeFilesTest, TheImagesBuildContextLeavesOutHistoryStateAndSecrets) {
  const std::filesystem::path root(KLEAF_SOURCE_DIR);
  const auto docker = PatternLines(root / ".dockerignore");
  EXPECT_TRUE(docker.contains(".git"));
  EXPECT_TRUE(docker.contains("compose/admin.token"));
  const auto git = PatternLines(root / ".gitignore");
  ASSERT_FALSE(git.empty());
  for (std::string rule : git) {
    if (rule.starts_with("/")) rule.erase(0, 1);
    EXPECT_TRUE(docker.contains(rule)) << rule << " is ignored by git but sent to docker build";
  }
}

TEST(ComposeFilesTest, DockerComposeHasTheProductionTopology) {
  YAML::Node doc = YAML::LoadFile((kCompose / "docker-compose.yml").string());
  std::map<std::string, int> roles;
  std::set<std::string> voters;
  EXPECT_EQ(doc["secrets"]["kleaf_admin_token"]["file"].as<std::string>(""), "./admin.token");
  const std::filesystem::path token_file =
      std::filesystem::temp_directory_path() / ("kleaf-compose-token-" + std::to_string(getpid()));
  std::ofstream(token_file) << "compose-test-token-0123456789\n";
  for (const auto& service : doc["services"]) {
    const std::string name = service.first.as<std::string>();
    const YAML::Node& s = service.second;
    if (name.starts_with("kafka-")) {
      ++roles["kafka"];
      EXPECT_EQ(Env(s, "KAFKA_PROCESS_ROLES"), "broker,controller") << name;
      EXPECT_EQ(Env(s, "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"), "3") << name;
      EXPECT_EQ(Env(s, "KAFKA_NODE_ID"), name.substr(6)) << name;
      EXPECT_EQ(Env(s, "KAFKA_ADVERTISED_LISTENERS"), "PLAINTEXT://" + name + ":9092");
      voters.insert(Env(s, "KAFKA_CONTROLLER_QUORUM_VOTERS"));
      // The broker version the tests run by default (compose/pom.xml).
      EXPECT_EQ(Lookup(s, "image").as<std::string>(), "apache/kafka:4.4.0") << name;
      continue;
    }
    const std::string role = s["command"][0].as<std::string>();
    ++roles[role];
    const std::string config = s["command"][2].as<std::string>();
    const std::string file = config.substr(config.rfind('/') + 1);
    // The configs read the admin token from the service's secret, mounted at /run/secrets.
    const YAML::Node raw = YAML::LoadFile((kCompose / "config" / file).string());
    EXPECT_EQ(raw["admin"]["token_file"].as<std::string>(""), "/run/secrets/kleaf_admin_token")
        << file << ": no config holds the token itself";
    EXPECT_FALSE(raw["admin"]["token"]) << file;
    ASSERT_TRUE(Lookup(s, "secrets").IsSequence()) << name << " mounts no secret";
    EXPECT_EQ(Lookup(s, "secrets")[0].as<std::string>(), "kleaf_admin_token") << name;
    auto parsed = config::LoadConfigFile((kCompose / "config" / file).string(),
                                         {{"KLEAF_ADMIN__TOKEN_FILE", token_file.string()}});
    ASSERT_TRUE(parsed) << file << ": " << parsed.error().message;
    EXPECT_EQ(parsed->node.id, name) << file;
    EXPECT_EQ(parsed->kafka.replication_factor, 3) << file;
    EXPECT_EQ(parsed->kafka.bootstrap, "kafka-1:9092,kafka-2:9092,kafka-3:9092") << file;
  }
  EXPECT_EQ(roles["kafka"], 3);
  EXPECT_EQ(roles["allocator"], 2);
  EXPECT_EQ(roles["gateway"], 2);
  EXPECT_EQ(roles["producer"], 1);
  EXPECT_EQ(voters.size(), 1u) << "every broker must name the same controller quorum";
  std::filesystem::remove(token_file);
}

}  // namespace
}  // namespace kleaf
