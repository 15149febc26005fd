// One HTTP(S) request on a connection of its own, for the tools that talk to a running node
// (`kleaf state backup`, app/backup.cc). Built of client_io.h's steps; in a file of its own so that
// the client library, which links the same archive, does not take it in.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace kleaf::http {

struct OneShotAnswer {
  unsigned status = 0;
  std::string body;
};

// `request` to host:port on a connection of its own: connected, over TLS with `tls` when it is not
// null (no name check: `tls` says whom to trust), the request written, the answer read and the
// connection shut down, all within `timeout`. Fails (kUnavailable) naming the step that failed.
[[nodiscard]] Result<OneShotAnswer> RequestOnce(
    const std::string& host, uint16_t port, boost::asio::ssl::context* tls,
    const boost::beast::http::request<boost::beast::http::string_body>& request,
    std::chrono::milliseconds timeout);

}  // namespace kleaf::http
