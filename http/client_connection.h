// One kept-alive HTTP(S) connection of a client, with its own io_context, and one exchange on it
// bounded by a deadline. Shared by the client library's connections to gateways
// (client/connection.h) and the gateways' owner hop to allocators (cluster/owner_hop.h).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "http/client_io.h"

namespace kleaf::http {

// Used by one thread at a time. Every operation runs on the connection's own io_context with a
// deadline on the stream. Over HTTPS the TLS stream wraps a TCP stream of its own and `stream`
// stays unused.
struct ClientConnection {
  explicit ClientConnection(std::shared_ptr<boost::asio::ssl::context> context);

  boost::asio::io_context ioc;
  std::shared_ptr<boost::asio::ssl::context> tls_context;  // null: plain HTTP; outlives tls
  boost::beast::tcp_stream stream{ioc};
  std::optional<TlsStream> tls;
  boost::beast::flat_buffer buffer;
  bool open = false;

  boost::beast::tcp_stream& Tcp() { return tls ? tls->next_layer() : stream; }
  void Close();
};

// Connects `c` to host:port within `timeout` (TCP_NODELAY set); over HTTPS, with the TLS
// handshake, checking that the server's certificate names `host` when `check_name`. Fails
// (kUnavailable) naming the step.
[[nodiscard]] Result<void> OpenWithin(ClientConnection& c, const std::string& host, uint16_t port,
                                      bool check_name, std::chrono::milliseconds timeout);

using ClientRequest = boost::beast::http::request<boost::beast::http::string_body>;
using ClientResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Writes `request` on the open connection `c` and reads the answer (body up to 64 MiB), within
// `timeout`. The connection is closed after an error or an answer that does not keep it alive.
// Fails (kUnavailable) with "write: <reason>" or "read: <reason>".
[[nodiscard]] Result<ClientResponse> ExchangeWithin(ClientConnection& c,
                                                    const ClientRequest& request,
                                                    std::chrono::milliseconds timeout);

}  // namespace kleaf::http
