#include "http/client_connection.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <utility>

namespace kleaf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

// Calls `f` with the stream requests go through: the TLS one or the TCP one.
template <class F>
void WithStream(ClientConnection& c, F&& f) {
  if (c.tls) {
    f(*c.tls);
  } else {
    f(c.stream);
  }
}

}  // namespace

ClientConnection::ClientConnection(std::shared_ptr<asio::ssl::context> context)
    : tls_context(std::move(context)) {
  if (tls_context) tls.emplace(ioc, *tls_context);
}

void ClientConnection::Close() {
  beast::error_code ignored;
  Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  Tcp().close();
  buffer.clear();
  open = false;
}

Result<void> OpenWithin(ClientConnection& c, const std::string& host, uint16_t port,
                        bool check_name, std::chrono::milliseconds timeout) {
  if (auto r = ConnectWithin(c.ioc, c.Tcp(), host, port, timeout); !r) return r;
  beast::error_code ec;
  c.Tcp().socket().set_option(tcp::no_delay(true), ec);
  if (c.tls) {
    if (auto r = HandshakeWithin(c.ioc, *c.tls, host, check_name, timeout); !r) {
      c.Close();
      return r;
    }
  }
  c.open = true;
  return {};
}

Result<ClientResponse> ExchangeWithin(ClientConnection& c, const ClientRequest& request,
                                      std::chrono::milliseconds timeout) {
  beast::error_code ec;
  c.Tcp().expires_after(timeout);
  WithStream(c, [&](auto& stream) {
    bhttp::async_write(stream, request, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  RunOne(c.ioc);
  if (ec) {
    c.Close();
    return Fail(Code::kUnavailable, "write: " + ec.message());
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  WithStream(c, [&](auto& stream) {
    bhttp::async_read(stream, c.buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  RunOne(c.ioc);
  if (ec) {
    c.Close();
    return Fail(Code::kUnavailable, "read: " + ec.message());
  }
  ClientResponse response = parser.release();
  if (!response.keep_alive()) c.Close();
  c.Tcp().expires_never();
  return response;
}

}  // namespace kleaf::http
