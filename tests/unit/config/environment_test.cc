// Environment variables over the config file (KLEAF_<SECTION>__<KEY>) and the admin token read
// from a file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config/config.h"

namespace kleaf::config {
namespace {

TEST(EnvironmentTest, AVariableOverridesTheFileAndTheDefault) {
  auto c = ParseConfig("kafka: {bootstrap: 'file:9092'}\nsegment: {max_step: 500}\n",
                       {{"KLEAF_KAFKA__BOOTSTRAP", "env:9092"},
                        {"KLEAF_SEGMENT__DEFAULT_STEP", "50"},
                        {"KLEAF_SEGMENT__AUTO_CREATE", "true"},
                        {"KLEAF_HTTP__LISTEN", "0.0.0.0:9000"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->kafka.bootstrap, "env:9092");
  EXPECT_EQ(c->segment.max_step, 500);  // from the file: no variable
  EXPECT_EQ(c->segment.default_step, 50);
  EXPECT_TRUE(c->segment.auto_create);
  EXPECT_EQ(c->http.listen, "0.0.0.0:9000");
}

TEST(EnvironmentTest, AValueIsTakenAsWrittenUnlessItIsAListOrMapping) {
  // '#' and ': ' would be a comment and a mapping in YAML.
  auto c = ParseConfig("", {{"KLEAF_ADMIN__TOKEN", "a#b: c-0123456789abcdef"},
                            {"KLEAF_PRODUCER__STREAMS", "[{tag: order, batch_size: 10}]"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->admin.token, "a#b: c-0123456789abcdef");
  ASSERT_EQ(c->producer.streams.size(), 1u);
  EXPECT_EQ(c->producer.streams[0].tag, "order");
  EXPECT_EQ(c->producer.streams[0].batch_size, 10);
}

TEST(EnvironmentTest, AnUnknownKeyOrABadValueNamesTheVariable) {
  auto unknown = ParseConfig("", {{"KLEAF_KAFKA__BOOTSTRAPS", "x:1"}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("KLEAF_KAFKA__BOOTSTRAPS: not a config key"),
            std::string::npos)
      << unknown.error().message;
  auto bad = ParseConfig("", {{"KLEAF_HTTP__THREADS", "many"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("KLEAF_HTTP__THREADS"), std::string::npos);
  EXPECT_NE(bad.error().message.find("http.threads: expected an integer"), std::string::npos)
      << bad.error().message;
  // Cross-checks see the overridden values.
  auto crossed = ParseConfig(
      "", {{"KLEAF_SEGMENT__DEFAULT_STEP", "2000000"}, {"KLEAF_SEGMENT__MAX_STEP", "1000"}});
  ASSERT_FALSE(crossed);
  EXPECT_NE(crossed.error().message.find("segment.default_step"), std::string::npos);
}

TEST(EnvironmentTest, OnlyDoubleUnderscoreVariablesAreConfig) {
  // The scripts' own variables (KLEAF_KAFKA_CACHE, KLEAF_DEPS_CACHE, KLEAF_TEST_*) are not config.
  setenv("KLEAF_KAFKA_CACHE", "/tmp/x", 1);
  setenv("KLEAF_HTTP__THREADS", "7", 1);
  const Environment env = ConfigEnvironment();
  unsetenv("KLEAF_KAFKA_CACHE");
  unsetenv("KLEAF_HTTP__THREADS");
  bool threads = false;
  for (const auto& [name, value] : env) {
    EXPECT_NE(name, "KLEAF_KAFKA_CACHE");
    if (name == "KLEAF_HTTP__THREADS") threads = value == "7";
  }
  EXPECT_TRUE(threads);
}

class TokenFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& content) {
    std::ofstream(path_) << content;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_ =
      std::filesystem::temp_directory_path() / ("kleaf-token-test-" + std::to_string(::getpid()));
};

TEST_F(TokenFileTest, TheTokenIsTheFilesFirstLine) {
  auto c = ParseConfig("admin: {token_file: '" + Write("secret-0123456789abcdef\n") + "'}");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->admin.token, "secret-0123456789abcdef");
  auto from_env = ParseConfig("", {{"KLEAF_ADMIN__TOKEN_FILE", path_.string()}});
  ASSERT_TRUE(from_env) << from_env.error().message;
  EXPECT_EQ(from_env->admin.token, "secret-0123456789abcdef");
}

TEST_F(TokenFileTest, AShortMissingOrDoubledTokenIsRefused) {
  auto shortish = ParseConfig("admin: {token_file: '" + Write("short\n") + "'}");
  ASSERT_FALSE(shortish);
  EXPECT_NE(shortish.error().message.find("at least 16 characters"), std::string::npos);
  auto missing = ParseConfig("admin: {token_file: /nonexistent/kleaf-token}");
  ASSERT_FALSE(missing);
  EXPECT_NE(
      missing.error().message.find("admin.token_file: cannot read '/nonexistent/kleaf-token'"),
      std::string::npos)
      << missing.error().message;
  auto both = ParseConfig("admin: {token: 0123456789abcdef0, token_file: '" +
                          Write("secret-0123456789abcdef\n") + "'}");
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("admin.token_file: set together with admin.token"),
            std::string::npos);
}

}  // namespace
}  // namespace kleaf::config

namespace kleaf::config {
namespace {

TEST(KafkaPropertiesTest, SecuritySettingsPassAndGuaranteesAreProtected) {
  auto c = ParseConfig(
      "kafka:\n  properties:\n    security.protocol: SASL_SSL\n    sasl.mechanism: SCRAM-SHA-512\n"
      "    sasl.username: kleaf\n    sasl.password: 's3cret: #1'\n    ssl.ca.location: "
      "/etc/ca.pem\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->kafka.properties.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(c->kafka.properties.at("sasl.password"), "s3cret: #1");
  EXPECT_EQ(c->kafka.properties.size(), 5u);
  for (const char* key : {"isolation.level", "enable.idempotence", "transactional.id", "group.id",
                          "bootstrap.servers", "enable.auto.commit", "acks"}) {
    auto refused = ParseConfig(std::string("kafka: {properties: {") + key + ": x}}");
    ASSERT_FALSE(refused) << key;
    EXPECT_EQ(
        refused.error().message.rfind(std::string("kafka.properties.") + key + ": not passed", 0),
        0u)
        << refused.error().message;
  }
  // As an environment variable: YAML flow text.
  auto env = ParseConfig("", {{"KLEAF_KAFKA__PROPERTIES", "{security.protocol: SSL}"}});
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_EQ(env->kafka.properties.at("security.protocol"), "SSL");
  // Block YAML, as a Secret made from a file holds it, and flow text after a blank.
  auto block = ParseConfig("", {{"KLEAF_KAFKA__PROPERTIES",
                                 "security.protocol: SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n"
                                 "sasl.password: \"s3cret: #1\"\n"}});
  ASSERT_TRUE(block) << block.error().message;
  EXPECT_EQ(block->kafka.properties.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(block->kafka.properties.at("sasl.password"), "s3cret: #1");
  EXPECT_EQ(block->kafka.properties.size(), 3u);
  auto spaced = ParseConfig("", {{"KLEAF_KAFKA__PROPERTIES", " {security.protocol: SSL}"}});
  ASSERT_TRUE(spaced) << spaced.error().message;
  EXPECT_EQ(spaced->kafka.properties.at("security.protocol"), "SSL");
  // A one-line value stays as written, ': ' and all; a token read from a file keeps its text.
  auto token = ParseConfig("", {{"KLEAF_ADMIN__TOKEN", "abc: def #1 0123456789"}});
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->admin.token, "abc: def #1 0123456789");
}

}  // namespace
}  // namespace kleaf::config
