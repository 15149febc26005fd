#include "http/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <limits>
#include <optional>
#include <type_traits>

#include "base/metrics.h"
#include "base/mutex.h"
#include "http/request_reader.h"
#include "http/server_tls.h"

namespace kleaf::http {

namespace beast_http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;

namespace {
// What the worker's sweep sees of a connection, plain or TLS.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfExpired(uint64_t now_ticks) = 0;
};
}  // namespace

// One I/O thread and the io_context only it runs (nginx's worker, in a thread): a connection lives
// on one worker from accept to close, so its state needs no strand or lock. Timeouts are coarse:
// one timer per worker ticks every `tick` and closes the connections whose deadline (counted in
// ticks) has passed, instead of a timer armed and cancelled per request.
struct Worker {
  Worker(std::chrono::milliseconds t, std::chrono::milliseconds idle_timeout)
      : tick(t), idle_ticks(TicksFor(idle_timeout)) {}
  net::io_context ioc{1};
  net::steady_timer sweep{ioc};
  const std::chrono::milliseconds tick;
  const uint64_t idle_ticks;  // TicksFor(the server's idle timeout), computed once
  uint64_t ticks = 0;         // ticks since start; only this worker's thread touches it
  // This worker's connections, for the sweep; expired entries are dropped by the sweep.
  std::vector<std::weak_ptr<SessionBase>> sessions;
  // Keeps run() going while no connection has an operation pending: a request waiting for a
  // segment on a worker thread must still find its I/O thread when its answer is posted.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;

  // The deadline, in ticks, `timeout` from now: at least `timeout` and at most two ticks more.
  uint64_t DeadlineAfter(std::chrono::milliseconds timeout) const {
    return ticks + TicksFor(timeout);
  }
  // DeadlineAfter(the server's idle timeout), without a division: once per request.
  uint64_t IdleDeadline() const { return ticks + idle_ticks; }
  uint64_t TicksFor(std::chrono::milliseconds timeout) const {
    return static_cast<uint64_t>((timeout + tick - std::chrono::milliseconds(1)) / tick) + 1;
  }
  void Sweep();
};

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  std::atomic<int> connections{0};
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopping{false};
  Mutex mu;  // guards no member: Stop waits on idle_cv for in_flight (an atomic) to reach 0
  CondVar idle_cv;
  std::vector<std::unique_ptr<Worker>> workers;
  size_t next_worker = 0;  // round-robin of accepted connections; the acceptor's thread only
  // On workers[0]'s io_context; destroyed before the workers (declared after them).
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_backoff;
  // The TLS settings new connections handshake with (null: plain HTTP); replaced by ReloadTls,
  // while each connection keeps the one it started with.
  Mutex tls_mu;
  std::shared_ptr<ssl::context> tls KLEAF_GUARDED_BY(tls_mu);

  std::shared_ptr<ssl::context> CurrentTls() {
    MutexLock lock(tls_mu);
    return tls;
  }

  Impl(HttpServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}
  void Accept();
  void RequestDone() {
    if (in_flight.fetch_sub(1) == 1) {
      MutexLock lock(mu);
      idle_cv.NotifyAll();
    }
  }
};

namespace {

constexpr uint64_t kNoDeadline = std::numeric_limits<uint64_t>::max();

void AppendNumber(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;  // 24 chars hold every 64-bit value: to_chars cannot fail here
  out.append(buf, end);
}

// One connection, on one Worker's thread. Lives as long as an asynchronous operation or an
// unanswered request holds a shared_ptr to it. Reads and answers one request at a time: bytes of
// pipelined requests wait in the RequestReader, so the bytes held per connection stay within
// ParseBufferBound() plus the answer being written. An answer is serialized into a buffer the
// connection keeps (status line and fields) and written with the body in one gathering send,
// synchronously when the socket takes it all (the usual case), else asynchronously.
//
// `Stream` is tcp::socket (plain HTTP) or ssl::stream<tcp::socket> (HTTPS): one code path for both,
// so every deadline and limit holds over TLS too. Over TLS the connection first handshakes, under
// the idle deadline, and answers always go out through the asynchronous write (a TLS record the
// socket took half of cannot be resumed synchronously).
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  Session(tcp::socket&& socket, std::shared_ptr<ssl::context> tls, HttpServer::Impl& server,
          Worker& worker)
      : tls_(std::move(tls)),
        socket_(MakeStream(std::move(socket), tls_.get())),
        server_(server),
        worker_(worker),
        reader_(RequestLimits{server.options.header_limit_bytes, server.options.body_limit_bytes}) {
    server_.connections.fetch_add(1);
  }
  ~Session() { server_.connections.fetch_sub(1); }

  // On the worker's thread.
  void Start() {
    boost::system::error_code ignored;
    Tcp().non_blocking(true, ignored);
    Tcp().set_option(tcp::no_delay(true), ignored);
    head_.reserve(256);
    worker_.sessions.push_back(this->weak_from_this());
    if constexpr (kTls) {
      // The handshake is the first thing the connection waits for: the request's deadline.
      deadline_ = worker_.IdleDeadline();
      socket_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](boost::system::error_code ec) {
                                // e.g. plain HTTP, an unknown CA, no client certificate
                                if (ec) return self->Close();
                                self->NextRequest();
                              });
    } else {
      NextRequest();
    }
  }

  // From the worker's sweep: closes the connection once its deadline has passed. The operation
  // pending on it ends with an error and the connection goes away.
  void CloseIfExpired(uint64_t now_ticks) override {
    if (now_ticks < deadline_) return;
    deadline_ = kNoDeadline;
    boost::system::error_code ignored;
    Tcp().close(ignored);
  }

 private:
  static Stream MakeStream(tcp::socket&& socket, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      (void)tls;
      return std::move(socket);
    }
  }

  tcp::socket& Tcp() {
    if constexpr (kTls) {
      return socket_.next_layer();
    } else {
      return socket_;
    }
  }

  // Reads and answers requests until one has to wait (for bytes, for its answer, for the socket to
  // drain). The one place a request's deadline starts: when the connection is ready for it
  // (accepted, or the previous answer written whole), for the whole request however slowly its
  // bytes trickle in. An answer written at once loops back here, not to Pump, so a keep-alive
  // connection that goes silent after it is closed like any other.
  void NextRequest() {
    do {
      deadline_ = worker_.IdleDeadline();
    } while (Pump());
  }

  // Takes the current request as far as the bytes read allow. True when it was answered at once
  // and whole and the connection goes on: the caller starts the next request.
  bool Pump() {
    ReadOutcome outcome = reader_.Next();
    switch (outcome.kind) {
      case ReadOutcome::Kind::kNeedMore:
        ReadMore();
        return false;
      case ReadOutcome::Kind::kReject:
        started_ = std::chrono::steady_clock::now();
        method_.assign(std::string_view(outcome.request.method).substr(0, kLoggedBytes));
        target_.assign(std::string_view(outcome.request.target).substr(0, kLoggedBytes));
        keep_alive_ = false;
        version_ = 11;
        head_request_ = false;
        Write(std::move(outcome.rejection));
        return false;
      case ReadOutcome::Kind::kRequest:
        return Dispatch(outcome);
    }
    return false;
  }

  void ReadMore() {
    auto space = reader_.ReadBuffer();
    socket_.async_read_some(
        net::buffer(space.data(), space.size()),
        [self = this->shared_from_this()](boost::system::error_code ec, size_t n) {
          // EOF, reset or timeout: nothing to answer (a request cut off by
          // the peer cannot be answered either).
          if (ec) return self->Close();
          self->reader_.CommitRead(n);
          if (self->Pump()) self->NextRequest();
        });
  }

  // Hands the request to the handler. True when its answer came at once and went out whole,
  // and the connection goes on: the caller starts the next request (NextRequest).
  bool Dispatch(ReadOutcome& outcome) {
    started_ = std::chrono::steady_clock::now();
    if (outcome.head) {
      method_.assign("HEAD");
    } else {
      method_.assign(std::string_view(outcome.request.method).substr(0, kLoggedBytes));
    }
    target_.assign(std::string_view(outcome.request.target).substr(0, kLoggedBytes));
    keep_alive_ = outcome.keep_alive && !server_.stopping.load(std::memory_order_relaxed);
    version_ = outcome.version;
    head_request_ = outcome.head;
    deadline_ = kNoDeadline;  // the handler's time is bounded by the handler (segment.wait_ms)
    server_.in_flight.fetch_add(1, std::memory_order_relaxed);
    in_dispatch_ = true;
    server_.handler(std::move(outcome.request), [self = this->shared_from_this()](HttpResponse r) {
      // Called at once from inside the handler (the usual case): the answer is written once the
      // handler returns, so the handler never runs again inside itself. From anywhere else: on
      // the connection's thread, later.
      if (self->worker_.ioc.get_executor().running_in_this_thread() && self->in_dispatch_) {
        self->pending_ = std::move(r);
        return;
      }
      net::post(self->worker_.ioc, [self, r = std::move(r)]() mutable {
        const bool sent = self->Write(std::move(r));
        self->server_.RequestDone();
        if (sent) self->NextRequest();
      });
    });
    in_dispatch_ = false;
    if (!pending_) return false;
    HttpResponse r = std::move(*pending_);
    pending_.reset();
    const bool sent = Write(std::move(r));
    server_.RequestDone();
    return sent;
  }

  // Serializes the answer to the current request and sends it. True when it went out whole at
  // once (the caller goes on), false when the rest is sent asynchronously (NextRequest follows) or
  // the connection failed.
  //
  // `head_request_`: the answer to a HEAD request: the GET's status and headers, Content-Length
  // included, and no body (RFC 9110 §9.3.2), so a pipelining client finds the next answer where it
  // expects.
  bool Write(HttpResponse r) {
    if (r.status >= 400 && server_.options.on_error) server_.options.on_error(method_, target_, r);
    if (server_.options.on_answer) {
      server_.options.on_answer(method_, target_, r.status,
                                std::chrono::steady_clock::now() - started_);
    }
    SerializeHead(r);
    body_ = std::move(r.body);
    const std::string_view body =
        head_request_ || !HasBody(r.status) ? std::string_view() : std::string_view(body_);
    size_t sent = 0;
    if constexpr (kTls) {
      // One buffer, so one TLS record (Asio's TLS stream writes one buffer at a time).
      head_.append(body);
      out_ = {net::buffer(head_), net::const_buffer()};
    } else {
      out_ = {net::buffer(head_), net::buffer(body.data(), body.size())};
      boost::system::error_code ec;
      sent = socket_.write_some(out_, ec);
      if (ec && ec != net::error::would_block && ec != net::error::try_again) {
        Close();
        return false;
      }
      if (sent == head_.size() + body.size()) {
        if (!keep_alive_) {
          LingeringClose();
          return false;
        }
        return true;  // the caller goes on with NextRequest, which starts the next deadline
      }
    }
    // The socket's send buffer is full (or TLS): the rest goes out when it drains, and a client
    // that does not read it is closed like a silent one.
    deadline_ = worker_.IdleDeadline();
    if (sent < head_.size()) {
      out_[0] += sent;
    } else {
      out_[1] += sent - head_.size();
      out_[0] = net::const_buffer();
    }
    net::async_write(socket_, out_,
                     [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
                       if (ec) return self->Close();
                       if (!self->keep_alive_) return self->LingeringClose();
                       self->NextRequest();
                     });
    return false;
  }

  static bool HasBody(int status) { return status >= 200 && status != 204 && status != 304; }

  // The status line and header fields, as Beast's response with keep_alive() and prepare_payload()
  // wrote them: Server, Content-Type, the handler's fields, Connection, Content-Length.
  void SerializeHead(const HttpResponse& r) {
    head_.clear();
    head_.append(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
    AppendNumber(head_, static_cast<uint64_t>(r.status));
    head_ += ' ';
    const auto reason = beast_http::obsolete_reason(static_cast<beast_http::status>(r.status));
    head_.append(reason.data(), reason.size());
    head_.append("\r\nServer: kleaf\r\n");
    if (!r.content_type.empty()) {
      head_.append("Content-Type: ");
      head_.append(r.content_type);
      head_.append("\r\n");
    }
    for (const auto& [name, value] : r.headers) {
      head_.append(name);
      head_.append(": ");
      head_.append(value);
      head_.append("\r\n");
    }
    if (version_ == 10 && keep_alive_) head_.append("Connection: keep-alive\r\n");
    if (version_ != 10 && !keep_alive_) head_.append("Connection: close\r\n");
    if (HasBody(r.status)) {
      head_.append("Content-Length: ");
      AppendNumber(head_, r.body.size());
      head_.append("\r\n");
    }
    head_.append("\r\n");
  }

  void Close() {
    deadline_ = kNoDeadline;
    boost::system::error_code ignored;
    Tcp().shutdown(tcp::socket::shutdown_send, ignored);
    Tcp().close(ignored);
  }

  // After an answer that ends the connection (e.g. 413 with the body unread): stop sending, then
  // read and discard until the client closes or a short deadline passes. Closing at once with
  // unread input would reset the connection and could destroy the answer before the client reads
  // it. Nothing read here is parsed or answered.
  //
  // Over TLS the drain reads the raw bytes under the TLS layer (nothing of them is used), and no
  // close_notify is sent: the answer's Content-Length or Connection: close already ends it.
  void LingeringClose() {
    boost::system::error_code ignored;
    Tcp().shutdown(tcp::socket::shutdown_send, ignored);
    deadline_ = worker_.DeadlineAfter(std::chrono::seconds(2));
    drain_buffer_ = std::make_unique<std::array<char, 4096>>();
    Drain();
  }

  void Drain() {
    Tcp().async_read_some(net::buffer(*drain_buffer_),
                          [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->Drain();
                          });
  }

  std::shared_ptr<ssl::context> tls_;  // null for plain HTTP; outlives socket_
  Stream socket_;
  HttpServer::Impl& server_;
  Worker& worker_;
  RequestReader reader_;
  // In the worker's ticks. Set whenever the connection waits on its client: from NextRequest
  // (for the bytes of a request) and from a write the socket did not take whole (for the client
  // to read); kNoDeadline only while the handler has the request (bounded by the handler) and
  // once the connection is closed.
  uint64_t deadline_ = kNoDeadline;
  // The request being answered (one at a time).
  bool keep_alive_ = false;
  unsigned version_ = 11;
  bool head_request_ = false;
  bool in_dispatch_ = false;              // inside the handler's call
  std::optional<HttpResponse> pending_;   // its answer, when given inside that call
  std::string head_;                      // the answer's status line and fields; reused
  std::string body_;                      // the answer's body while it is written
  std::array<net::const_buffer, 2> out_;  // what is left to write of head_ and body_
  std::unique_ptr<std::array<char, 4096>> drain_buffer_;  // only while draining
  // Of the request being answered, for on_error and on_answer; cut to kLoggedBytes, so they add
  // next to nothing to what a connection holds (ParseBufferBound).
  static constexpr size_t kLoggedBytes = 256;
  std::string method_;
  std::string target_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

void Worker::Sweep() {
  sweep.expires_after(tick);
  sweep.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    ++ticks;
    size_t kept = 0;
    for (size_t i = 0; i < sessions.size(); ++i) {
      auto session = sessions[i].lock();
      if (!session) continue;
      session->CloseIfExpired(ticks);
      if (kept != i) sessions[kept] = std::move(sessions[i]);
      ++kept;
    }
    sessions.resize(kept);
    Sweep();
  });
}

void HttpServer::Impl::Accept() {
  Worker& worker = *workers[next_worker];
  next_worker = (next_worker + 1) % workers.size();
  acceptor->async_accept(
      worker.ioc, [this, &worker](boost::system::error_code ec, tcp::socket socket) {
        if (stopping.load()) return;
        if (ec) {
          if (ec == net::error::operation_aborted) return;
          // e.g. EMFILE: back off instead of spinning on a failing accept.
          spdlog::warn("[http] accept failed: {}", ec.message());
          accept_backoff->expires_after(std::chrono::milliseconds(100));
          accept_backoff->async_wait([this](boost::system::error_code) { Accept(); });
          return;
        }
        if (connections.load() >= options.max_connections) {
          boost::system::error_code ignored;
          socket.close(ignored);
        } else {
          if (auto tls_context = CurrentTls()) {
            auto session = std::make_shared<Session<ssl::stream<tcp::socket>>>(
                std::move(socket), std::move(tls_context), *this, worker);
            net::post(worker.ioc, [session = std::move(session)] { session->Start(); });
          } else {
            auto session =
                std::make_shared<Session<tcp::socket>>(std::move(socket), nullptr, *this, worker);
            net::post(worker.ioc, [session = std::move(session)] { session->Start(); });
          }
        }
        Accept();
      });
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(0)); }

Result<void> CheckTlsFiles(const TlsFiles& files) {
  auto context = MakeServerTlsContext(files);
  if (!context) return std::unexpected(context.error());
  return {};
}

namespace {

metrics::Counter& TlsReloads(const char* result) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_http_tls_reloads_total",
      "Reloads of the HTTPS certificate and key (SIGHUP) by result; on error the previous "
      "certificate stays in use.",
      {{"result", result}});
}

// The certificate in use: its end of validity, for an alert well before it (a certificate
// renewed on disk reaches the process only at SIGHUP or a restart).
void ShowCertificateExpiry(boost::asio::ssl::context& context) {
  static metrics::Gauge& expiry = metrics::Registry::Default().GetGauge(
      "kleaf_http_tls_certificate_expiry_timestamp_seconds",
      "When the HTTPS certificate in use (http.tls.cert_file, as last loaded) expires, in seconds "
      "since the Unix epoch.");
  if (auto t = CertificateNotAfter(context)) expiry.Set(static_cast<double>(*t));
}

}  // namespace

Result<void> HttpServer::ReloadTls() {
  const TlsFiles& files = impl_->options.tls;
  if (files.cert_file.empty()) return {};
  auto context = MakeServerTlsContext(files);
  if (!context) {
    TlsReloads("error").Inc();
    spdlog::error("[http] TLS reload failed, keeping the current certificate: {}",
                  context.error().message);
    return std::unexpected(context.error());
  }
  ShowCertificateExpiry(**context);
  {
    MutexLock lock(impl_->tls_mu);
    impl_->tls = std::move(*context);
  }
  TlsReloads("ok").Inc();
  spdlog::info("[http] TLS certificate reloaded from {}", files.cert_file);
  return {};
}

Result<uint16_t> HttpServer::Start() {
  auto& o = impl_->options;
  if (!o.tls.cert_file.empty()) {
    auto context = MakeServerTlsContext(o.tls);
    if (!context) return std::unexpected(context.error());
    TlsReloads("ok");  // both series from the start, at 0
    TlsReloads("error");
    ShowCertificateExpiry(**context);
    MutexLock lock(impl_->tls_mu);
    impl_->tls = std::move(*context);
  }
  // A tick of an eighth of the idle timeout: a silent connection is closed between 1 and 1.25
  // idle timeouts (plus a tick) after its deadline started.
  const auto tick = std::clamp(o.idle_timeout / 8, std::chrono::milliseconds(10),
                               std::chrono::milliseconds(1000));
  for (int i = 0; i < std::max(1, o.threads); ++i) {
    impl_->workers.push_back(std::make_unique<Worker>(tick, o.idle_timeout));
  }
  net::io_context& first = impl_->workers.front()->ioc;
  impl_->acceptor.emplace(first);
  impl_->accept_backoff.emplace(first);
  boost::system::error_code ec;
  auto address = net::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) return Fail(Code::kInvalidArgument, "http.listen: bad address '" + o.host + "'");
  tcp::endpoint endpoint(address, o.port);
  auto& acceptor = *impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Fail(Code::kUnavailable, "http.listen: cannot listen on " + o.host + ":" +
                                        std::to_string(o.port) + ": " + ec.message());
  }
  uint16_t port = acceptor.local_endpoint().port();
  impl_->Accept();
  for (auto& worker : impl_->workers) {
    worker->work.emplace(net::make_work_guard(worker->ioc));
    worker->Sweep();
    worker->thread = std::thread([w = worker.get()] { w->ioc.run(); });
  }
  return port;
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  if (impl_->stopping.exchange(true)) return;
  if (impl_->workers.empty()) return;  // never started
  net::post(impl_->workers.front()->ioc, [this] {
    boost::system::error_code ignored;
    impl_->acceptor->close(ignored);
    impl_->accept_backoff->cancel();
  });
  {
    MutexLock lock(impl_->mu);
    impl_->idle_cv.WaitFor(lock, grace, [this] { return impl_->in_flight.load() == 0; });
  }
  for (auto& worker : impl_->workers) {
    worker->work.reset();
    worker->ioc.stop();
  }
  for (auto& worker : impl_->workers) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

}  // namespace kleaf::http
