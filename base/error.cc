#include "base/error.h"

namespace kleaf {

// The switches below are tables: one case per line.
// clang-format off
std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kAlreadyExists: return "already_exists";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kUnavailable: return "unavailable";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kPayloadTooLarge: return "payload_too_large";
    case Code::kMethodNotAllowed: return "method_not_allowed";
    case Code::kUnimplemented: return "unimplemented";
    case Code::kInternal: return "internal";
  }
  return "internal";
}

Code CodeFromName(std::string_view name) {
  for (Code c : {Code::kInvalidArgument, Code::kNotFound, Code::kAlreadyExists,
                 Code::kFailedPrecondition, Code::kResourceExhausted, Code::kUnavailable,
                 Code::kUnauthenticated, Code::kPayloadTooLarge, Code::kMethodNotAllowed,
                 Code::kUnimplemented}) {
    if (CodeName(c) == name) return c;
  }
  return Code::kInternal;
}

int HttpStatus(Code code) {
  switch (code) {
    case Code::kInvalidArgument: return 400;
    case Code::kUnauthenticated: return 401;
    case Code::kNotFound: return 404;
    case Code::kMethodNotAllowed: return 405;
    case Code::kAlreadyExists: return 409;
    case Code::kFailedPrecondition: return 409;
    case Code::kPayloadTooLarge: return 413;
    case Code::kResourceExhausted: return 503;
    case Code::kUnavailable: return 503;
    case Code::kInternal: return 500;
    case Code::kUnimplemented: return 501;
  }
  return 500;
}
// clang-format on

}  // namespace kleaf
