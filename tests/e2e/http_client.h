// End-to-end test support: a small blocking HTTP/1.1 client (Boost.Beast) that keeps its
// connection alive, and raw-socket helpers for sending malformed input; both over plain TCP or
// TLS.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kleaf::e2e {

using Headers = std::vector<std::pair<std::string, std::string>>;

// How a client reaches the node: plain TCP, or TLS (http.tls) with the server's certificate
// verified against `ca_file` and the IP address connected to.
struct Transport {
  std::filesystem::path ca_file;  // empty: plain TCP
  bool tls() const { return !ca_file.empty(); }
};

struct HttpReply {
  int status = 0;
  Headers headers;
  std::string body;
  bool keep_alive = false;
  // The value of header `name` (case-insensitive); empty when absent.
  std::string Header(std::string_view name) const;
};

// One keep-alive connection to 127.0.0.1:port, opened on first use and again after the server
// closed it. Each call blocks until the reply arrives or `timeout` passes (then the connection is
// dropped and an error returned). Not thread-safe: one client per thread.
class HttpClient {
 public:
  explicit HttpClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                      Transport transport = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  std::expected<HttpReply, std::string> Get(const std::string& target, const Headers& headers = {});
  std::expected<HttpReply, std::string> Put(const std::string& target, std::string body,
                                            const Headers& headers = {});
  std::expected<HttpReply, std::string> Delete(const std::string& target,
                                               const Headers& headers = {});
  // Any method, e.g. "POST".
  std::expected<HttpReply, std::string> Request(const std::string& method,
                                                const std::string& target, std::string body,
                                                const Headers& headers);

  void Close();
  bool connected() const;
  // How many connections this client has opened (1 while keep-alive holds).
  int connections_opened() const { return connections_opened_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int connections_opened_ = 0;
};

// A connection for input no HTTP library would send: plain TCP, or TLS through OpenSSL on the same
// non-blocking socket (the bytes given travel as TLS application data). Blocking calls with
// deadlines.
class RawConnection {
 public:
  // `host` is an IPv4 or IPv6 literal. Over TLS the handshake is done here (bounded too).
  static std::expected<RawConnection, std::string> Connect(uint16_t port,
                                                           const std::string& host = "127.0.0.1",
                                                           const Transport& transport = {});
  RawConnection(RawConnection&& other) noexcept;
  RawConnection& operator=(RawConnection&& other) noexcept;
  ~RawConnection();

  // Sends everything; false if the peer is gone or it cannot be sent within 10 s.
  bool Send(std::string_view data);
  // Reads until the peer closes the connection or the deadline passes.
  struct Received {
    std::string data;
    bool closed = false;  // end of file, TLS close_notify or reset seen before the deadline
  };
  Received ReadUntilClosed(std::chrono::milliseconds timeout);
  // Reads one complete response (headers and Content-Length body); `closed` as above.
  Received ReadResponse(std::chrono::milliseconds timeout);
  // Closes at once with a reset (SO_LINGER 0), over TLS without close_notify: a client vanishing
  // mid-request.
  void Reset();
  // Half-close: no more requests, answers may still come. Over TLS: close_notify (TCP stays open
  // both ways, as TLS has no half-close of its own).
  void ShutdownWrite();
  // Over TLS: close_notify first, if the socket takes it at once.
  void Close();

  // TLS only: the serial number of the server's certificate in hex ("1001"); empty otherwise.
  std::string PeerSerial() const;

 private:
  struct Tls;  // the OpenSSL session over fd_
  explicit RawConnection(int fd);
  std::string StartTls(const std::string& host, const std::filesystem::path& ca_file);
  // Waits for bytes until `deadline`: how many were read into `buf`, 0 when the connection is
  // closed (or reset), -1 at the deadline.
  long ReadSome(char* buf, size_t size, std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::unique_ptr<Tls> tls_;  // null over plain TCP
  std::string pending_;       // read past the last response
};

// The status code of a raw "HTTP/1.1 NNN ..." response; 0 if there is none.
int StatusOf(std::string_view raw_response);
// The body after the blank line of a raw response.
std::string BodyOf(std::string_view raw_response);

}  // namespace kleaf::e2e
