#include "client/connection.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <utility>

#include "http/client_tls.h"

namespace kleaf::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;
using Kind = ClientError::Kind;

ClientError InvalidArgument(std::string message) {
  return ClientError{Kind::kInvalidArgument, std::move(message), 0, ""};
}

// Runs the io_context until the operation started before completes (the stream's expiry bounds
// it).
void RunOne(asio::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

// Calls `f` with the stream requests go through: the TLS one or the TCP one.
template <class F>
void WithStream(Connection& c, F&& f) {
  if (c.tls) {
    f(*c.tls);
  } else {
    f(c.stream);
  }
}

}  // namespace

Connection::Connection(std::shared_ptr<asio::ssl::context> context)
    : tls_context(std::move(context)) {
  if (tls_context) tls.emplace(ioc, *tls_context);
}

void Connection::Close() {
  beast::error_code ignored;
  Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  Tcp().close();
  buffer.clear();
  open = false;
}

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
  if (auto r = http::ConnectWithin(c.ioc, c.Tcp(), gw.host, gw.port, timeout); !r) {
    return std::unexpected(r.error().message);
  }
  beast::error_code ec;
  c.Tcp().socket().set_option(tcp::no_delay(true), ec);
  if (c.tls) {
    if (auto r = http::HandshakeWithin(c.ioc, *c.tls, gw.host, /*check_name=*/true, timeout); !r) {
      c.Close();
      return std::unexpected(r.error().message);
    }
  }
  c.open = true;
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
  beast::error_code ec;
  c.Tcp().expires_after(timeout);
  WithStream(c, [&](auto& stream) {
    bhttp::async_write(stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  RunOne(c.ioc);
  if (ec) {
    c.Close();
    return std::unexpected("write: " + ec.message());
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  WithStream(c, [&](auto& stream) {
    bhttp::async_read(stream, c.buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  RunOne(c.ioc);
  if (ec) {
    c.Close();
    return std::unexpected("read: " + ec.message());
  }
  auto& res = parser.get();
  Reply reply{static_cast<int>(res.result_int()), std::move(res.body())};
  if (!res.keep_alive()) c.Close();
  c.Tcp().expires_never();
  return reply;
}

}  // namespace kleaf::client
