#include "tests/e2e/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <optional>

#include "http/openssl_handle.h"

namespace kleaf::e2e {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kSendTimeout{10};
constexpr std::chrono::seconds kTlsHandshakeTimeout{10};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

int MillisLeft(SteadyClock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// OpenSSL's error queue as text.
std::string SslErrors() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    text += std::string(buf) + "; ";
  }
  return text.empty() ? "no OpenSSL error" : text;
}

// A client context that trusts `ca_file` alone and refuses an unverified server; null (the error
// queue says why) when the file cannot be read.
kleaf::http::SslCtxHandle NewClientContext(const std::filesystem::path& ca_file) {
  kleaf::http::SslCtxHandle ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) return nullptr;
  if (SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1) return nullptr;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

// The server's certificate must name `ip`, the address connected to (the test certificates carry
// an IP subjectAltName).
bool ExpectPeerAt(SSL* ssl, const std::string& ip) {
  return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.c_str()) == 1;
}

// Runs `call` (SSL_connect, SSL_read, SSL_write, SSL_shutdown on `ssl` over the non-blocking `fd`)
// until it returns > 0, polling the socket for what OpenSSL waits for. Otherwise returns its
// result with `*error` = SSL_get_error: SSL_ERROR_WANT_READ/WRITE means the deadline passed.
template <class Call>
int RetryTls(SSL* ssl, int fd, SteadyClock::time_point deadline, Call call, int* error) {
  for (;;) {
    ERR_clear_error();
    const int n = call();
    if (n > 0) return n;
    *error = SSL_get_error(ssl, n);
    const short events = *error == SSL_ERROR_WANT_READ    ? POLLIN
                         : *error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                          : 0;
    if (events == 0) return n;
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return n;
  }
}

bool TimedOut(int ssl_error) {
  return ssl_error == SSL_ERROR_WANT_READ || ssl_error == SSL_ERROR_WANT_WRITE;
}

}  // namespace

std::string HttpReply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return "";
}

// Each operation is started asynchronously and the io_context run until it completes; the
// tcp_stream's expiry bounds it (Beast's synchronous calls have no deadline). Over TLS the same
// tcp_stream lies under a Beast ssl_stream.
struct HttpClient::Impl {
  uint16_t port;
  std::chrono::milliseconds timeout;
  Transport transport;
  net::io_context ioc;
  std::optional<ssl::context> tls_context;  // made on the first TLS connect
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  bool open() const { return plain.has_value() || tls.has_value(); }
  beast::tcp_stream& tcp_layer() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  // Calls `op` with the stream requests go through.
  template <class Op>
  void WithStream(Op op) {
    if (tls) {
      op(*tls);
    } else {
      op(*plain);
    }
  }

  void Run() {
    ioc.restart();
    ioc.run();
  }

  // An error text, empty once connected (and over TLS, the server verified).
  std::string Connect() {
    buffer.clear();
    if (transport.tls()) {
      if (!tls_context) {
        auto ctx = NewClientContext(transport.ca_file);
        if (ctx == nullptr) return "cannot load " + transport.ca_file.string() + ": " + SslErrors();
        tls_context.emplace(ctx.release());  // the context takes ownership
      }
      tls.emplace(ioc, *tls_context);
    } else {
      plain.emplace(ioc);
    }
    tcp_layer().expires_after(timeout);
    beast::error_code result = net::error::would_block;
    tcp::endpoint endpoint(net::ip::make_address_v4("127.0.0.1"), port);
    tcp_layer().async_connect(endpoint, [&](beast::error_code ec) { result = ec; });
    Run();
    if (result) return result.message();
    beast::error_code ignored;
    tcp_layer().socket().set_option(tcp::no_delay(true), ignored);
    if (!tls) return "";
    ExpectPeerAt(tls->native_handle(), "127.0.0.1");
    result = net::error::would_block;
    tls->async_handshake(ssl::stream_base::client, [&](beast::error_code ec) { result = ec; });
    Run();
    return result ? "TLS handshake: " + result.message() : "";
  }
};

HttpClient::HttpClient(uint16_t port, std::chrono::milliseconds timeout, Transport transport)
    : impl_(std::make_unique<Impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
  impl_->transport = std::move(transport);
}

HttpClient::~HttpClient() { Close(); }

// Over TLS without close_notify: the server sees the connection end as a client that went away.
void HttpClient::Close() {
  if (impl_->open()) {
    beast::error_code ignored;
    impl_->tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    impl_->tcp_layer().close();
  }
  impl_->tls.reset();
  impl_->plain.reset();
}

bool HttpClient::connected() const { return impl_->open(); }

std::expected<HttpReply, std::string> HttpClient::Get(const std::string& target,
                                                      const Headers& headers) {
  return Request("GET", target, "", headers);
}

std::expected<HttpReply, std::string> HttpClient::Put(const std::string& target, std::string body,
                                                      const Headers& headers) {
  return Request("PUT", target, std::move(body), headers);
}

std::expected<HttpReply, std::string> HttpClient::Delete(const std::string& target,
                                                         const Headers& headers) {
  return Request("DELETE", target, "", headers);
}

std::expected<HttpReply, std::string> HttpClient::Request(const std::string& method,
                                                          const std::string& target,
                                                          std::string body,
                                                          const Headers& headers) {
  if (!impl_->open()) {
    if (std::string error = impl_->Connect(); !error.empty()) {
      Close();
      return std::unexpected("connect to port " + std::to_string(impl_->port) + ": " + error);
    }
    ++connections_opened_;
  }
  http::request<http::string_body> req;
  req.version(11);
  req.method_string(method);
  req.target(target);
  req.set(http::field::host, "127.0.0.1:" + std::to_string(impl_->port));
  req.set(http::field::user_agent, "kleaf-e2e");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.keep_alive(true);
  if (!body.empty() || method == "PUT" || method == "POST") {
    req.body() = std::move(body);
    req.prepare_payload();
  }

  beast::error_code result = net::error::would_block;
  impl_->tcp_layer().expires_after(impl_->timeout);
  impl_->WithStream([&](auto& stream) {
    http::async_write(stream, req, [&](beast::error_code ec, std::size_t) { result = ec; });
  });
  impl_->Run();
  if (result) {
    Close();
    return std::unexpected(method + " " + target + ": write: " + result.message());
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 << 20);
  result = net::error::would_block;
  impl_->tcp_layer().expires_after(impl_->timeout);
  impl_->WithStream([&](auto& stream) {
    http::async_read(stream, impl_->buffer, parser,
                     [&](beast::error_code ec, std::size_t) { result = ec; });
  });
  impl_->Run();
  if (result) {
    Close();
    return std::unexpected(method + " " + target + ": read: " + result.message());
  }
  auto& res = parser.get();
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  reply.body = std::move(res.body());
  reply.keep_alive = res.keep_alive();
  if (!reply.keep_alive) Close();
  return reply;
}

// The SSL object owns a reference to its SSL_CTX: one context per connection, freed with it.
struct RawConnection::Tls {
  kleaf::http::SslHandle ssl;
};

RawConnection::RawConnection(int fd) : fd_(fd) {}

std::expected<RawConnection, std::string> RawConnection::Connect(uint16_t port,
                                                                 const std::string& host,
                                                                 const Transport& transport) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
      ::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
             ::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof(sockaddr_in6);
  } else {
    return std::unexpected("not an IP address: '" + host + "'");
  }
  int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    std::string error = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return std::unexpected(error);
  }
  // Non-blocking from here on: every read and write waits in poll(2) with a deadline.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  RawConnection connection(fd);
  if (transport.tls()) {
    if (std::string error = connection.StartTls(host, transport.ca_file); !error.empty()) {
      return std::unexpected(error);
    }
  }
  return connection;
}

std::string RawConnection::StartTls(const std::string& host, const std::filesystem::path& ca_file) {
  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a server that closed first must not end
  // the test process by SIGPIPE.
  static const bool sigpipe_ignored = std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
  (void)sigpipe_ignored;
  auto ctx = NewClientContext(ca_file);
  if (ctx == nullptr) return "cannot load " + ca_file.string() + ": " + SslErrors();
  tls_ = std::make_unique<Tls>();
  tls_->ssl.reset(SSL_new(ctx.get()));
  SSL* ssl = tls_->ssl.get();
  if (ssl == nullptr || !ExpectPeerAt(ssl, host) || SSL_set_fd(ssl, fd_) != 1) {
    return "SSL setup: " + SslErrors();
  }
  int error = 0;
  if (RetryTls(
          ssl, fd_, SteadyClock::now() + kTlsHandshakeTimeout, [ssl] { return SSL_connect(ssl); },
          &error) != 1) {
    return TimedOut(error) ? std::string("TLS handshake timed out")
                           : "TLS handshake failed: " + SslErrors();
  }
  return "";
}

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      tls_(std::move(other.tls_)),
      pending_(std::move(other.pending_)) {}

RawConnection& RawConnection::operator=(RawConnection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    tls_ = std::move(other.tls_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

RawConnection::~RawConnection() { Close(); }

void RawConnection::Close() {
  if (tls_ && fd_ >= 0)
    SSL_shutdown(tls_->ssl.get());  // one try: close_notify if the socket takes it
  tls_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RawConnection::Reset() {
  if (fd_ < 0) return;
  linger lin{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
  tls_.reset();  // SSL_free sends nothing: no close_notify
  Close();
}

void RawConnection::ShutdownWrite() {
  if (fd_ < 0) return;
  if (!tls_) {
    ::shutdown(fd_, SHUT_WR);
    return;
  }
  // SSL_shutdown returns 0 once our close_notify is sent (1 if the server's came already).
  SSL* ssl = tls_->ssl.get();
  int error = 0;
  RetryTls(
      ssl, fd_, SteadyClock::now() + kSendTimeout,
      [ssl] { return SSL_shutdown(ssl) >= 0 ? 1 : -1; }, &error);
}

std::string RawConnection::PeerSerial() const {
  if (!tls_) return "";
  kleaf::http::X509Handle cert(SSL_get1_peer_certificate(tls_->ssl.get()));
  if (cert == nullptr) return "";
  kleaf::http::BignumHandle bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  kleaf::http::OpenSslStringHandle hex(BN_bn2hex(bn.get()));
  return std::string(hex.get());
}

bool RawConnection::Send(std::string_view data) {
  const auto deadline = SteadyClock::now() + kSendTimeout;
  if (tls_) {
    SSL* ssl = tls_->ssl.get();
    while (!data.empty()) {
      // Retried with the same arguments, as OpenSSL requires after SSL_ERROR_WANT_WRITE.
      const int size = static_cast<int>(std::min<size_t>(data.size(), 1 << 20));
      int error = 0;
      const int n = RetryTls(
          ssl, fd_, deadline, [&] { return SSL_write(ssl, data.data(), size); }, &error);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, MillisLeft(deadline)) == 0) return false;
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

long RawConnection::ReadSome(char* buf, size_t size, SteadyClock::time_point deadline) {
  if (tls_) {
    SSL* ssl = tls_->ssl.get();
    int error = 0;
    const int n = RetryTls(
        ssl, fd_, deadline, [&] { return SSL_read(ssl, buf, static_cast<int>(size)); }, &error);
    if (n > 0) return n;
    // close_notify, an end of file without it, a reset or a TLS alert: closed all the same.
    return TimedOut(error) ? -1 : 0;
  }
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    ssize_t got = ::recv(fd_, buf, size, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    return got > 0 ? got : 0;
  }
}

RawConnection::Received RawConnection::ReadUntilClosed(std::chrono::milliseconds timeout) {
  Received r;
  r.data = std::exchange(pending_, {});
  auto deadline = SteadyClock::now() + timeout;
  char buf[8192];
  for (;;) {
    const long got = ReadSome(buf, sizeof(buf), deadline);
    if (got < 0) return r;  // deadline
    if (got == 0) {
      r.closed = true;
      return r;
    }
    r.data.append(buf, static_cast<size_t>(got));
  }
}

RawConnection::Received RawConnection::ReadResponse(std::chrono::milliseconds timeout) {
  Received r;
  std::string data = std::exchange(pending_, {});
  auto deadline = SteadyClock::now() + timeout;
  char buf[8192];
  auto complete = [&]() -> size_t {  // length of the first complete response, or 0
    auto end = data.find("\r\n\r\n");
    if (end == std::string::npos) return 0;
    size_t length = 0;
    std::string_view head(data.data(), end);
    for (size_t pos = 0; pos < head.size();) {
      auto eol = head.find("\r\n", pos);
      std::string_view line = head.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
      constexpr std::string_view kLength = "content-length:";
      if (line.size() > kLength.size() &&
          EqualsIgnoreCase(line.substr(0, kLength.size()), kLength)) {
        std::string_view v = line.substr(kLength.size());
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        std::from_chars(v.data(), v.data() + v.size(), length);
      }
      if (eol == std::string_view::npos) break;
      pos = eol + 2;
    }
    size_t total = end + 4 + length;
    return data.size() >= total ? total : 0;
  };
  while (true) {
    if (size_t n = complete(); n > 0) {
      r.data = data.substr(0, n);
      pending_ = data.substr(n);
      return r;
    }
    const long got = ReadSome(buf, sizeof(buf), deadline);
    if (got < 0) break;  // deadline
    if (got == 0) {
      r.closed = true;
      break;
    }
    data.append(buf, static_cast<size_t>(got));
  }
  r.data = std::move(data);
  return r;
}

int StatusOf(std::string_view raw) {
  if (!raw.starts_with("HTTP/1.")) return 0;
  auto space = raw.find(' ');
  if (space == std::string_view::npos || raw.size() < space + 4) return 0;
  int status = 0;
  std::from_chars(raw.data() + space + 1, raw.data() + space + 4, status);
  return status;
}

std::string BodyOf(std::string_view raw) {
  auto end = raw.find("\r\n\r\n");
  return end == std::string_view::npos ? std::string() : std::string(raw.substr(end + 4));
}

}  // namespace kleaf::e2e
