// Errors of the kleaf client library as values: ClientResult<T> = std::expected<T, ClientError>.
// Installed with the library; depends on nothing but the standard library.
#pragma once

#include <expected>
#include <string>

namespace kleaf {

struct ClientError {
  enum class Kind {
    kInvalidArgument,  // bad options or arguments (e.g. an empty tag, count < 1)
    kTimeout,          // nothing arrived before the deadline; retry later
    kUnavailable,      // no gateway / broker answered (each one failed); retry later
    kRejected,         // a gateway answered 4xx: retrying the same request will not help
    kClosed,           // the client was closed
    kInternal,         // a malformed answer or a bug
  };
  Kind kind = Kind::kInternal;
  std::string message;
  int http_status = 0;  // kRejected (and the last status seen for kUnavailable), else 0
  std::string code;     // kRejected: the server's error code, e.g. "invalid_argument"
};

template <typename T>
using ClientResult = std::expected<T, ClientError>;

}  // namespace kleaf
