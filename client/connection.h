// The client library's connections to a gateway: one keep-alive HTTP(S) connection, how it is
// opened (connect, TLS handshake with the gateway's name checked) and one request on it, and the
// TLS context of HttpClient::Options. HttpClient (http_client.cc) pools them and decides what to
// ask whom. Private to the library.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <expected>
#include <memory>
#include <string>

#include "http/client_connection.h"
#include "kleaf/http_client.h"

namespace kleaf::client {

// One keep-alive connection (http/client_connection.h); used by one thread at a time (borrowed
// from its gateway's pool).
using Connection = http::ClientConnection;

// A client TLS context (TLS 1.2+) verifying servers against `o.ca_file`, with the client
// certificate of mutual TLS if given; null without ca_file (plain HTTP). Errors name the option.
[[nodiscard]] ClientResult<std::shared_ptr<boost::asio::ssl::context>> MakeTlsContext(
    const HttpClient::Options& o);

// Connects `c` to `gw` within `timeout`; over HTTPS, with the TLS handshake, in which SNI and the
// name checked against the certificate are gw.host (its IP address when it is one).
std::expected<void, std::string> Connect(Connection& c, const GatewayAddress& gw,
                                         std::chrono::milliseconds timeout);

struct Reply {
  int status = 0;
  std::string body;
};

// A GET, or a POST of a JSON `body` when there is one, on the open connection `c`; closed after
// an error or an answer that does not keep it alive.
std::expected<Reply, std::string> Exchange(Connection& c, const GatewayAddress& gw,
                                           const std::string& target, const std::string& body,
                                           std::chrono::milliseconds timeout);

}  // namespace kleaf::client
