// A client's steps on a connection of its own, each on the caller's io_context and bounded by a
// timeout (a deadline on the stream, a timer for the name lookup). Shared by the client library's
// connections (client/connection.cc) and the one-shot request of the tools (request_once.h).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace kleaf::http {

using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// Runs `io` until the operation started on it completes (its deadline bounds it).
void RunOne(boost::asio::io_context& io);

// Looks `host` up and connects `stream` to it at `port`, within `timeout`. Fails (kUnavailable)
// with "resolve <host>: <reason>" or "connect: <reason>", the stream then closed.
[[nodiscard]] Result<void> ConnectWithin(boost::asio::io_context& io,
                                         boost::beast::tcp_stream& stream, const std::string& host,
                                         uint16_t port, std::chrono::milliseconds timeout);

// The client's TLS handshake on the connected `stream`, within `timeout`. With `check_name`, the
// server's certificate must name `host` (ExpectPeerName, client_tls.h); else the context's trust
// alone decides. Fails (kUnavailable) with "TLS handshake with <host>: <reason>", the connection
// then closed.
[[nodiscard]] Result<void> HandshakeWithin(boost::asio::io_context& io, TlsStream& stream,
                                           const std::string& host, bool check_name,
                                           std::chrono::milliseconds timeout);

}  // namespace kleaf::http
