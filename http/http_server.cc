#include "http/http_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "http/request_reader.h"

namespace kleaf::http {

namespace beast = boost::beast;
namespace beast_http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_backoff{ioc};
  // Keeps run() going while no connection has an operation pending: a request waiting for a
  // segment on a worker thread must still find the I/O threads when its answer is posted.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<int> connections{0};
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable idle_cv;

  Impl(HttpServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}
  void Accept();
  void RequestDone() {
    if (in_flight.fetch_sub(1) == 1) {
      std::lock_guard lock(mu);
      idle_cv.notify_all();
    }
  }
};

namespace {

// One connection. Lives as long as an asynchronous operation holds a shared_ptr to it. Reads
// and answers one request at a time: bytes of pipelined requests wait in the RequestReader, so
// the bytes held per connection stay within ParseBufferBound() plus the answer being written.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl& server)
      : stream_(std::move(socket)),
        server_(server),
        reader_(RequestLimits{server.options.header_limit_bytes, server.options.body_limit_bytes}) {
    server_.connections.fetch_add(1);
  }
  ~Session() { server_.connections.fetch_sub(1); }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->NextRequest(); });
  }

 private:
  // One deadline for the whole of the next request, however slowly its bytes trickle in.
  void NextRequest() {
    stream_.expires_after(server_.options.idle_timeout);
    Continue(reader_.Next());
  }

  void Continue(ReadOutcome outcome) {
    switch (outcome.kind) {
      case ReadOutcome::Kind::kNeedMore: {
        auto space = reader_.ReadBuffer();
        stream_.async_read_some(net::buffer(space.data(), space.size()),
                                [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                  // EOF, reset or timeout: nothing to answer (a request cut off
                                  // by the peer cannot be answered either).
                                  if (ec) return self->Close();
                                  self->reader_.CommitRead(n);
                                  self->Continue(self->reader_.Next());
                                });
        return;
      }
      case ReadOutcome::Kind::kReject:
        started_ = std::chrono::steady_clock::now();
        method_ = outcome.request.method.substr(0, kLoggedBytes);
        target_ = outcome.request.target.substr(0, kLoggedBytes);
        return Write(std::move(outcome.rejection), false, 11, false);
      case ReadOutcome::Kind::kRequest:
        return Dispatch(std::move(outcome));
    }
  }

  void Dispatch(ReadOutcome outcome) {
    started_ = std::chrono::steady_clock::now();
    method_ = outcome.head ? "HEAD" : outcome.request.method.substr(0, kLoggedBytes);
    target_ = outcome.request.target.substr(0, kLoggedBytes);
    const bool keep_alive = outcome.keep_alive && !server_.stopping.load();
    const unsigned version = outcome.version;
    const bool head = outcome.head;
    server_.in_flight.fetch_add(1);
    server_.handler(std::move(outcome.request), [self = shared_from_this(), keep_alive, version,
                                                  head](HttpResponse response) {
      net::post(self->stream_.get_executor(),
                [self, keep_alive, version, head, response = std::move(response)]() mutable {
                  self->Write(std::move(response), keep_alive, version, head);
                  self->server_.RequestDone();
                });
    });
  }

  // `head`: the answer to a HEAD request: the GET's status and headers, Content-Length included,
  // and no body (RFC 9110 §9.3.2), so a pipelining client finds the next answer where it expects.
  void Write(HttpResponse r, bool keep_alive, unsigned version, bool head) {
    if (r.status >= 400 && server_.options.on_error) server_.options.on_error(method_, target_, r);
    if (server_.options.on_answer) {
      server_.options.on_answer(method_, target_, r.status,
                                std::chrono::steady_clock::now() - started_);
    }
    auto res = std::make_shared<beast_http::response<beast_http::string_body>>(
        static_cast<beast_http::status>(r.status), version);
    res->set(beast_http::field::server, "kleaf");
    if (!r.content_type.empty()) res->set(beast_http::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) res->set(name, value);
    res->keep_alive(keep_alive);
    if (head) {
      res->content_length(r.body.size());
    } else {
      res->body() = std::move(r.body);
      res->prepare_payload();
    }
    stream_.expires_after(server_.options.idle_timeout);
    beast_http::async_write(
        stream_, *res,
        [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
          if (ec) return self->Close();
          if (!keep_alive) return self->LingeringClose();
          self->NextRequest();
        });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  // After an answer that ends the connection (e.g. 413 with the body unread): stop sending, then
  // read and discard until the client closes or a short deadline passes. Closing at once with
  // unread input would reset the connection and could destroy the answer before the client reads
  // it. Nothing read here is parsed or answered.
  void LingeringClose() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    drain_buffer_ = std::make_unique<std::array<char, 4096>>();
    Drain();
  }

  void Drain() {
    stream_.async_read_some(net::buffer(*drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->stream_.close();
                              self->Drain();
                            });
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  RequestReader reader_;
  std::unique_ptr<std::array<char, 4096>> drain_buffer_;  // only while draining
  // Of the request being answered (one at a time), for on_error and on_answer; cut to
  // kLoggedBytes, so they add next to nothing to what a connection holds (ParseBufferBound).
  static constexpr size_t kLoggedBytes = 256;
  std::string method_;
  std::string target_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping.load()) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // e.g. EMFILE: back off instead of spinning on a failing accept.
      spdlog::warn("[http] accept failed: {}", ec.message());
      accept_backoff.expires_after(std::chrono::milliseconds(100));
      accept_backoff.async_wait([this](beast::error_code) { Accept(); });
      return;
    }
    if (connections.load() >= options.max_connections) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), *this)->Run();
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(0)); }

Result<uint16_t> HttpServer::Start() {
  auto& o = impl_->options;
  beast::error_code ec;
  auto address = net::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) return Fail(Code::kInvalidArgument, "http.listen: bad address '" + o.host + "'");
  tcp::endpoint endpoint(address, o.port);
  auto& acceptor = impl_->acceptor;
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
  impl_->work.emplace(net::make_work_guard(impl_->ioc));
  for (int i = 0; i < o.threads; ++i) {
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  }
  return port;
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  if (impl_->stopping.exchange(true)) return;
  net::post(impl_->ioc, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->accept_backoff.cancel();
  });
  {
    std::unique_lock lock(impl_->mu);
    impl_->idle_cv.wait_for(lock, grace, [this] { return impl_->in_flight.load() == 0; });
  }
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace kleaf::http
