#include "http/request_once.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <utility>

#include "http/client_io.h"

namespace kleaf::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using std::chrono::milliseconds;

// Runs `io` until the operation started on it completes (the stream's deadline bounds it); its
// error, named by `step`.
Result<void> Finish(asio::io_context& io, const beast::error_code& ec, const char* step) {
  io.restart();
  io.run();
  if (ec) return Fail(Code::kUnavailable, std::string(step) + ": " + ec.message());
  return {};
}

// Writes `request` and reads the answer on `stream` (TCP or TLS), within the deadline set on it.
template <typename Stream>
Result<OneShotAnswer> Exchange(asio::io_context& io, Stream& stream,
                               const bhttp::request<bhttp::string_body>& request) {
  beast::error_code ec;
  bhttp::async_write(stream, request, [&](beast::error_code e, std::size_t) { ec = e; });
  if (auto r = Finish(io, ec, "write"); !r) return std::unexpected(r.error());
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> response;
  bhttp::async_read(stream, buffer, response, [&](beast::error_code e, std::size_t) { ec = e; });
  if (auto r = Finish(io, ec, "read"); !r) return std::unexpected(r.error());
  return OneShotAnswer{response.result_int(), std::move(response.body())};
}

}  // namespace

Result<OneShotAnswer> RequestOnce(const std::string& host, uint16_t port, asio::ssl::context* tls,
                                  const bhttp::request<bhttp::string_body>& request,
                                  milliseconds timeout) {
  asio::io_context io;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                         deadline - std::chrono::steady_clock::now()));
  };
  if (tls == nullptr) {
    beast::tcp_stream stream(io);
    if (auto r = ConnectWithin(io, stream, host, port, left()); !r) {
      return std::unexpected(r.error());
    }
    stream.expires_after(left());
    auto answer = Exchange(io, stream, request);
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    return answer;
  }
  TlsStream stream(io, *tls);
  if (auto r = ConnectWithin(io, stream.next_layer(), host, port, left()); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = HandshakeWithin(io, stream, host, /*check_name=*/false, left()); !r) {
    return std::unexpected(r.error());
  }
  stream.next_layer().expires_after(left());
  auto answer = Exchange(io, stream, request);
  if (!answer) return answer;
  // close_notify, and the server's in return, within what is left of the timeout.
  stream.next_layer().expires_after(left());
  stream.async_shutdown([](beast::error_code) {});
  io.restart();
  io.run();
  return answer;
}

}  // namespace kleaf::http
