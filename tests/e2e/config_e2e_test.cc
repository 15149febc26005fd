// Bad configuration stops `kleaf standalone` before it serves, with a message naming the key.
#include <gtest/gtest.h>

#include "tests/e2e/e2e_env.h"

namespace kleaf::e2e {
namespace {

struct BadConfig {
  std::string name;
  std::string key;    // set to `value` on top of the test defaults ("" = none)
  std::string value;
  std::string extra;  // YAML appended verbatim
  std::string named;  // stderr must contain this
};

void PrintTo(const BadConfig& c, std::ostream* os) { *os << c.name; }

class ConfigErrorE2eTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigErrorE2eTest, StopsStartupNamingTheKey) {
  const BadConfig& bad = GetParam();
  TempDir dir;
  TestConfig config(dir.path() / "state");
  if (!bad.key.empty()) config.Set(bad.key, bad.value);
  auto file = dir.WriteFile("kleaf.yaml", config.Yaml() + bad.extra);
  CommandResult run = RunKleaf({"standalone", "--config", file.string()});
  ASSERT_FALSE(run.status.timed_out) << "kleaf started with a bad config; stdout: " << run.out;
  // Config errors exit 2 (other startup failures exit 1).
  EXPECT_TRUE(run.status.exited && run.status.code == 2)
      << run.status.ToString() << "\n" << run.err;
  EXPECT_NE(run.err.find(bad.named), std::string::npos)
      << "stderr does not name '" << bad.named << "':\n" << run.err;
  EXPECT_EQ(run.out.find("listening"), std::string::npos) << run.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "state"))
      << "state was created before the config was validated";
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, ConfigErrorE2eTest,
    ::testing::Values(
        BadConfig{"UnknownKey", "http.bogus", "1", "", "http.bogus"},
        BadConfig{"UnknownSection", "", "", "bogus:\n  key: 1\n", "bogus"},
        BadConfig{"MisspelledContractKey", "snowflake.workerid", "3", "", "snowflake.workerid"},
        BadConfig{"WrongTypeInt", "http.threads", "many", "", "http.threads"},
        BadConfig{"WrongTypeMapping", "http.threads", "{a: 1}", "", "http.threads"},
        BadConfig{"WrongTypeBool", "segment.auto_create", "maybe", "", "segment.auto_create"},
        BadConfig{"WrongTypeSection", "", "", "kafka: 12\n", "kafka"},
        BadConfig{"OutOfRangeLow", "http.threads", "0", "", "http.threads"},
        BadConfig{"OutOfRangeHigh", "segment.preload_percent", "100", "",
                  "segment.preload_percent"},
        BadConfig{"OutOfRangePort", "http.listen", "127.0.0.1:70000", "", "http.listen"},
        BadConfig{"ListenWithoutPort", "http.listen", "localhost", "", "http.listen"},
        BadConfig{"ListenHostNotAnAddress", "http.listen", "\"no such host:0\"", "", "http.listen"},
        BadConfig{"WorkerIdAboveLayout", "snowflake.worker_id", "1024", "", "snowflake.worker_id"},
        BadConfig{"NegativeWorkerId", "snowflake.worker_id", "-1", "", "snowflake.worker_id"},
        BadConfig{"EpochInTheFuture", "snowflake.epoch_ms", "99999999999999", "",
                  "snowflake.epoch_ms"},
        BadConfig{"LayoutNot63Bits", "snowflake.timestamp_bits", "42", "",
                  "snowflake.timestamp_bits"},
        BadConfig{"ShortAdminToken", "admin.token", "short", "", "admin.token"},
        BadConfig{"BadLogLevel", "log.level", "loud", "", "log.level"},
        BadConfig{"EmptyStatePath", "state.path", "\"\"", "", "state.path"},
        BadConfig{"DuplicateSection", "", "", "http:\n  threads: 2\n", "http: duplicate key"},
        BadConfig{"DuplicateKey", "", "",
                  "workers:\n  lease_ttl_ms: 30000\n  lease_ttl_ms: 40000\n",
                  "workers.lease_ttl_ms: duplicate key"}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return info.param.name; });

// The layout is valid on its own, but its 2^20 ms after an epoch in 1970 ended long ago: a config
// error found before the state directory is created, not a failure after it.
TEST(ConfigLayoutE2eTest, TimestampBitsUsedUpIsAConfigErrorBeforeStateIsCreated) {
  TempDir dir;
  TestConfig config(dir.path() / "state");
  config.Set("snowflake.epoch_ms", "0")
      .Set("snowflake.timestamp_bits", "20")
      .Set("snowflake.worker_bits", "21")
      .Set("snowflake.sequence_bits", "22");
  auto file = dir.WriteFile("kleaf.yaml", config.Yaml());
  CommandResult run = RunKleaf({"standalone", "--config", file.string()});
  ASSERT_FALSE(run.status.timed_out) << run.out;
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString() << "\n" << run.err;
  EXPECT_NE(run.err.find("snowflake.timestamp_bits"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "state"));
}

TEST(ConfigFileE2eTest, MissingConfigFileIsNamed) {
  TempDir dir;
  const std::string missing = (dir.path() / "no-such-kleaf.yaml").string();
  CommandResult run = RunKleaf({"standalone", "--config", missing});
  ASSERT_FALSE(run.status.timed_out) << run.out;
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString();
  EXPECT_NE(run.err.find(missing), std::string::npos) << run.err;
}

// kafka.properties reach librdkafka (here: a CA file that does not exist, which librdkafka checks
// when the client is created, before any connection), and an environment variable overrides a key
// of the file.
TEST(ConfigFileE2eTest, KafkaPropertiesReachLibrdkafkaAndVariablesOverrideTheFile) {
  TempDir dir;
  auto file =
      dir.WriteFile("kleaf.yaml",
                    "node: {id: props-test}\n"
                    "state: {path: '" +
                        (dir.path() / "state").string() +
                        "'}\n"
                        "kafka:\n  bootstrap: '127.0.0.1:1'\n"
                        "  properties: {security.protocol: SSL, ssl.ca.location: /no/ca.pem}\n");
  CommandResult run = RunKleaf({"gateway", "--config", file.string()});
  ASSERT_FALSE(run.status.timed_out) << run.err;
  EXPECT_TRUE(run.status.exited && run.status.code != 0) << run.status.ToString();
  EXPECT_NE(run.err.find("ssl.ca.location failed"), std::string::npos) << run.err;

  setenv("KLEAF_KAFKA__PROPERTIES", "{security.protocol: SSL, ssl.ca.location: /other/ca.pem}", 1);
  CommandResult overridden = RunKleaf({"gateway", "--config", file.string()});
  unsetenv("KLEAF_KAFKA__PROPERTIES");
  EXPECT_NE(overridden.err.find("/other/ca.pem"), std::string::npos) << overridden.err;
  EXPECT_EQ(overridden.err.find("/no/ca.pem"), std::string::npos) << overridden.err;
}

TEST(ConfigFileE2eTest, InvalidYamlIsReported) {
  TempDir dir;
  auto file = dir.WriteFile("kleaf.yaml", "http:\n  listen: [unclosed\n");
  CommandResult run = RunKleaf({"standalone", "--config", file.string()});
  ASSERT_FALSE(run.status.timed_out) << run.out;
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString();
  EXPECT_NE(run.err.find(file.string()), std::string::npos) << run.err;
}

TEST(ConfigFileE2eTest, PortInUseIsReportedNamingHttpListen) {
  TempDir dir;
  auto first_config = dir.WriteFile("first.yaml", TestConfig(dir.path() / "a").Yaml());
  auto first = StartStandalone(first_config);
  ASSERT_TRUE(first) << first.error();
  auto second_config = dir.WriteFile(
      "second.yaml", TestConfig(dir.path() / "b")
                         .Set("http.listen", "127.0.0.1:" + std::to_string(first->port))
                         .Yaml());
  CommandResult run = RunKleaf({"standalone", "--config", second_config.string()});
  ASSERT_FALSE(run.status.timed_out) << run.out;
  EXPECT_TRUE(run.status.exited && run.status.code != 0) << run.status.ToString();
  EXPECT_NE(run.err.find("http.listen"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kleaf::e2e
