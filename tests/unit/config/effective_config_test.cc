// What `kleaf config check` prints: every key with its effective value, secrets masked, in the
// file's shape (read back, it gives the same config).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"

namespace kleaf::config {
namespace {

constexpr const char* kToken = "an-admin-token-of-32-characters!";
constexpr const char* kPassword = "kafka-password-1";

TEST(SecretKeyTest, PasswordsSecretsTokensAndInlinePrivateKeysAreSecrets) {
  for (const char* key :
       {"admin.token", "kafka.properties.sasl.password", "kafka.properties.ssl.key.password",
        "kafka.properties.ssl.keystore.password", "kafka.properties.sasl.oauthbearer.client.secret",
        "kafka.properties.ssl.key.pem", "kafka.properties.SASL.Password",
        "kafka.properties.some.future.access.token"}) {
    EXPECT_TRUE(IsSecretKey(key)) << key;
  }
  for (const char* key : {"admin.token_file", "kafka.properties.ssl.keystore.location",
                          "kafka.properties.ssl.key.location", "kafka.properties.sasl.username",
                          "kafka.properties.sasl.mechanism", "kafka.properties.ssl.certificate.pem",
                          "kafka.bootstrap", "node.id"}) {
    EXPECT_FALSE(IsSecretKey(key)) << key;
  }
}

TEST(EffectiveConfigTest, SecretsFromTheFileAndTheEnvironmentAreMasked) {
  auto c = ParseConfig(std::string("admin: {token: ") + kToken +
                           "}\nkafka:\n  properties:\n    security.protocol: SASL_SSL\n"
                           "    sasl.mechanism: SCRAM-SHA-512\n    sasl.username: kleaf\n"
                           "    ssl.key.password: ssl-key-secret-9\n",
                       {{"KLEAF_KAFKA__PROPERTIES",
                         std::string("sasl.mechanism: SCRAM-SHA-512\nsasl.username: kleaf\n"
                                     "sasl.password: ") +
                             kPassword + "\nssl.key.password: ssl-key-secret-9\n"}});
  ASSERT_TRUE(c) << c.error().message;
  const std::string yaml = EffectiveConfigYaml(*c);
  for (const char* secret : {kToken, kPassword, "ssl-key-secret-9"}) {
    EXPECT_EQ(yaml.find(secret), std::string::npos) << secret << " printed:\n" << yaml;
  }
  const YAML::Node printed = YAML::Load(yaml);
  EXPECT_EQ(printed["admin"]["token"].as<std::string>(), kMaskedSecret);
  EXPECT_EQ(printed["kafka"]["properties"]["sasl.password"].as<std::string>(), kMaskedSecret);
  EXPECT_EQ(printed["kafka"]["properties"]["ssl.key.password"].as<std::string>(), kMaskedSecret);
  // What is not secret stays readable: that is what an operator checks.
  EXPECT_EQ(printed["kafka"]["properties"]["sasl.username"].as<std::string>(), "kleaf");
  EXPECT_EQ(printed["kafka"]["properties"]["sasl.mechanism"].as<std::string>(), "SCRAM-SHA-512");
}

TEST(EffectiveConfigTest, ATokenFileShowsItsPathNotItsToken) {
  const auto file = std::filesystem::path(::testing::TempDir()) / "effective_config_admin.token";
  std::ofstream(file) << kToken << "\n";
  auto c = ParseConfig("", {{"KLEAF_ADMIN__TOKEN_FILE", file.string()}});
  ASSERT_TRUE(c) << c.error().message;
  const std::string yaml = EffectiveConfigYaml(*c);
  EXPECT_EQ(yaml.find(kToken), std::string::npos) << yaml;
  EXPECT_EQ(YAML::Load(yaml)["admin"]["token_file"].as<std::string>(), file.string());
  std::filesystem::remove(file);
}

TEST(EffectiveConfigTest, AnEmptySecretIsShownEmptySoTheGeneratedTokenIsVisible) {
  auto c = ParseConfig("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(YAML::Load(EffectiveConfigYaml(*c))["admin"]["token"].as<std::string>(), "");
}

// The node of a dotted key: http.tls.cert_file is three levels deep.
YAML::Node Lookup(const YAML::Node& node, const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos || !node.IsMap()) return node[key];
  const YAML::Node child = node[key.substr(0, dot)];
  if (!child.IsDefined()) return child;
  return Lookup(child, key.substr(dot + 1));
}

// Every key of the reference is printed, defaults included.
TEST(EffectiveConfigTest, EveryKeyIsPrinted) {
  auto c = ParseConfig(
      "http: {tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}}\n"
      "kafka: {partitions: 6}\n");
  ASSERT_TRUE(c) << c.error().message;
  const YAML::Node printed = YAML::Load(EffectiveConfigYaml(*c));
  for (const KeyReference& ref : KeyReferences()) {
    if (ref.key == "admin.token_file") continue;  // printed instead of admin.token when set
    EXPECT_TRUE(Lookup(printed, ref.key).IsDefined()) << ref.key << " is not printed";
  }
}

// The printout of a config without secrets is a config file that gives the same config.
TEST(EffectiveConfigTest, ThePrintoutReadsBackAsTheSameConfig) {
  auto c = ParseConfig(
      "node: {id: gw-1}\nhttp: {listen: '[::1]:9443', threads: 4, tls: {cert_file: c.pem, "
      "key_file: k.pem}}\n"
      "segment: {auto_create: true, default_step: 200, max_step: 5000}\n"
      "snowflake: {worker_bits: 12, sequence_bits: 10, random_sequence_start: false}\n"
      "workers: {claim_timeout_ms: 9000}\nallocator: {batch_max: 64}\n"
      "kafka: {bootstrap: 'k1:9092,k2:9092', partitions: 24, properties: {client.rack: r1}}\n"
      "producer: {streams: [{tag: order}, {tag: order, mode: uuid7, batch_size: 500}]}\n"
      "datacenter: {index: 1, count: 2, peers: ['dc0:9092']}\nlog: {format: json}\n");
  ASSERT_TRUE(c) << c.error().message;
  const std::string yaml = EffectiveConfigYaml(*c);
  auto again = ParseConfig(yaml);
  ASSERT_TRUE(again) << again.error().message << "\n" << yaml;
  EXPECT_TRUE(*again == *c) << "read back as another config:\n" << yaml;
  EXPECT_EQ(EffectiveConfigYaml(*again), yaml);
}

}  // namespace
}  // namespace kleaf::config
