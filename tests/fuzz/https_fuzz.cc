// libFuzzer target: the bytes a client sends on one connection to the TLS listener (http.tls) of
// the real HttpServer, in this process on 127.0.0.1, with ASan and UBSan on the server's session
// code over the TLS stream. The input's first byte picks the mode; the rest is sent:
// - mode raw (first byte % 4 == 0): as they are over TCP, in place of a TLS handshake. The server
//   must close the connection without a byte of HTTP in clear;
// - mode TLS (otherwise): as application data after a real handshake (OpenSSL's client), in
//   records of 1 + (first byte >> 2) * 16 bytes, then close_notify. Whatever the server answers
//   must start with an HTTP/1.x status line, and it must close the connection.
// Aborts (a finding) when the server does not close within the bound (its idle timeout plus a
// margin), answers in clear, a handshake fails, or a fresh connection checked every 64 inputs is
// not served: one bad connection must never take the listener down.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "http/http_server.h"
#include "http/openssl_handle.h"

namespace kleaf::fuzz {
namespace {

// The server closes a connection that stays silent this long (a TLS handshake included). Every
// connection of the fuzzer ends with its client's close (EOF or close_notify), which the server
// answers at once, so this only bounds a hang; it is long because the process may stand still for
// a while between the handshake's steps (libFuzzer's leak checks stop every thread; two fuzzers and
// the sanitized unit tests share two cores in scripts/test.sh), and a handshake cut by it would be
// a false finding.
constexpr auto kIdle = std::chrono::milliseconds(4000);
// How long a connection may last before the fuzzer calls it a hang: past the idle timeout, within
// run_fuzz.sh's per-input limit of 10 s.
constexpr int kCloseBoundMs = 9000;

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "https_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

struct Listener {
  std::filesystem::path dir;
  std::unique_ptr<http::HttpServer> server;
  uint16_t port = 0;
  SSL_CTX* client = nullptr;
  uint64_t inputs = 0;
};

// Never destroyed: the server runs until the process exits, and what it and the client context
// hold stays reachable for LeakSanitizer's check at exit.
Listener& TheListener() {
  static Listener* listener = new Listener;
  return *listener;
}

// Answers every request at once with a body whose size follows the request's, so that answers
// of many TLS records go through the asynchronous write too.
void Answer(http::HttpRequest request, http::Respond respond) {
  http::HttpResponse r;
  r.content_type = "text/plain";
  r.body.assign(request.body.size() * 7 % 20000 + request.target.size(), 'x');
  respond(std::move(r));
}

int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  Check(fd >= 0, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Check(false, "connect", std::strerror(errno));
  }
  // Every blocking read and write of this connection is bounded.
  timeval tv{kCloseBoundMs / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads what the server sends until it closes; aborts past the bound.
std::string ReadRawUntilClosed(int fd) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseBoundMs);
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    Check(left.count() > 0, "the server kept a raw connection open past the bound");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return got;  // closed (or reset)
    got.append(buf, static_cast<size_t>(n));
  }
}

void RawConnection(std::string_view bytes) {
  const int fd = Connect(TheListener().port);
  if (!bytes.empty()) (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  const std::string got = ReadRawUntilClosed(fd);
  close(fd);
  Check(got.find("HTTP/") == std::string::npos, "the TLS listener answered in clear", got);
}

// One TLS connection: `bytes` in records of `record` bytes, then close_notify; returns all the
// server sent once it closed.
std::string TlsConnection(std::string_view bytes, size_t record) {
  const int fd = Connect(TheListener().port);
  kleaf::http::SslHandle handle(SSL_new(TheListener().client));
  SSL* ssl = handle.get();
  SSL_set_fd(ssl, fd);
  const auto start = std::chrono::steady_clock::now();
  if (const int r = SSL_connect(ssl); r != 1) {
    const int err = SSL_get_error(ssl, r);
    const int saved_errno = errno;
    char reason[256] = "";
    ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    Check(false, "the TLS handshake failed",
          "SSL_get_error " + std::to_string(err) + ", errno " + std::to_string(saved_errno) +
              ", after " + std::to_string(ms) + " ms: " + reason);
  }
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), record);
    // The server may close first (a refused request): what was not written is of no interest.
    if (SSL_write(ssl, bytes.data(), static_cast<int>(n)) <= 0) break;
    bytes.remove_prefix(n);
  }
  SSL_shutdown(ssl);
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseBoundMs);
  char buf[16384];
  while (true) {
    const int n = SSL_read(ssl, buf, sizeof(buf));
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    const int err = SSL_get_error(ssl, n);
    // A read timeout (SO_RCVTIMEO) comes back as a syscall error with EAGAIN: a hang past the
    // bound unless the deadline is still ahead.
    if (err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Check(std::chrono::steady_clock::now() < deadline,
            "the server kept a TLS connection open past the bound", got.substr(0, 200));
      continue;
    }
    break;  // close_notify, EOF or reset: closed
  }
  handle.reset();
  close(fd);
  return got;
}

void CheckServed() {
  const std::string got = TlsConnection("GET /alive HTTP/1.1\r\nHost: f\r\n\r\n", 4096);
  Check(got.starts_with("HTTP/1.1 200"), "a fresh TLS connection was not served", got);
}

}  // namespace
}  // namespace kleaf::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace kleaf;
  spdlog::set_level(spdlog::level::off);
  signal(SIGPIPE, SIG_IGN);
  fuzz::Listener& l = fuzz::TheListener();
  char dir_template[] = "/tmp/kleaf-https-fuzz.XXXXXX";
  fuzz::Check(mkdtemp(dir_template) != nullptr, "mkdtemp");
  l.dir = dir_template;
  const std::string cert = (l.dir / "cert.pem").string();
  const std::string key = (l.dir / "key.pem").string();
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 "
      "-subj /CN=127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  fuzz::Check(std::system(command.c_str()) == 0, "openssl could not make the certificate", command);
  http::HttpServerOptions options;
  options.port = 0;
  options.threads = 2;
  // The smallest limits the config allows, so that short inputs reach them.
  options.header_limit_bytes = 1024;
  options.body_limit_bytes = 1024;
  options.idle_timeout = fuzz::kIdle;
  options.tls = {cert, key, ""};
  l.server = std::make_unique<http::HttpServer>(options, fuzz::Answer);
  auto port = l.server->Start();
  fuzz::Check(port.has_value(), "the TLS server did not start",
              port ? std::string_view() : std::string_view(port.error().message));
  l.port = *port;
  l.client = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(l.client, SSL_VERIFY_NONE, nullptr);
  fuzz::CheckServed();
  // libFuzzer's per-input timer is SIGALRM, installed without SA_RESTART: on this thread it would
  // cut the client's blocking connect, reads and writes short (EINTR) and make a false finding.
  // Blocked here, after the server's threads started with it unblocked, it is delivered to one of
  // them (Asio retries its calls), and the timer still reports a hang.
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
  // The files were read at Start; the directory is not needed any more.
  std::filesystem::remove_all(l.dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kleaf;
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 4 == 0) {
    fuzz::RawConnection(bytes);
  } else {
    const std::string got = fuzz::TlsConnection(bytes, 1 + (data[0] >> 2) * 16u);
    fuzz::Check(got.empty() || got.starts_with("HTTP/1.1 ") || got.starts_with("HTTP/1.0 "),
                "an answer over TLS does not start with a status line", got.substr(0, 200));
  }
  if (++fuzz::TheListener().inputs % 64 == 0) fuzz::CheckServed();
  return 0;
}
