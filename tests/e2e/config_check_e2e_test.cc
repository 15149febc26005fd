// `kleaf config check`: the real binary loads a config as a role would (file, then KLEAF_*
// variables), runs that role's start-up checks, prints the effective config with secrets masked
// and exits 0, or exits 2 naming the key (docs/operations.md, "Checking a config").
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/e2e/e2e_env.h"

namespace kleaf::e2e {
namespace {

constexpr char kPassword[] = "kafka-password-e2e-1";

bool Exited(const CommandResult& run, int code) {
  return run.status.exited && run.status.code == code;
}

// `env` KLEAF_...=... in front of kleaf: the variables a role would see.
CommandResult Check(const std::filesystem::path& file, const std::string& role,
                    std::vector<std::string> env = {}) {
  std::vector<std::string> args = {"config", "check", "--config", file.string()};
  if (!role.empty()) args.insert(args.end(), {"--role", role});
  std::vector<std::string> prefix;
  if (!env.empty()) {
    prefix = {"/usr/bin/env"};
    prefix.insert(prefix.end(), env.begin(), env.end());
  }
  return RunKleaf(args, prefix);
}

TEST(ConfigCheckE2eTest, AValidConfigPrintsTheEffectiveConfigWithSecretsMasked) {
  TempDir dir;
  std::ostringstream yaml;
  yaml << "state: {path: '" << (dir.path() / "state").string() << "'}\n"
       << "admin: {token: " << kAdminToken << "}\n"
       << "kafka:\n  bootstrap: 'file:9092'\n  properties:\n"
       << "    security.protocol: SASL_SSL\n    sasl.mechanism: SCRAM-SHA-512\n"
       << "segment: {max_step: 5000}\n";
  const auto file = dir.WriteFile("gateway.yaml", yaml.str());
  std::ostringstream properties;  // replaces kafka.properties, as in the chart's Secret
  properties << "KLEAF_KAFKA__PROPERTIES={security.protocol: SASL_SSL, "
             << "sasl.mechanism: SCRAM-SHA-512, sasl.username: kleaf, sasl.password: " << kPassword
             << "}";
  auto run =
      Check(file, "gateway", {"KLEAF_KAFKA__BOOTSTRAP=env-1:9092,env-2:9092", properties.str()});
  ASSERT_TRUE(Exited(run, 0)) << run.status.ToString() << "\n" << run.err;
  EXPECT_NE(run.err.find("config OK for gateway"), std::string::npos) << run.err;
  // The environment wins over the file, as for the role.
  EXPECT_NE(run.out.find("bootstrap: env-1:9092,env-2:9092"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("max_step: 5000"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("sasl.username: kleaf"), std::string::npos) << run.out;
  // Defaults are printed too.
  EXPECT_NE(run.out.find("batch_max: 256"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("sasl.password: \"***\""), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("token: \"***\""), std::string::npos) << run.out;
  for (const char* secret : {kPassword, kAdminToken}) {
    EXPECT_EQ(run.out.find(secret), std::string::npos) << secret << " printed:\n" << run.out;
    EXPECT_EQ(run.err.find(secret), std::string::npos) << secret << " printed:\n" << run.err;
  }
  // Nothing was started or created: the check touches no state.path.
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "state"));
}

TEST(ConfigCheckE2eTest, ABadKeyExitsTwoNamingIt) {
  TempDir dir;
  const auto file = dir.WriteFile("bad.yaml", "http: {threads: 0}\n");
  auto run = Check(file, "standalone");
  EXPECT_TRUE(Exited(run, 2)) << run.status.ToString() << "\n" << run.err;
  EXPECT_NE(run.err.find("http.threads: must be between 1 and 256"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");

  auto variable = Check(dir.WriteFile("ok.yaml", ""), "", {"KLEAF_SEGMENT__MAX_STEP=0"});
  EXPECT_TRUE(Exited(variable, 2)) << variable.status.ToString() << "\n" << variable.err;
  EXPECT_NE(variable.err.find("KLEAF_SEGMENT__MAX_STEP (segment.max_step: must be between"),
            std::string::npos)
      << variable.err;
}

TEST(ConfigCheckE2eTest, TheRoleAddsItsOwnChecks) {
  TempDir dir;
  const auto file = dir.WriteFile("no-kafka.yaml", "segment: {auto_create: true}\n");
  // The keys alone are fine, and a standalone needs no Kafka ...
  auto keys = Check(file, "");
  EXPECT_TRUE(Exited(keys, 0)) << keys.status.ToString() << "\n" << keys.err;
  EXPECT_NE(keys.err.find("the keys only"), std::string::npos) << keys.err;
  auto standalone = Check(file, "standalone");
  EXPECT_TRUE(Exited(standalone, 0)) << standalone.status.ToString() << "\n" << standalone.err;
  // ... a gateway does, and a producer needs streams as well.
  auto gateway = Check(file, "gateway");
  EXPECT_TRUE(Exited(gateway, 2)) << gateway.status.ToString() << "\n" << gateway.err;
  EXPECT_NE(gateway.err.find("kafka.bootstrap: required"), std::string::npos) << gateway.err;
  auto producer = Check(file, "producer", {"KLEAF_KAFKA__BOOTSTRAP=k:9092"});
  EXPECT_TRUE(Exited(producer, 2)) << producer.status.ToString() << "\n" << producer.err;
  EXPECT_NE(producer.err.find("producer.streams: no stream"), std::string::npos) << producer.err;

  auto role = RunKleaf({"config", "check", "--role", "leader"});
  EXPECT_TRUE(Exited(role, 2)) << role.status.ToString();
  EXPECT_NE(role.err.find("leader"), std::string::npos) << role.err;
}

// The start-up check of "I5 with a lease" (docs/architecture.md, "Settings"): an allocator whose
// takeover wait would end before a lease of its own settings could refuses to start, exit 2 naming
// sequence.lease_ms, before it touches Kafka (the bootstrap below does not exist). No setting in
// range makes such a wait, so a build that forgot the wait's (1+ρ) plays it (the test hook
// KLEAF_ALLOCATOR_TEST_WAIT_WITHOUT_DRIFT); with no margin nothing else covers the difference.
TEST(ConfigCheckE2eTest, AnAllocatorWhoseTakeoverWaitDoesNotCoverItsLeaseIsRefusedAtStart) {
  TempDir dir;
  std::ostringstream yaml;
  yaml << "state: {path: '" << (dir.path() / "state").string() << "'}\n"
       << "kafka: {bootstrap: 'no-such-broker.invalid:9092'}\n"
       << "sequence: {lease_ms: 5000, clock_drift_ppm: 1000, lease_margin_ms: 0}\n";
  const auto file = dir.WriteFile("allocator.yaml", yaml.str());
  auto sound = Check(file, "allocator");
  EXPECT_TRUE(Exited(sound, 0)) << sound.status.ToString() << "\n" << sound.err;
  const std::string hook = "KLEAF_ALLOCATOR_TEST_WAIT_WITHOUT_DRIFT=1";
  auto checked = Check(file, "allocator", {hook});
  EXPECT_TRUE(Exited(checked, 2)) << checked.status.ToString() << "\n" << checked.err;
  EXPECT_NE(checked.err.find("sequence.lease_ms: a takeover wait of 5000 ms can end after"),
            std::string::npos)
      << checked.err;
  // The role itself, as a Deployment starts it: refused at once, naming the same key.
  auto started = RunKleaf({"allocator", "--config", file.string()}, {"/usr/bin/env", hook});
  EXPECT_TRUE(Exited(started, 2)) << started.status.ToString() << "\n" << started.err;
  EXPECT_NE(started.err.find("sequence.lease_ms: a takeover wait"), std::string::npos)
      << started.err;
  EXPECT_EQ(started.err.find("no-such-broker"), std::string::npos) << "it went to Kafka first";
}

// OAUTHBEARER without oidc can never authenticate in kleaf (no token refresh callback), whatever
// librdkafka was built with; GSSAPI only when the linked librdkafka has sasl_gssapi, which
// `kleaf version` lists.
TEST(ConfigCheckE2eTest, ASaslMechanismKleafCannotUseIsRefusedWithTheReason) {
  TempDir dir;
  const auto oauth = dir.WriteFile(
      "oauth.yaml",
      "kafka:\n  bootstrap: 'k:9092'\n  properties:\n    security.protocol: SASL_SSL\n"
      "    sasl.mechanism: OAUTHBEARER\n");
  for (const char* role : {"allocator", "gateway", "producer"}) {
    auto run = Check(oauth, role, {"KLEAF_PRODUCER__STREAMS=[{tag: t}]"});
    EXPECT_TRUE(Exited(run, 2)) << role << ": " << run.status.ToString() << "\n" << run.err;
    EXPECT_NE(run.err.find("kafka.properties.sasl.mechanism: OAUTHBEARER"), std::string::npos)
        << role << ": " << run.err;
  }
  // A standalone reads no kafka.* key.
  EXPECT_TRUE(Exited(Check(oauth, "standalone"), 0));

  auto version = RunKleaf({"version"});
  const size_t at = version.out.find("librdkafka features ");
  ASSERT_NE(at, std::string::npos) << version.out;
  const std::string features = version.out.substr(at, version.out.find('\n', at) - at);
  const auto gssapi = dir.WriteFile(
      "gssapi.yaml",
      "kafka:\n  bootstrap: 'k:9092'\n  properties: {security.protocol: SASL_PLAINTEXT}\n");
  auto run = Check(gssapi, "gateway");
  if (features.find("sasl_gssapi") == std::string::npos) {
    EXPECT_TRUE(Exited(run, 2)) << run.status.ToString() << "\n" << run.err;
    EXPECT_NE(run.err.find("kafka.properties.security.protocol: SASL_PLAINTEXT without "
                           "sasl.mechanism means GSSAPI"),
              std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find("sasl_gssapi"), std::string::npos) << run.err;
    return;
  }
  // Built with it, kleaf still needs Cyrus SASL's GSSAPI plugin on the host, which `kleaf
  // version` lists among Cyrus' mechanisms.
  const size_t cyrus_at = version.out.find("cyrus sasl mechanisms ");
  ASSERT_NE(cyrus_at, std::string::npos) << version.out;
  const std::string cyrus =
      version.out.substr(cyrus_at, version.out.find('\n', cyrus_at) - cyrus_at);
  bool plugin = false;
  std::istringstream words(cyrus);
  for (std::string w; words >> w;) plugin = plugin || w == "GSSAPI";
  if (plugin) {
    EXPECT_TRUE(Exited(run, 0)) << cyrus << "\n" << run.err;
  } else {
    EXPECT_TRUE(Exited(run, 2)) << cyrus << "\n" << run.status.ToString() << "\n" << run.err;
    EXPECT_NE(run.err.find("libsasl2-modules-gssapi-mit"), std::string::npos) << run.err;
  }
}

}  // namespace
}  // namespace kleaf::e2e
