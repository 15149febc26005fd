// Turns the bytes of one HTTP/1.1 connection into requests (RFC 9112), with every byte it holds
// bounded and the message framing of RFC 9112 §6 enforced, so that no request can be smuggled
// past kleaf or past a proxy in front of it. No I/O: the HttpServer's sessions and the fuzzer
// (tests/fuzz) feed it bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "http/http.h"

namespace kleaf::http {

struct RequestLimits {
  uint32_t header_limit_bytes = 8192;
  uint64_t body_limit_bytes = 65536;
};

// The most bytes one connection's reader holds while parsing, whatever the peer sends:
// - the read buffer, at most header_limit_bytes: the request line and header section, then each
//   chunk-size line with its extensions, the trailer section, and bytes of pipelined requests;
// - the request line and Authorization copied into the request, at most header_limit_bytes;
// - the body, at most body_limit_bytes (reserved once, never grown past it).
uint64_t ParseBufferBound(const RequestLimits& limits);

// What RequestReader::Next() found in the bytes read so far.
struct ReadOutcome {
  enum class Kind {
    kNeedMore,  // read more bytes from the peer into ReadBuffer()
    kRequest,   // one whole request; bytes of pipelined requests stay buffered
    kReject,    // answer `rejection`, then close: the rest of the input is never parsed
  };
  Kind kind = Kind::kNeedMore;
  // kRequest: the request. A HEAD request comes as a GET with `head` set: its answer is the
  // GET's status and headers (Content-Length included) without the body. kReject: the method and
  // target if the request line was read (for logs and error counts).
  HttpRequest request;
  bool head = false;
  bool keep_alive = false;
  unsigned version = 11;  // 10 or 11
  HttpResponse rejection;
};

// One connection's parser. Framing rules (RFC 9112 §6): Transfer-Encoding must be exactly
// "chunked" (the only coding kleaf knows, so also the final one), once, in HTTP/1.1, without
// Content-Length; anything else is answered 400 and the connection closed, because the body's
// length would be ambiguous. Exceeding a limit is answered 431 (request line and headers) or 413
// (body, chunk-size lines and extensions, trailers). Not thread-safe: one connection's strand.
class RequestReader {
 public:
  explicit RequestReader(RequestLimits limits);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Room for the next bytes from the peer; not empty after Next() answered kNeedMore.
  std::span<char> ReadBuffer();
  // `n` bytes were written to the start of ReadBuffer().
  void CommitRead(size_t n);
  // Parses what has been read. After kReject every call answers kReject again.
  ReadOutcome Next();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::http
