// The HTTP front end (Boost.Asio sockets, Beast's parser): accepts connections and hands each
// request to a handler (the gateway's Api, or an allocator's ops routes).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/error.h"
#include "http/http.h"
#include "http/tls_files.h"

namespace kleaf::http {

// Called with every answer the server writes: the request's method and target, the status, and
// the time from the request read (the handler called) to its answer ready to be written.
using AnswerHook = std::function<void(std::string_view method, std::string_view target, int status,
                                      std::chrono::nanoseconds elapsed)>;

// The checks Start makes of `files` (readable, the key matches the certificate, the certificate
// valid now), for a start-up config check; the error names the http.tls key at fault.
[[nodiscard]] Result<void> CheckTlsFiles(const TlsFiles& files);

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  int threads = 2;
  uint32_t header_limit_bytes = 8192;
  uint64_t body_limit_bytes = 65536;
  // The deadline of each request from the moment the connection awaits it (accepted, or the
  // previous answer written) to its last byte read, so also how long a keep-alive connection may
  // stay silent between requests; and of each answer's write the socket does not take at once (a
  // client that does not read). Checked every idle_timeout / 8 (10 ms to 1 s): a connection past
  // it is closed within a check or two.
  std::chrono::milliseconds idle_timeout{30000};
  int max_connections = 10000;
  // TLS on every connection when tls.cert_file is set (TLS 1.2 or later). The handshake is bounded
  // by idle_timeout like a request: a client that connects and never completes it is closed.
  TlsFiles tls;
  // Called with every answer of status >= 400 (the handler's and the server's own 400/413/431),
  // on the connection's I/O thread: counts errors and keeps the recent ones for the status page.
  std::function<void(std::string_view method, std::string_view target, const HttpResponse&)>
      on_error;
  // Called with every answer (the server's own 400/413/431 too), on the connection's I/O thread:
  // the per-route request metrics (RequestMetrics::Hook).
  AnswerHook on_answer;
};

// Owns `threads` I/O threads, each running an io_context of its own; a connection stays on one of
// them from accept to close. It reads one request at a time (keep-alive, pipelining) through a
// RequestReader, and is closed after a timeout, a malformed or ambiguously framed request
// (answered 400), or a request over the limits (431/413); it never holds more than
// ParseBufferBound() bytes of input. HEAD is served as the GET
// without its body. The handler runs on the I/O thread; its response may come from any thread and
// is posted back to the connection's thread.
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();

  // Binds and starts the I/O threads; returns the port listened on.
  [[nodiscard]] Result<uint16_t> Start();
  // Stops accepting, lets requests in flight finish (up to `grace`), then stops the I/O threads.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  // Reads options.tls's files again (SIGHUP): connections accepted from now on handshake with the
  // new certificate, established ones keep theirs. A failure (logged, naming the key, and counted
  // in kleaf_http_tls_reloads_total{result="error"}) keeps the current certificate. Any thread;
  // a no-op without TLS.
  Result<void> ReloadTls();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf::http
