#include "tests/e2e/tls_env.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace kleaf::e2e {
namespace {

void RunOrFail(const std::string& command) {
  Shell r = RunShell(command);
  ASSERT_EQ(r.code, 0) << command << "\n" << r.out;
}

}  // namespace

Shell RunShell(const std::string& command) {
  Shell result;
  FILE* pipe = ::popen(("timeout 60 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

Pki::Pki(const std::filesystem::path& dir, const std::string& name) : dir_(dir), ca_(name) {
  RunOrFail("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
            Quote(Key(ca_)) + " -out " + Quote(Cert(ca_)) + " -days 3 -subj '/CN=kleaf e2e " + ca_ +
            "'");
}

void Pki::Issue(const std::string& name, const std::string& serial, bool server,
                const std::string& faketime, int days) const {
  IssueWith(name, serial,
            server ? "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
                   : "extendedKeyUsage=clientAuth\n",
            faketime, days);
}

void Pki::IssueNode(const std::string& name, const std::string& serial) const {
  IssueWith(name, serial, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
            "", 2);
}

void Pki::IssueWith(const std::string& name, const std::string& serial,
                    const std::string& extensions, const std::string& faketime, int days) const {
  const auto ext = dir_ / (name + ".ext");
  RunOrFail("sh -c \"printf '" + extensions + "' > " + Quote(ext) + "\"");
  const auto csr = dir_ / (name + ".csr");
  RunOrFail("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
            Quote(Key(name)) + " -out " + Quote(csr) + " -subj '/CN=" + name + "'");
  const std::string prefix = faketime.empty() ? ""
                                              : "/usr/bin/env LD_PRELOAD=" + Quote(Libfaketime()) +
                                                    " FAKETIME=" + Quote(faketime) + " ";
  RunOrFail(prefix + "openssl x509 -req -in " + Quote(csr) + " -CA " + Quote(CaCert()) +
            " -CAkey " + Quote(Key(ca_)) + " -set_serial 0x" + serial + " -days " +
            std::to_string(days) + " -extfile " + Quote(ext) + " -out " + Quote(Cert(name)));
}

std::string TlsSetting(const std::filesystem::path& cert_file,
                       const std::filesystem::path& key_file) {
  return "{cert_file: " + Quote(cert_file) + ", key_file: " + Quote(key_file) + "}";
}

std::string ListenerName(const ::testing::TestParamInfo<Listener>& info) {
  return info.param == Listener::kTls ? "Tls" : "Plain";
}

void PrintTo(Listener listener, std::ostream* os) {
  *os << ListenerName(::testing::TestParamInfo<Listener>(listener, 0));
}

Transport ServeOver(Listener listener, const std::filesystem::path& dir, TestConfig& config) {
  if (listener == Listener::kPlain) return {};
  Pki pki(dir);
  pki.Issue("server", "1001");
  config.Set("http.tls", TlsSetting(pki.Cert("server"), pki.Key("server")));
  return Transport{pki.CaCert()};
}

}  // namespace kleaf::e2e
