#include "client/connection.h"

#include <boost/beast/http/string_body.hpp>
#include <utility>

#include "http/client_tls.h"

namespace kleaf::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using std::chrono::milliseconds;
using Kind = ClientError::Kind;

ClientError InvalidArgument(std::string message) {
  return ClientError{Kind::kInvalidArgument, std::move(message), 0, ""};
}

}  // namespace

ClientResult<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const HttpClient::Options& o) {
  if (o.ca_file.empty()) {
    if (!o.cert_file.empty() || !o.key_file.empty()) {
      return std::unexpected(InvalidArgument("cert_file and key_file (mutual TLS) need ca_file"));
    }
    return nullptr;
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return std::unexpected(InvalidArgument("cert_file and key_file go together"));
  }
  auto context = http::MakeClientTlsContext(http::ClientTlsOptions{
      .ca = {"ca_file", o.ca_file},
      .cert = {"cert_file", o.cert_file},
      .key = {"key_file", o.key_file},
  });
  if (!context) return std::unexpected(InvalidArgument(context.error().message));
  return std::move(*context);
}

std::expected<void, std::string> Connect(Connection& c, const GatewayAddress& gw,
                                         milliseconds timeout) {
  if (auto r = http::OpenWithin(c, gw.host, gw.port, /*check_name=*/true, timeout); !r) {
    return std::unexpected(r.error().message);
  }
  return {};
}

std::expected<Reply, std::string> Exchange(Connection& c, const GatewayAddress& gw,
                                           const std::string& target, const std::string& body,
                                           milliseconds timeout) {
  bhttp::request<bhttp::string_body> req{body.empty() ? bhttp::verb::get : bhttp::verb::post,
                                         target, 11};
  req.set(bhttp::field::host, gw.host + ":" + std::to_string(gw.port));
  req.set(bhttp::field::user_agent, "kleaf-client");
  req.keep_alive(true);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  auto res = http::ExchangeWithin(c, req, timeout);
  if (!res) return std::unexpected(res.error().message);
  return Reply{static_cast<int>(res->result_int()), std::move(res->body())};
}

}  // namespace kleaf::client
