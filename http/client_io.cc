#include "http/client_io.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <utility>

#include "http/client_tls.h"

namespace kleaf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

std::unexpected<Error> StepFail(const std::string& step, const beast::error_code& ec) {
  return Fail(Code::kUnavailable, step + ": " + ec.message());
}

void Close(beast::tcp_stream& stream) {
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.close();
}

}  // namespace

void RunOne(asio::io_context& io) {
  io.restart();
  io.run();
}

Result<void> ConnectWithin(asio::io_context& io, beast::tcp_stream& stream, const std::string& host,
                           uint16_t port, std::chrono::milliseconds timeout) {
  beast::error_code ec;
  tcp::resolver resolver(io);
  tcp::resolver::results_type results;
  asio::steady_timer timer(io);
  timer.expires_after(timeout);
  timer.async_wait([&](beast::error_code e) {
    if (!e) resolver.cancel();
  });
  resolver.async_resolve(host, std::to_string(port),
                         [&](beast::error_code e, tcp::resolver::results_type r) {
                           ec = e;
                           results = std::move(r);
                           timer.cancel();
                         });
  RunOne(io);
  if (ec) return StepFail("resolve " + host, ec);
  stream.expires_after(timeout);
  stream.async_connect(results, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  RunOne(io);
  if (ec) {
    Close(stream);
    return StepFail("connect", ec);
  }
  return {};
}

Result<void> HandshakeWithin(asio::io_context& io, TlsStream& stream, const std::string& host,
                             bool check_name, std::chrono::milliseconds timeout) {
  if (check_name) ExpectPeerName(stream.native_handle(), host);
  beast::error_code ec;
  stream.next_layer().expires_after(timeout);
  stream.async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
  RunOne(io);
  if (ec) {
    Close(stream.next_layer());
    return StepFail("TLS handshake with " + host, ec);
  }
  return {};
}

}  // namespace kleaf::http
