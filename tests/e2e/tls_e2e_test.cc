// HTTPS on the HTTP API (http.tls) against the real binary: certificates made at test time by the
// `openssl` command (a CA, server certificates for 127.0.0.1 with an IP subjectAltName, a client
// certificate, an expired one under faketime), checked with curl and with the e2e RawConnection
// over TLS, which keeps its connection (keep-alive across a SIGHUP reload, idle timeout). The
// hostile-input suites run over TLS too: robustness_e2e_test.cc, http_framing_e2e_test.cc.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http/openssl_handle.h"
#include "kleaf/http_client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/e2e/tls_env.h"

namespace kleaf::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A TLS connection to 127.0.0.1:port that trusts `ca_file`.
std::expected<RawConnection, std::string> ConnectTls(uint16_t port,
                                                     const std::filesystem::path& ca_file) {
  return RawConnection::Connect(port, "127.0.0.1", Transport{ca_file});
}

// A GET on `c` (keep-alive); the whole raw answer (Content-Length body).
std::expected<std::string, std::string> Get(RawConnection& c, const std::string& target) {
  if (!c.Send("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) {
    return std::unexpected("send failed");
  }
  auto answer = c.ReadResponse(seconds(5));
  if (StatusOf(answer.data) == 0) {
    return std::unexpected(answer.closed ? "closed unanswered" : "no answer within 5 s");
  }
  return std::move(answer.data);
}

class TlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = std::make_unique<Pki>(dir_.path());
    pki_->Issue("server1", "1001");
    if (HasFatalFailure()) return;
    // The files the config names; a reload test overwrites them.
    std::filesystem::copy_file(pki_->Cert("server1"), dir_.path() / "tls.pem");
    std::filesystem::copy_file(pki_->Key("server1"), dir_.path() / "tls.key");
    config_.Set("http.tls", TlsSetting(dir_.path() / "tls.pem", dir_.path() / "tls.key"));
  }

  std::filesystem::path WriteConfig() { return dir_.WriteFile("kleaf.yaml", config_.Yaml()); }

  // curl over HTTPS with `options` (e.g. --cacert FILE); its exit code and "<status>\n<body>".
  Shell Curl(uint16_t port, const std::string& options, const std::string& target = "/healthz") {
    return RunShell("curl -sS --max-time 10 -w '\\n%{http_code}' " + options +
                    " https://127.0.0.1:" + std::to_string(port) + target);
  }

  TempDir dir_;
  std::unique_ptr<Pki> pki_;
  TestConfig config_{dir_.path() / "state"};
};

TEST_F(TlsE2eTest, CurlWithTheRightCaGetsIdsAndAWrongCaIsRefused) {
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  EXPECT_NE(server->process->Stdout().find("listening on https://"), std::string::npos);

  Shell ok = Curl(server->port, "--cacert " + Quote(pki_->CaCert()), "/api/v1/snowflake/t1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("\"ids\""), std::string::npos) << ok.out;
  EXPECT_TRUE(ok.out.ends_with("\n200")) << ok.out;
  // An answer of many TLS records (10000 IDs, about 200 KB) arrives whole.
  Shell big =
      Curl(server->port, "--cacert " + Quote(pki_->CaCert()), "'/api/v1/snowflake/t1?count=10000'");
  EXPECT_EQ(big.code, 0) << big.out.substr(0, 200);
  EXPECT_TRUE(big.out.ends_with("\n200")) << big.out.substr(0, 200);
  const auto body = nlohmann::json::parse(big.out.substr(0, big.out.rfind('\n')), nullptr, false);
  EXPECT_TRUE(body.is_object() && body["ids"].size() == 10000u);

  Pki other(dir_.path(), "other-ca");
  Shell refused = Curl(server->port, "--cacert " + Quote(other.CaCert()));
  EXPECT_EQ(refused.code, 60) << refused.out;  // CURLE_PEER_FAILED_VERIFICATION

  // Still serving.
  EXPECT_EQ(Curl(server->port, "--cacert " + Quote(pki_->CaCert())).code, 0);
}

TEST_F(TlsE2eTest, PlainHttpOnTheTlsPortIsClosedAndOthersAreStillServed) {
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  auto raw = RawConnection::Connect(server->port);
  ASSERT_TRUE(raw) << raw.error();
  ASSERT_TRUE(raw->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto received = raw->ReadUntilClosed(seconds(10));
  EXPECT_TRUE(received.closed);
  EXPECT_EQ(StatusOf(received.data), 0) << received.data;  // no HTTP answer in clear

  Shell ok = Curl(server->port, "--cacert " + Quote(pki_->CaCert()));
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_TRUE(ok.out.ends_with("\n200")) << ok.out;
}

TEST_F(TlsE2eTest, MutualTlsRequiresAClientCertificateOfTheClientCa) {
  Pki clients(dir_.path(), "client-ca");
  clients.Issue("client1", "3001", /*server=*/false);
  Pki strangers(dir_.path(), "stranger-ca");
  strangers.Issue("stranger", "4001", /*server=*/false);
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", "{cert_file: " + Quote(dir_.path() / "tls.pem") +
                              ", key_file: " + Quote(dir_.path() / "tls.key") +
                              ", client_ca_file: " + Quote(clients.CaCert()) + "}");
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  const std::string ca = "--cacert " + Quote(pki_->CaCert());

  Shell without = Curl(server->port, ca);
  EXPECT_NE(without.code, 0) << without.out;
  EXPECT_FALSE(without.out.ends_with("\n200")) << without.out;

  Shell stranger = Curl(server->port, ca + " --cert " + Quote(strangers.Cert("stranger")) +
                                          " --key " + Quote(strangers.Key("stranger")));
  EXPECT_NE(stranger.code, 0) << stranger.out;

  Shell with = Curl(server->port, ca + " --cert " + Quote(clients.Cert("client1")) + " --key " +
                                      Quote(clients.Key("client1")));
  EXPECT_EQ(with.code, 0) << with.out;
  EXPECT_TRUE(with.out.ends_with("\n200")) << with.out;
}

// Exit code 2 and the key named, as for every config error.
void ExpectRefused(const std::filesystem::path& config, const std::string& message) {
  CommandResult run = RunKleaf({"standalone", "--config", config.string()});
  ASSERT_FALSE(run.status.timed_out) << "kleaf started; stdout: " << run.out;
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.ToString() << "\n"
                                                         << run.err;
  EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
}

TEST_F(TlsE2eTest, AnExpiredCertificateIsRefusedAtStartNamingTheKey) {
  if (Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  pki_->Issue("expired", "5001", true, "@2020-01-01 00:00:00", 1);
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", TlsSetting(pki_->Cert("expired"), pki_->Key("expired")));
  // Issued at faketime's 2020-01-01 00:00:00 (plus the second or so its clock runs) for a day.
  ExpectRefused(WriteConfig(), "http.tls.cert_file: certificate expired on Jan  2 00:00:");
  ExpectRefused(WriteConfig(), " 2020 GMT");
}

TEST_F(TlsE2eTest, ANotYetValidCertificateIsRefusedAtStart) {
  if (Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  pki_->Issue("future", "5002", true, "+30d", 2);
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", TlsSetting(pki_->Cert("future"), pki_->Key("future")));
  ExpectRefused(WriteConfig(), "http.tls.cert_file: certificate not valid before");
}

TEST_F(TlsE2eTest, BadTlsFilesAreRefusedAtStartNamingTheKey) {
  pki_->Issue("server2", "2002");
  ASSERT_FALSE(HasFatalFailure());
  const auto cert = Quote(dir_.path() / "tls.pem");
  config_.Set("http.tls",
              "{cert_file: " + cert + ", key_file: " + Quote(pki_->Key("server2")) + "}");
  ExpectRefused(WriteConfig(), "http.tls.key_file: the key in");
  config_.Set("http.tls", "{cert_file: " + cert + "}");
  ExpectRefused(WriteConfig(), "http.tls.key_file: required with http.tls.cert_file");
  config_.Set("http.tls", TlsSetting(dir_.path() / "missing.pem", dir_.path() / "tls.key"));
  ExpectRefused(WriteConfig(), "http.tls.cert_file: cannot read");
  config_.Set("http.tls", TlsSetting(pki_->Key("server2"), dir_.path() / "tls.key"));
  ExpectRefused(WriteConfig(), "http.tls.cert_file: no PEM certificate");
}

// The counter kleaf_http_tls_reloads_total{result="..."} in /metrics; -1 when absent.
int ReloadsCounted(RawConnection& c, const std::string& result) {
  auto metrics = Get(c, "/metrics");
  if (!metrics) return -1;
  const std::string series = "kleaf_http_tls_reloads_total{result=\"" + result + "\"} ";
  const size_t at = metrics->find(series);
  if (at == std::string::npos) return -1;
  return std::atoi(metrics->c_str() + at + series.size());
}

// The end of validity of the PEM certificate in `file`, in seconds since the epoch; -1 if unread.
int64_t NotAfter(const std::filesystem::path& file) {
  FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return -1;
  kleaf::http::X509Handle cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (cert == nullptr) return -1;
  struct tm t = {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &t) != 1) return -1;
  return static_cast<int64_t>(timegm(&t));
}

// kleaf_http_tls_certificate_expiry_timestamp_seconds in /metrics; -1 when absent.
int64_t ExpiryShown(RawConnection& c) {
  auto metrics = Get(c, "/metrics");
  if (!metrics) return -1;
  const std::string series = "\nkleaf_http_tls_certificate_expiry_timestamp_seconds ";
  const size_t at = metrics->find(series);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(std::atof(metrics->c_str() + at + series.size()));
}

// Also the certificate's expiry in /metrics: the one loaded at start, the one a reload loaded,
// and unchanged by a reload that failed.
TEST_F(TlsE2eTest, SighupSwapsTheCertificateAndKeepsEstablishedConnections) {
  pki_->Issue("server2", "2002", true, "", 30);
  ASSERT_FALSE(HasFatalFailure());
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  auto before = ConnectTls(server->port, pki_->CaCert());
  ASSERT_TRUE(before) << before.error();
  EXPECT_EQ(before->PeerSerial(), "1001");
  ASSERT_TRUE(Get(*before, "/healthz"));
  const int64_t first_expiry = NotAfter(pki_->Cert("server1"));
  const int64_t second_expiry = NotAfter(pki_->Cert("server2"));
  ASSERT_GT(first_expiry, 0);
  ASSERT_GT(second_expiry, first_expiry + 20 * 86400) << "issued for 2 and 30 days";
  EXPECT_EQ(ExpiryShown(*before), first_expiry);

  std::filesystem::copy_file(pki_->Cert("server2"), dir_.path() / "tls.pem",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(pki_->Key("server2"), dir_.path() / "tls.key",
                             std::filesystem::copy_options::overwrite_existing);
  server->process->Signal(SIGHUP);
  // The reload happens on the signal thread: poll new connections, with a deadline.
  std::string serial;
  for (auto deadline = std::chrono::steady_clock::now() + seconds(10);
       std::chrono::steady_clock::now() < deadline && serial != "2002";) {
    auto fresh = ConnectTls(server->port, pki_->CaCert());
    ASSERT_TRUE(fresh) << fresh.error();
    serial = fresh->PeerSerial();
  }
  EXPECT_EQ(serial, "2002");
  // The connection from before the reload is the same one, still served.
  auto answer = Get(*before, "/healthz");
  ASSERT_TRUE(answer) << answer.error();
  EXPECT_EQ(StatusOf(*answer), 200);
  EXPECT_EQ(ReloadsCounted(*before, "ok"), 1);
  EXPECT_EQ(ReloadsCounted(*before, "error"), 0);
  EXPECT_EQ(ExpiryShown(*before), second_expiry);

  // A reload of a bad file keeps the current certificate and counts an error.
  dir_.WriteFile("tls.pem", "not a certificate\n");
  server->process->Signal(SIGHUP);
  int errors = 0;
  for (auto deadline = std::chrono::steady_clock::now() + seconds(10);
       std::chrono::steady_clock::now() < deadline && errors != 1;) {
    errors = ReloadsCounted(*before, "error");
  }
  EXPECT_EQ(errors, 1);
  auto after = ConnectTls(server->port, pki_->CaCert());
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->PeerSerial(), "2002");
  EXPECT_EQ(ExpiryShown(*after), second_expiry) << "the certificate in use did not change";
  EXPECT_TRUE(server->process->WaitForStderr("http.tls.cert_file", seconds(10)))
      << server->process->Stderr();
  // A graceful stop with a TLS connection still open.
  server->process->Terminate();
  ExitStatus exit = server->process->WaitExit(kExitTimeout);
  EXPECT_TRUE(exit.exited && exit.code == 0) << exit.ToString();
}

// `kleaf state backup` runs with its node's config and talks HTTPS to it, trusting exactly the
// certificate the node serves; export and import read no certificate, so an expired one does not
// keep an operator from them.
TEST_F(TlsE2eTest, StateBackupTalksHttpsToItsNodeAndExportIgnoresTheCertificate) {
  if (Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  // The command line reaches the node at http.listen: the port it took.
  config_.Set("http.listen", "127.0.0.1:" + std::to_string(server->port));
  const std::filesystem::path config = dir_.WriteFile("tool.yaml", config_.Yaml());
  const std::filesystem::path backup = dir_.path() / "backup";
  CommandResult run = RunKleaf({"state", "backup", backup.string(), "--config", config.string()});
  EXPECT_TRUE(run.status.exited && run.status.code == 0) << run.status.ToString() << "\n"
                                                         << run.err;
  EXPECT_NE(run.out.find("https://127.0.0.1:"), std::string::npos) << run.out;
  EXPECT_TRUE(std::filesystem::exists(backup / "CURRENT")) << run.out;

  // A tool whose config names another certificate (same CA) than the node serves is refused: the
  // node's own certificate is the one trusted.
  pki_->Issue("server2", "2002");
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", TlsSetting(pki_->Cert("server2"), pki_->Key("server2")));
  const std::filesystem::path other = dir_.WriteFile("other.yaml", config_.Yaml());
  CommandResult refused =
      RunKleaf({"state", "backup", (dir_.path() / "backup2").string(), "--config", other.string()});
  EXPECT_TRUE(refused.status.exited && refused.status.code != 0) << refused.status.ToString();
  EXPECT_NE(refused.err.find("certificate verify failed"), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "backup2" / "CURRENT"));

  server->process->Terminate();
  ExitStatus exit = server->process->WaitExit(kExitTimeout);
  EXPECT_TRUE(exit.exited && exit.code == 0) << exit.ToString();
  pki_->Issue("expired", "5003", true, "@2020-01-01 00:00:00", 1);
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", TlsSetting(pki_->Cert("expired"), pki_->Key("expired")));
  const std::filesystem::path expired = dir_.WriteFile("expired.yaml", config_.Yaml());
  const std::filesystem::path file = dir_.path() / "state.json";
  CommandResult exported =
      RunKleaf({"state", "export", file.string(), "--standalone", "--config", expired.string()});
  EXPECT_TRUE(exported.status.exited && exported.status.code == 0)
      << exported.status.ToString() << "\n"
      << exported.err;
  EXPECT_TRUE(std::filesystem::exists(file));
}

// SIGHUP used to end the process (its default action): now it reloads, and without TLS only logs.
TEST(SighupE2eTest, SighupDoesNotStopAPlainHttpNode) {
  TempDir dir;
  TestConfig config(dir.path() / "state");
  config.Set("log.level", "info");
  auto server = StartStandalone(dir.WriteFile("kleaf.yaml", config.Yaml()));
  ASSERT_TRUE(server) << server.error();
  server->process->Signal(SIGHUP);
  ASSERT_TRUE(server->process->WaitForStderr("SIGHUP received", seconds(10)))
      << server->process->Stderr();
  HttpClient client(server->port);
  auto reply = client.Get("/healthz");
  ASSERT_TRUE(reply) << reply.error();
  EXPECT_EQ(reply->status, 200);
  server->process->Terminate();
  ExitStatus exit = server->process->WaitExit(kExitTimeout);
  EXPECT_TRUE(exit.exited && exit.code == 0) << exit.ToString();
}

TEST_F(TlsE2eTest, IdleTlsConnectionsAndSilentHandshakesAreClosed) {
  config_.Set("http.idle_timeout_ms", "300");
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  // Keep-alive after an answer, then silence.
  auto idle = ConnectTls(server->port, pki_->CaCert());
  ASSERT_TRUE(idle) << idle.error();
  ASSERT_TRUE(Get(*idle, "/healthz"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle->ReadUntilClosed(seconds(5)).closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(4));
  // TCP open, no handshake ever.
  auto silent = RawConnection::Connect(server->port);
  ASSERT_TRUE(silent) << silent.error();
  auto received = silent->ReadUntilClosed(seconds(5));
  EXPECT_TRUE(received.closed);
}

// The client library (client/) over HTTPS: verifies the gateway against ca_file and its address.
TEST_F(TlsE2eTest, ClientLibraryVerifiesTheGatewayAgainstItsCaFileAndAddress) {
  Pki clients(dir_.path(), "client-ca");
  clients.Issue("client1", "3001", /*server=*/false);
  Pki other(dir_.path(), "other-ca");
  ASSERT_FALSE(HasFatalFailure());
  config_.Set("http.tls", "{cert_file: " + Quote(dir_.path() / "tls.pem") +
                              ", key_file: " + Quote(dir_.path() / "tls.key") +
                              ", client_ca_file: " + Quote(clients.CaCert()) + "}");
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  auto ids = [&](const std::string& host, const std::filesystem::path& ca,
                 bool client_cert) -> ::kleaf::ClientResult<std::vector<int64_t>> {
    ::kleaf::HttpClient::Options o;
    o.gateways = {{host, server->port}};
    o.total_timeout = seconds(3);
    o.ca_file = ca.string();
    if (client_cert) {
      o.cert_file = clients.Cert("client1").string();
      o.key_file = clients.Key("client1").string();
    }
    auto client = ::kleaf::HttpClient::Create(o);
    if (!client) return std::unexpected(client.error());
    return (*client)->Snowflakes("t1", 3);
  };
  auto good = ids("127.0.0.1", pki_->CaCert(), true);
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->size(), 3u);
  auto wrong_ca = ids("127.0.0.1", other.CaCert(), true);
  ASSERT_FALSE(wrong_ca);
  EXPECT_NE(wrong_ca.error().message.find("certificate verify failed"), std::string::npos)
      << wrong_ca.error().message;
  // The certificate names IP 127.0.0.1 only.
  auto wrong_name = ids("localhost", pki_->CaCert(), true);
  ASSERT_FALSE(wrong_name);
  EXPECT_NE(wrong_name.error().message.find("certificate verify failed"), std::string::npos)
      << wrong_name.error().message;
  auto no_client_cert = ids("127.0.0.1", pki_->CaCert(), false);
  EXPECT_FALSE(no_client_cert);
}

TEST_F(TlsE2eTest, TheConnectionCapCountsTlsConnections) {
  config_.Set("http.max_connections", "3");
  auto server = StartStandalone(WriteConfig());
  ASSERT_TRUE(server) << server.error();
  // The cap counts TLS connections: with three open, a fourth is closed before its handshake.
  std::vector<RawConnection> held;
  for (int i = 0; i < 3; ++i) {
    auto c = ConnectTls(server->port, pki_->CaCert());
    ASSERT_TRUE(c) << c.error();
    held.push_back(std::move(*c));
  }
  auto fourth = ConnectTls(server->port, pki_->CaCert());
  EXPECT_FALSE(fourth);
  held.clear();
  bool served = false;
  for (auto deadline = std::chrono::steady_clock::now() + seconds(10);
       !served && std::chrono::steady_clock::now() < deadline;) {
    auto c = ConnectTls(server->port, pki_->CaCert());
    served = c && Get(*c, "/healthz").has_value();
  }
  EXPECT_TRUE(served);
}

}  // namespace
}  // namespace kleaf::e2e
