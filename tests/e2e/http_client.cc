#include "tests/e2e/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

namespace kleaf::e2e {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

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

}  // namespace

std::string HttpReply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return "";
}

// Each operation is started asynchronously and the io_context run until it completes; the
// tcp_stream's expiry bounds it (Beast's synchronous calls have no deadline).
struct HttpClient::Impl {
  uint16_t port;
  std::chrono::milliseconds timeout;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void Run() {
    ioc.restart();
    ioc.run();
  }

  beast::error_code Connect() {
    stream.emplace(ioc);
    buffer.clear();
    stream->expires_after(timeout);
    beast::error_code result = net::error::would_block;
    tcp::endpoint endpoint(net::ip::make_address_v4("127.0.0.1"), port);
    stream->async_connect(endpoint, [&](beast::error_code ec) { result = ec; });
    Run();
    if (!result) {
      beast::error_code ignored;
      stream->socket().set_option(tcp::no_delay(true), ignored);
    }
    return result;
  }
};

HttpClient::HttpClient(uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (impl_->stream) {
    beast::error_code ignored;
    impl_->stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    impl_->stream->close();
    impl_->stream.reset();
  }
}

bool HttpClient::connected() const { return impl_->stream.has_value(); }

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
  if (!impl_->stream) {
    if (auto ec = impl_->Connect(); ec) {
      impl_->stream.reset();
      return std::unexpected("connect to port " + std::to_string(impl_->port) + ": " +
                             ec.message());
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

  auto& stream = *impl_->stream;
  beast::error_code result = net::error::would_block;
  stream.expires_after(impl_->timeout);
  http::async_write(stream, req, [&](beast::error_code ec, std::size_t) { result = ec; });
  impl_->Run();
  if (result) {
    Close();
    return std::unexpected(method + " " + target + ": write: " + result.message());
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 << 20);
  result = net::error::would_block;
  stream.expires_after(impl_->timeout);
  http::async_read(stream, impl_->buffer, parser,
                   [&](beast::error_code ec, std::size_t) { result = ec; });
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

std::expected<RawConnection, std::string> RawConnection::Connect(uint16_t port,
                                                                 const std::string& host) {
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
  return RawConnection(fd);
}

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), pending_(std::move(other.pending_)) {}

RawConnection& RawConnection::operator=(RawConnection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

RawConnection::~RawConnection() { Close(); }

void RawConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RawConnection::Reset() {
  if (fd_ < 0) return;
  linger lin{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
  Close();
}

void RawConnection::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool RawConnection::Send(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

RawConnection::Received RawConnection::ReadUntilClosed(std::chrono::milliseconds timeout) {
  Received r;
  r.data = std::exchange(pending_, {});
  auto deadline = SteadyClock::now() + timeout;
  char buf[8192];
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return r;  // deadline
    ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
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
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
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
