// A SASL mechanism the linked librdkafka cannot do is refused when the config is checked, naming
// the key, the mechanism and what the build lacks (config::CheckKafkaSasl; the features string is
// faked here, as kafka::LibraryFeatures() would give it).
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace kleaf::config {
namespace {

// kleaf's own build (scripts/install-deps.sh: WITH_SASL with the system's Cyrus SASL,
// WITH_CURL=OFF), as `kleaf version` prints it.
constexpr const char* kKleafBuild =
    "gzip,snappy,ssl,sasl,regex,lz4,sasl_gssapi,sasl_plain,sasl_scram,plugins,zstd,"
    "sasl_oauthbearer";
// A librdkafka built where no Cyrus SASL was found.
constexpr const char* kWithoutCyrus =
    "gzip,snappy,ssl,sasl,regex,lz4,sasl_plain,sasl_scram,plugins,zstd,sasl_oauthbearer";
constexpr const char* kFullBuild =
    "gzip,snappy,ssl,sasl,regex,lz4,sasl_gssapi,sasl_plain,sasl_scram,plugins,zstd,"
    "sasl_oauthbearer,http,oidc";

Kafka WithProperties(std::map<std::string, std::string> properties) {
  Kafka k;
  k.properties = std::move(properties);
  return k;
}

// What Cyrus SASL offers on the host, as kafka::HostSaslMechanisms would answer.
std::function<std::optional<std::string>()> Offers(std::string mechanisms) {
  return [mechanisms] { return std::optional<std::string>(mechanisms); };
}

void ExpectRefused(const Result<void>& r, const std::vector<std::string>& named) {
  ASSERT_FALSE(r) << "accepted";
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  for (const auto& word : named) {
    EXPECT_NE(r.error().message.find(word), std::string::npos)
        << "'" << word << "' missing from: " << r.error().message;
  }
}

TEST(KafkaSaslTest, GssapiWithoutSaslGssapiIsRefusedNamingKeyMechanismAndLack) {
  const auto k = WithProperties({{"security.protocol", "SASL_SSL"}, {"sasl.mechanism", "GSSAPI"}});
  ExpectRefused(CheckKafkaSasl(k, kWithoutCyrus),
                {"kafka.properties.sasl.mechanism: ", "GSSAPI", "sasl_gssapi", kWithoutCyrus});
  EXPECT_TRUE(CheckKafkaSasl(k, kKleafBuild));
  // The alias librdkafka also takes, and any case.
  ExpectRefused(CheckKafkaSasl(WithProperties({{"sasl.mechanisms", "gssapi"}}), kWithoutCyrus),
                {"kafka.properties.sasl.mechanisms: ", "GSSAPI", "sasl_gssapi"});
}

// kleaf's build has sasl_gssapi, but Kerberos goes through Cyrus SASL, whose GSSAPI plugin is a
// package of its own: a host without it is refused at start rather than failing at every connect.
TEST(KafkaSaslTest, GssapiWithoutCyrusSaslsPluginOnTheHostIsRefused) {
  const auto k = WithProperties({{"security.protocol", "SASL_SSL"}, {"sasl.mechanism", "GSSAPI"}});
  const std::string plugins = "SCRAM-SHA-256 SCRAM-SHA-1 DIGEST-MD5 NTLM CRAM-MD5 PLAIN LOGIN";
  ExpectRefused(
      CheckKafkaSasl(k, kKleafBuild, Offers(plugins)),
      {"kafka.properties.sasl.mechanism: ", "GSSAPI", "libsasl2-modules-gssapi-mit", plugins});
  ExpectRefused(CheckKafkaSasl(k, kKleafBuild, Offers("")), {"offers: nothing"});
  ExpectRefused(CheckKafkaSasl(WithProperties({{"security.protocol", "SASL_PLAINTEXT"}}),
                               kKleafBuild, Offers("GSSAPIX PLAIN")),
                {"kafka.properties.security.protocol: ", "GSSAPI", "libsasl2-modules-gssapi-mit"});
  EXPECT_TRUE(CheckKafkaSasl(k, kKleafBuild, Offers("GS2-KRB5 GSSAPI PLAIN")));
  EXPECT_TRUE(CheckKafkaSasl(k, kKleafBuild, Offers("GSSAPI")));
  // Other mechanisms are librdkafka's own: Cyrus is not even asked (asking loads its plugins).
  bool asked = false;
  auto ask = [&asked] {
    asked = true;
    return std::optional<std::string>("");
  };
  EXPECT_TRUE(
      CheckKafkaSasl(WithProperties({{"sasl.mechanism", "SCRAM-SHA-512"}}), kKleafBuild, ask));
  EXPECT_TRUE(CheckKafkaSasl(WithProperties({}), kKleafBuild, ask));
  EXPECT_FALSE(asked);
}

TEST(KafkaSaslTest, SaslWithoutAMechanismIsLibrdkafkasDefaultGssapi) {
  const auto k = WithProperties({{"security.protocol", "SASL_PLAINTEXT"}});
  ExpectRefused(
      CheckKafkaSasl(k, kWithoutCyrus),
      {"kafka.properties.security.protocol: ", "without sasl.mechanism", "GSSAPI", "sasl_gssapi"});
  EXPECT_TRUE(CheckKafkaSasl(k, kKleafBuild));
}

TEST(KafkaSaslTest, OauthbearerWithoutSaslOauthbearerIsRefused) {
  const auto k =
      WithProperties({{"sasl.mechanism", "OAUTHBEARER"}, {"sasl.oauthbearer.method", "oidc"}});
  ExpectRefused(CheckKafkaSasl(k, "gzip,ssl,sasl,sasl_plain,sasl_scram"),
                {"kafka.properties.sasl.mechanism: ", "OAUTHBEARER", "sasl_oauthbearer"});
}

TEST(KafkaSaslTest, OauthbearerNeedsOidcBecauseKleafHasNoTokenRefreshCallback) {
  for (const char* method : {"", "default"}) {
    std::map<std::string, std::string> p = {{"security.protocol", "SASL_SSL"},
                                            {"sasl.mechanism", "OAUTHBEARER"}};
    if (*method != '\0') p["sasl.oauthbearer.method"] = method;
    // Even a build with everything: the callback is kleaf's to give, and it has none.
    ExpectRefused(CheckKafkaSasl(WithProperties(p), kFullBuild),
                  {"kafka.properties.sasl.mechanism: ", "OAUTHBEARER",
                   "sasl.oauthbearer.method: oidc", "refresh callback"});
  }
}

TEST(KafkaSaslTest, OauthbearerOidcNeedsTheOidcFeature) {
  const auto k = WithProperties({{"security.protocol", "SASL_SSL"},
                                 {"sasl.mechanism", "OAUTHBEARER"},
                                 {"sasl.oauthbearer.method", "oidc"}});
  ExpectRefused(CheckKafkaSasl(k, kKleafBuild), {"kafka.properties.sasl.oauthbearer.method: ",
                                                 "OAUTHBEARER", "oidc", "libcurl", kKleafBuild});
  EXPECT_TRUE(CheckKafkaSasl(k, kFullBuild));
}

TEST(KafkaSaslTest, WhatTheBuildCanDoIsAccepted) {
  for (const char* mechanism : {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
    EXPECT_TRUE(CheckKafkaSasl(
        WithProperties({{"security.protocol", "SASL_SSL"}, {"sasl.mechanism", mechanism}}),
        kWithoutCyrus))
        << mechanism;
  }
  EXPECT_TRUE(CheckKafkaSasl(WithProperties({}), kWithoutCyrus));
  EXPECT_TRUE(CheckKafkaSasl(WithProperties({{"security.protocol", "SSL"}}), kWithoutCyrus));
}

}  // namespace
}  // namespace kleaf::config
