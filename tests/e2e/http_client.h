// End-to-end test support: a small blocking HTTP/1.1 client (Boost.Beast) that keeps its
// connection alive, and raw-socket helpers for sending malformed input.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kleaf::e2e {

using Headers = std::vector<std::pair<std::string, std::string>>;

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
  explicit HttpClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
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
  // How many TCP connections this client has opened (1 while keep-alive holds).
  int connections_opened() const { return connections_opened_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int connections_opened_ = 0;
};

// A plain TCP connection for input no HTTP library would send. Blocking calls with deadlines.
class RawConnection {
 public:
  // `host` is an IPv4 or IPv6 literal.
  static std::expected<RawConnection, std::string> Connect(uint16_t port,
                                                           const std::string& host = "127.0.0.1");
  RawConnection(RawConnection&& other) noexcept;
  RawConnection& operator=(RawConnection&& other) noexcept;
  ~RawConnection();

  // Sends everything; false if the peer is gone.
  bool Send(std::string_view data);
  // Reads until the peer closes the connection or the deadline passes.
  struct Received {
    std::string data;
    bool closed = false;  // end of file or reset seen before the deadline
  };
  Received ReadUntilClosed(std::chrono::milliseconds timeout);
  // Reads one complete response (headers and Content-Length body); `closed` as above.
  Received ReadResponse(std::chrono::milliseconds timeout);
  // Closes at once with a reset (SO_LINGER 0): a client vanishing mid-request.
  void Reset();
  // Half-close: no more requests, answers may still come.
  void ShutdownWrite();
  void Close();

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::string pending_;  // read past the last response
};

// The status code of a raw "HTTP/1.1 NNN ..." response; 0 if there is none.
int StatusOf(std::string_view raw_response);
// The body after the blank line of a raw response.
std::string BodyOf(std::string_view raw_response);

}  // namespace kleaf::e2e
