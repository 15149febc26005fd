// http.tls: the certificate and key together or neither, a client CA only with them, and every
// error naming the http.tls key at fault. (The files themselves are checked at start by the
// server: tests/e2e/tls_e2e_test.cc.)
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace kleaf::config {
namespace {

TEST(HttpTlsConfigTest, NoTlsByDefault) {
  auto c = ParseConfig("", {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->http.tls.enabled());
}

TEST(HttpTlsConfigTest, TheThreeFilesParse) {
  auto c = ParseConfig(
      "http:\n  tls:\n    cert_file: /s/c.pem\n    key_file: /s/k.pem\n"
      "    client_ca_file: /s/ca.pem\n",
      {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->http.tls.enabled());
  EXPECT_EQ(c->http.tls.cert_file, "/s/c.pem");
  EXPECT_EQ(c->http.tls.key_file, "/s/k.pem");
  EXPECT_EQ(c->http.tls.client_ca_file, "/s/ca.pem");
}

TEST(HttpTlsConfigTest, AnEnvironmentVariableSetsTheMapping) {
  auto c = ParseConfig("", {{"KLEAF_HTTP__TLS", "{cert_file: /c.pem, key_file: /k.pem}"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->http.tls.key_file, "/k.pem");
}

// The error message starts with `key`.
void ExpectError(const std::string& yaml, const std::string& key) {
  auto c = ParseConfig(yaml, {});
  ASSERT_FALSE(c) << yaml;
  EXPECT_TRUE(c.error().message.starts_with(key + ":")) << c.error().message;
}

TEST(HttpTlsConfigTest, ErrorsNameTheKey) {
  ExpectError("http: {tls: {cert_file: /c.pem}}", "http.tls.key_file");
  ExpectError("http: {tls: {key_file: /k.pem}}", "http.tls.cert_file");
  ExpectError("http: {tls: {client_ca_file: /ca.pem}}", "http.tls.client_ca_file");
  ExpectError("http: {tls: {cert_file: /c.pem, key_file: /k.pem, ca: x}}", "http.tls.ca");
  ExpectError("http: {tls: {cert_file: '', key_file: /k.pem}}", "http.tls.cert_file");
  ExpectError("http: {tls: {cert_file: [a], key_file: /k.pem}}", "http.tls.cert_file");
  ExpectError("http: {tls: /c.pem}", "http.tls");
}

}  // namespace
}  // namespace kleaf::config
