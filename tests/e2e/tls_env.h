// End-to-end test support for HTTPS (http.tls): certificates made at test time with the `openssl`
// command, and the {plain, TLS} parameter of the suites that run over both kinds of listener.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {

// Runs `command` through the shell, bounded by `timeout 60`; its exit code and output (stdout and
// stderr together).
struct Shell {
  int code = -1;
  std::string out;
};
Shell RunShell(const std::string& command);

// `p` in single quotes, for a shell command or a YAML value.
std::string Quote(const std::filesystem::path& p);

// A CA and certificates it signs, all under one directory. A failed openssl command fails the test
// (a fatal failure: check HasFatalFailure()).
class Pki {
 public:
  // A CA named `name`: <name>.pem, <name>.key.
  explicit Pki(const std::filesystem::path& dir, const std::string& name = "ca");

  std::filesystem::path Cert(const std::string& name) const { return dir_ / (name + ".pem"); }
  std::filesystem::path Key(const std::string& name) const { return dir_ / (name + ".key"); }
  std::filesystem::path CaCert() const { return Cert(ca_); }

  // A leaf certificate `name` with `serial` (hex), for 127.0.0.1 (server) or a client. A non-empty
  // `faketime` (a FAKETIME value, e.g. "@2020-01-01 00:00:00" or "+30d") runs openssl with
  // libfaketime preloaded to date it elsewhere: through env(1), not the faketime wrapper, whose
  // per-pid semaphore a killed wrapper leaves behind for a later one of the same pid to trip on
  // ("sem_open: File exists"). Callers skip without libfaketime (e2e::Libfaketime() empty).
  void Issue(const std::string& name, const std::string& serial, bool server = true,
             const std::string& faketime = "", int days = 2) const;
  // A certificate `name` for a node that is both a server (for 127.0.0.1) and a client of other
  // nodes (mutual TLS between them: the cluster's owner hop).
  void IssueNode(const std::string& name, const std::string& serial) const;

 private:
  void IssueWith(const std::string& name, const std::string& serial, const std::string& extensions,
                 const std::string& faketime, int days) const;

  std::filesystem::path dir_;
  std::string ca_;
};

// The value of http.tls for a node serving `cert_file` with `key_file`.
std::string TlsSetting(const std::filesystem::path& cert_file,
                       const std::filesystem::path& key_file);

// The listener a hostile-input suite runs against: plain HTTP, or HTTPS through the same session
// code behind the TLS record layer.
enum class Listener { kPlain, kTls };

// "Plain" or "Tls": the suffix of the test names (INSTANTIATE_TEST_SUITE_P's name generator).
std::string ListenerName(const ::testing::TestParamInfo<Listener>& info);
// The same word where GoogleTest prints the parameter.
void PrintTo(Listener listener, std::ostream* os);

// For Listener::kTls: a CA and a server certificate for 127.0.0.1 under `dir`, set in `config`
// as http.tls; the Transport that trusts them. For kPlain: `config` untouched, a plain Transport.
Transport ServeOver(Listener listener, const std::filesystem::path& dir, TestConfig& config);

}  // namespace kleaf::e2e
