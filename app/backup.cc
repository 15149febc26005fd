#include "app/backup.h"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "app/common.h"
#include "http/client_tls.h"
#include "http/request_once.h"

namespace kleaf::app {
namespace {

namespace bhttp = boost::beast::http;

// A checkpoint flushes the memtable and links or copies the files: seconds at most for kleaf's
// small state; the bound of the whole exchange.
constexpr auto kBackupTimeout = std::chrono::seconds(60);

// admin.token, else the token the node keeps in <state.path>/admin.token (never created here).
Result<std::string> ReadAdminToken(const config::Config& c) {
  if (!c.admin.token.empty()) return c.admin.token;
  const std::filesystem::path path = std::filesystem::path(c.state.path) / "admin.token";
  std::ifstream in(path);
  std::string token;
  if (in) std::getline(in, token);
  if (token.size() < 16) {
    return Fail(Code::kFailedPrecondition,
                "no admin token: admin.token is not set and " + path.string() +
                    " cannot be read (run as the node's user with its config, or set "
                    "KLEAF_ADMIN__TOKEN)");
  }
  return token;
}

// The host to connect to for a listen address: a wildcard listens on loopback too.
std::string ConnectHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::" || host == "[::]") return "::1";
  return host;
}

// Over HTTPS (http.tls set) the tool runs with the node's config, so it trusts exactly the
// certificate the node serves (its cert_file, partial chains allowed: a CA-issued leaf is trusted
// as itself) rather than a CA it does not know. With client_ca_file the node asks for a client
// certificate: the tool offers the node's own, which the node accepts when client_ca_file also
// lists the node certificate's issuer.
http::ClientTlsOptions BackupTlsOptions(const config::HttpTls& tls) {
  http::ClientTlsOptions options;
  options.ca = {"http.tls.cert_file", tls.cert_file};
  options.partial_chain = true;
  if (!tls.client_ca_file.empty()) {
    options.cert = {"http.tls.cert_file", tls.cert_file};
    options.key = {"http.tls.key_file", tls.key_file};
  }
  return options;
}

// POST `body` (JSON) to `target` of the node at host:port with the admin token; its answer.
Result<http::OneShotAnswer> Post(const config::Config& c, const std::string& host, uint16_t port,
                                 const std::string& target, const std::string& token,
                                 const std::string& body) {
  const bool tls = c.http.tls.enabled();
  std::shared_ptr<boost::asio::ssl::context> context;
  if (tls) {
    auto made = http::MakeClientTlsContext(BackupTlsOptions(c.http.tls));
    if (!made) return std::unexpected(made.error());
    context = std::move(*made);
  }
  bhttp::request<bhttp::string_body> request(bhttp::verb::post, target, 11);
  request.set(bhttp::field::host, host);
  request.set(bhttp::field::authorization, "Bearer " + token);
  request.set(bhttp::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();
  auto answer = http::RequestOnce(host, port, context.get(), request, kBackupTimeout);
  if (!answer) {
    return Fail(Code::kUnavailable, "cannot reach the node at " + HttpUrl(host, port, tls) + ": " +
                                        answer.error().message +
                                        " (is `kleaf standalone` running with this config?)");
  }
  return answer;
}

}  // namespace

int RunStateBackup(const config::Config& c, const std::string& dir) {
  if (!c.kafka.bootstrap.empty()) {
    std::cerr << "kleaf: state backup: this config is a cluster node's (kafka.bootstrap is set); "
                 "a cluster's state is in its state topic: use `kleaf state export FILE`\n";
    return 2;
  }
  auto token = ReadAdminToken(c);
  if (!token) return StartupError("state backup: " + token.error().message);
  std::error_code ec;
  const std::string target_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) return StartupError("state backup: " + dir + ": " + ec.message());
  if (std::filesystem::exists(target_dir, ec) && (!std::filesystem::is_directory(target_dir, ec) ||
                                                  !std::filesystem::is_empty(target_dir, ec))) {
    return StartupError("state backup: '" + target_dir +
                        "' exists and is not an empty directory: nothing written (give a new or "
                        "empty directory)");
  }
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return StartupError("http.listen: " + listen.error().message);
  const std::string host = ConnectHost(listen->first);
  auto answer = Post(c, host, listen->second, "/api/v1/backup", *token,
                     nlohmann::json{{"dir", target_dir}}.dump());
  if (!answer) return StartupError("state backup: " + answer.error().message);
  if (answer->status != 200) {
    auto j = nlohmann::json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
    // An error answer is {"error":{"code","message"}} (http/http.h).
    const bool described = j.is_object() && j.contains("error") && j["error"].is_object() &&
                           j["error"].contains("message") && j["error"]["message"].is_string();
    const std::string message = described ? j["error"]["message"].get<std::string>() : answer->body;
    return StartupError("state backup: the node answered " + std::to_string(answer->status) + ": " +
                        message);
  }
  std::cout << "backed up the standalone at " << HttpUrl(host, listen->second, c.http.tls.enabled())
            << " into " << target_dir << std::endl;
  return 0;
}

}  // namespace kleaf::app
