#include "http/request_reader.h"

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace kleaf::http {
namespace {

namespace beast = boost::beast;
namespace beast_http = boost::beast::http;

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `code` is a string literal; `message` is kleaf's own text (no quotes or backslashes), never bytes
// from the peer.
HttpResponse JsonError(int status, std::string_view code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = "{\"error\":{\"code\":\"" + std::string(code) + "\",\"message\":\"" + message + "\"}}";
  r.error_code = code;
  r.error_message = message;
  return r;
}

HttpResponse HeadersTooLarge() {
  return JsonError(431, "request_header_fields_too_large", "request headers are too large");
}

// Beast's parser with kleaf's storage: keeps only what the router needs (no field table whose
// size would depend on the number of fields) and checks the framing fields once the header
// section is complete.
class Parser final : public beast_http::basic_parser<true> {
 public:
  explicit Parser(const RequestLimits& limits) : limits_(limits) {
    header_limit(limits.header_limit_bytes);
    body_limit(limits.body_limit_bytes);
    eager(true);
  }

  HttpRequest request;
  int version = 11;
  // Why on_header_impl refused the request (framing), if it did.
  std::string framing_error;

 private:
  void on_request_impl(beast_http::verb, beast::string_view method, beast::string_view target,
                       int http_version, beast::error_code&) override {
    request.method.assign(method.data(), method.size());
    request.target.assign(target.data(), target.size());
    version = http_version;
  }

  void on_response_impl(int, beast::string_view, int, beast::error_code& ec) override {
    ec = beast_http::error::bad_version;  // never called for a request parser
  }

  void on_field_impl(beast_http::field name, beast::string_view, beast::string_view value,
                     beast::error_code&) override {
    if (header_done_) return;  // a trailer field: never used, never kept
    std::string_view v = Trim(std::string_view(value.data(), value.size()));
    switch (name) {
      case beast_http::field::transfer_encoding:
        ++transfer_encodings_;
        if (!EqualsIgnoringCase(v, "chunked")) only_chunked_ = false;
        break;
      case beast_http::field::content_length:
        content_length_ = true;
        break;
      case beast_http::field::authorization:
        if (!authorization_seen_) request.authorization.assign(v.data(), v.size());
        authorization_seen_ = true;
        break;
      default:
        break;
    }
  }

  void on_header_impl(beast::error_code& ec) override {
    header_done_ = true;
    if (transfer_encodings_ == 0) return;
    if (version < 11) {
      framing_error = "Transfer-Encoding in an HTTP/1.0 request";
    } else if (transfer_encodings_ > 1) {
      framing_error = "Transfer-Encoding sent more than once";
    } else if (content_length_) {
      framing_error = "Transfer-Encoding together with Content-Length";
    } else if (!only_chunked_) {
      framing_error = "Transfer-Encoding other than chunked (the only coding kleaf accepts)";
    }
    if (!framing_error.empty()) ec = beast_http::error::bad_transfer_encoding;
  }

  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         beast::error_code&) override {
    // Beast has checked Content-Length and every chunk size against body_limit; reserving the
    // whole limit for a chunked body keeps appends from growing the string past it.
    request.body.reserve(static_cast<size_t>(length ? *length : limits_.body_limit_bytes));
  }

  size_t on_body_impl(beast::string_view data, beast::error_code&) override {
    request.body.append(data.data(), data.size());
    return data.size();
  }

  void on_chunk_header_impl(std::uint64_t, beast::string_view, beast::error_code&) override {}

  size_t on_chunk_body_impl(std::uint64_t, beast::string_view data, beast::error_code&) override {
    request.body.append(data.data(), data.size());
    return data.size();
  }

  void on_finish_impl(beast::error_code&) override {}

  const RequestLimits limits_;
  bool header_done_ = false;
  int transfer_encodings_ = 0;
  bool only_chunked_ = true;
  bool content_length_ = false;
  bool authorization_seen_ = false;
};

}  // namespace

uint64_t ParseBufferBound(const RequestLimits& limits) {
  return 2 * uint64_t{limits.header_limit_bytes} + limits.body_limit_bytes;
}

struct RequestReader::Impl {
  explicit Impl(RequestLimits l) : limits(l), buffer(l.header_limit_bytes) {}

  // The helpers below fill `out` in place (Next() returns it without a move).
  void Reject(ReadOutcome& out, HttpResponse response) {
    rejected = response;
    out.kind = ReadOutcome::Kind::kReject;
    out.rejection = std::move(response);
  }

  // Chunked framing can be stuffed without end (extensions, leading zeros, 1-byte chunks), each
  // piece small enough for the read buffer: one request's bytes besides its body may be at most
  // 2 x header_limit + body_limit. A fixed cap on a count that only grows, so the answer does not
  // depend on where the reads happened to end (an allowance growing with the body did).
  bool FramingTooLong(uint64_t body_bytes) const {
    return taken - body_bytes > 2 * uint64_t{limits.header_limit_bytes} + limits.body_limit_bytes;
  }

  // Whether the whole header section is in the buffer. The parser sees a header section only
  // whole: Beast counts its header_limit against the unparsed bytes only (fields it has parsed are
  // consumed), and it looks at fields at once when it has them all but waits for the end when they
  // come in pieces. So the header section must fit in the read buffer, and the same bytes get the
  // same answer however they were split into reads.
  bool HeaderInBuffer() {
    const auto data = buffer.data();
    const std::string_view bytes(static_cast<const char*>(data.data()), data.size());
    const size_t from = header_scanned > 3 ? header_scanned - 3 : 0;
    header_scanned = bytes.size();
    return bytes.find("\r\n\r\n", from) != std::string_view::npos;
  }

  // The answer to an error Beast reported while parsing (anything but need_more).
  void RejectParseError(ReadOutcome& out, beast::error_code ec) {
    out.request = std::move(parser->request);
    if (ec == beast_http::error::header_limit) return Reject(out, HeadersTooLarge());
    if (ec == beast_http::error::body_limit) {
      return Reject(out, ErrorResponse(Error{Code::kPayloadTooLarge, "request body is too large"}));
    }
    std::string message = parser->framing_error.empty()
                              ? "malformed HTTP request: " + ec.message()
                              : "bad message framing: " + parser->framing_error;
    Reject(out, ErrorResponse(Error{Code::kInvalidArgument, message}));
  }

  // The buffer is full and the parser still needs more: the part being read does not fit.
  void RejectTooLong(ReadOutcome& out) {
    out.request = std::move(parser->request);
    const std::string limit = std::to_string(limits.header_limit_bytes);
    // (Whether Beast or this check notices first depends on how the bytes arrived: one answer.)
    if (!parser->is_header_done()) return Reject(out, HeadersTooLarge());
    Reject(out, JsonError(413, CodeName(Code::kPayloadTooLarge),
                          "a chunk-size line, its extensions or the trailer section is "
                          "longer than " +
                              limit + " bytes"));
  }

  // The parser holds a whole request: hand it out and get ready for the next one.
  void Complete(ReadOutcome& out) {
    out.kind = ReadOutcome::Kind::kRequest;
    out.keep_alive = parser->keep_alive();
    out.version = parser->version == 10 ? 10 : 11;
    out.request = std::move(parser->request);
    if (out.request.method == "HEAD") {
      out.request.method = "GET";
      out.head = true;
    }
    parser.reset();
    taken = 0;
  }

  const RequestLimits limits;
  size_t header_scanned = 0;  // bytes of the buffer already searched for the header's end
  uint64_t taken = 0;         // bytes of the current request parsed so far
  // Never holds more than header_limit_bytes: a request line, header section, chunk-size line or
  // trailer section that does not fit is refused instead of buffered.
  beast::flat_buffer buffer;
  std::optional<Parser> parser;
  std::optional<HttpResponse> rejected;
};

RequestReader::RequestReader(RequestLimits limits) : impl_(std::make_unique<Impl>(limits)) {}

RequestReader::~RequestReader() = default;

std::span<char> RequestReader::ReadBuffer() {
  auto& b = impl_->buffer;
  const size_t room = b.max_size() - b.size();
  // Grows the buffer step by step (most requests are far below the limit).
  const size_t want = std::min(room, std::max<size_t>(1024, b.capacity() - b.size()));
  auto space = b.prepare(want);
  return {static_cast<char*>(space.data()), space.size()};
}

void RequestReader::CommitRead(size_t n) { impl_->buffer.commit(n); }

ReadOutcome RequestReader::Next() {
  ReadOutcome out;
  if (impl_->rejected) {
    out.kind = ReadOutcome::Kind::kReject;
    out.rejection = *impl_->rejected;
    return out;
  }
  auto& buffer = impl_->buffer;
  auto& parser = impl_->parser;
  if (!parser) parser.emplace(impl_->limits);
  while (true) {
    if (buffer.size() == 0) return out;  // kNeedMore
    if (!parser->is_header_done() && !impl_->HeaderInBuffer()) {
      if (buffer.size() < buffer.max_size()) return out;  // kNeedMore
      impl_->Reject(out, HeadersTooLarge());
      return out;
    }
    impl_->header_scanned = 0;
    beast::error_code ec;
    const size_t used = parser->put(buffer.data(), ec);
    buffer.consume(used);
    impl_->taken += used;
    // Errors first: Beast can report one (e.g. from on_header_impl) on a message it also calls
    // complete.
    if (ec && ec != beast_http::error::need_more) {
      impl_->RejectParseError(out, ec);
      return out;
    }
    if (impl_->FramingTooLong(parser->request.body.size())) {
      out.request = std::move(parser->request);
      impl_->Reject(out, JsonError(413, CodeName(Code::kPayloadTooLarge),
                                   "the chunked framing of the request is too long for its body"));
      return out;
    }
    if (parser->is_done()) {
      impl_->Complete(out);
      return out;
    }
    if (used > 0 && !ec) continue;
    if (buffer.size() < buffer.max_size()) return out;  // kNeedMore
    impl_->RejectTooLong(out);
    return out;
  }
}

}  // namespace kleaf::http
