// Expected failures as values: one code enum for all of kleaf, an Error with a message, and
// Result<T> = std::expected<T, Error>. HttpStatus() is the one place codes map to HTTP.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace kleaf {

// The comments are aligned as one column.
// clang-format off
enum class Code {
  kInvalidArgument,     // bad tag, bad count, bad config value
  kNotFound,            // unknown tag or path
  kAlreadyExists,
  kFailedPrecondition,  // e.g. lowering a tag's max_id
  kResourceExhausted,   // ID space or timestamp bits used up
  kUnavailable,         // transient: no segment ready, clock moved back; retry later
  kUnauthenticated,     // admin route without a valid token
  kPayloadTooLarge,
  kMethodNotAllowed,
  kUnimplemented,       // a route this shape does not serve (yet)
  kInternal,            // a bug or a storage failure
};
// clang-format on

struct Error {
  Code code;
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> Fail(Code code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

// Stable lowercase name used in JSON error bodies, e.g. "not_found".
std::string_view CodeName(Code code);

// The code named by CodeName(), or kInternal for an unknown name.
Code CodeFromName(std::string_view name);

// HTTP status for a code (400, 401, 404, 405, 409, 413, 500, 503).
int HttpStatus(Code code);

}  // namespace kleaf
