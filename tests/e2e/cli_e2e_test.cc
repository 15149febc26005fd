// The command line's exit codes, as docs/operations.md ("Exit codes") lists them: help and
// version exit 0, wrong usage exits 2 with the usage or the reason on stderr.
#include <gtest/gtest.h>

#include "tests/e2e/e2e_env.h"

namespace kleaf::e2e {
namespace {

TEST(CliE2eTest, VersionAndHelpExitZero) {
  auto version = RunKleaf({"--version"});
  EXPECT_TRUE(version.status.exited && version.status.code == 0) << version.status.ToString();
  EXPECT_EQ(version.out.rfind("kleaf ", 0), 0u) << version.out;

  auto long_version = RunKleaf({"version"});
  EXPECT_TRUE(long_version.status.exited && long_version.status.code == 0);
  EXPECT_NE(long_version.out.find("librdkafka 2.14"), std::string::npos) << long_version.out;
  // The README's commands build librdkafka with kleaf's patch (scripts/install-deps.sh).
  EXPECT_NE(long_version.out.find("(kleaf patch 1)"), std::string::npos) << long_version.out;

  for (const char* help : {"help", "--help"}) {
    auto run = RunKleaf({help});
    EXPECT_TRUE(run.status.exited && run.status.code == 0) << help << ": " << run.status.ToString();
    for (const char* sub :
         {"standalone", "allocator", "gateway", "producer", "state", "decode", "config"}) {
      EXPECT_NE(run.out.find(sub), std::string::npos) << help << " does not list " << sub;
    }
  }
}

TEST(CliE2eTest, WrongUsageExitsTwoAndSaysWhy) {
  auto bare = RunKleaf({});
  EXPECT_TRUE(bare.status.exited && bare.status.code == 2) << bare.status.ToString();
  EXPECT_NE(bare.err.find("Usage:"), std::string::npos) << bare.err;

  auto unknown = RunKleaf({"serve-everything"});
  EXPECT_TRUE(unknown.status.exited && unknown.status.code == 2) << unknown.status.ToString();
  EXPECT_NE(unknown.err.find("serve-everything"), std::string::npos) << unknown.err;

  auto option = RunKleaf({"standalone", "--no-such-option"});
  EXPECT_TRUE(option.status.exited && option.status.code == 2) << option.status.ToString();
  EXPECT_NE(option.err.find("--no-such-option"), std::string::npos) << option.err;
}

}  // namespace
}  // namespace kleaf::e2e
