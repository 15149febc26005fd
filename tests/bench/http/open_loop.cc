// An open-loop HTTP load generator (wrk2's model): requests are due at a constant rate whatever
// the server does, and each one's latency is counted from the moment it was due, not from when a
// connection was free to send it, so a stalled server shows in the tail instead of slowing the
// generator down (coordinated omission corrected). Keep-alive GETs of one URL over N connections,
// one request in flight per connection; a due request waits for a free connection, and that wait
// is part of its latency. One thread (pin it to a core of its own with taskset).
//
//   kleaf_open_loop HOST PORT PATH RATE SECONDS [CONNECTIONS=64] [WARMUP_SECONDS=1]
//
// Prints the rate achieved and the latency percentiles (µs) of the requests due after the
// warm-up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

struct Connection {
  int fd = -1;
  bool busy = false;
  int64_t due_ns = 0;  // when the request in flight was due
  std::string in;      // bytes of the answer read so far
};

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int Connect(const sockaddr_in& address) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) Die("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) < 0 &&
      errno != EINPROGRESS) {
    Die("connect");
  }
  return fd;
}

// The length of the first whole answer in `in` (status line, fields, Content-Length body), or 0
// while it is incomplete.
size_t AnswerLength(std::string_view in) {
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  size_t length = 0;
  std::string head(in.substr(0, end));
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (auto at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    length = std::strtoull(head.c_str() + at + 17, nullptr, 10);
  }
  const size_t total = end + 4 + length;
  return in.size() >= total ? total : 0;
}

// Waits for events up to `timeout_ns` (epoll_pwait2's nanosecond timeout: a millisecond one would
// send the requests of each millisecond in a burst).
int Wait(int epoll_fd, epoll_event* events, int max, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
              static_cast<long>(timeout_ns % 1000000000)};
  return static_cast<int>(syscall(SYS_epoll_pwait2, epoll_fd, events, max, &ts, nullptr, 0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s HOST PORT PATH RATE SECONDS [CONNECTIONS=64] [WARMUP_SECONDS=1]\n",
                 argv[0]);
    return 2;
  }
  const std::string host = argv[1];
  const int port = std::atoi(argv[2]);
  const std::string path = argv[3];
  const double rate = std::atof(argv[4]);
  const double seconds = std::atof(argv[5]);
  const int n = argc > 6 ? std::atoi(argv[6]) : 64;
  const double warmup = argc > 7 ? std::atof(argv[7]) : 1.0;
  if (rate <= 0 || seconds <= 0 || n <= 0) return 2;

  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) Die("inet_pton");
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) + "\r\n\r\n";

  int epoll_fd = epoll_create1(0);
  std::vector<Connection> connections(static_cast<size_t>(n));
  std::vector<int> idle;
  for (int i = 0; i < n; ++i) {
    connections[i].fd = Connect(address);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, connections[i].fd, &ev) < 0) Die("epoll_ctl");
    idle.push_back(i);
  }

  const int64_t interval_ns = static_cast<int64_t>(1e9 / rate);
  const int64_t start_ns = NowNs() + 100'000'000;  // connections established meanwhile
  const int64_t measure_from_ns = start_ns + static_cast<int64_t>(warmup * 1e9);
  const int64_t end_ns = measure_from_ns + static_cast<int64_t>(seconds * 1e9);
  int64_t next_due_ns = start_ns;
  std::deque<int64_t> waiting;  // due times of requests with no free connection yet
  std::vector<int64_t> latencies_ns;
  latencies_ns.reserve(static_cast<size_t>(rate * seconds * 1.1) + 16);
  uint64_t errors = 0;
  uint64_t in_flight = 0;
  std::vector<epoll_event> events(static_cast<size_t>(n));
  char buf[65536];

  auto send_on = [&](int i, int64_t due_ns) {
    Connection& c = connections[i];
    c.busy = true;
    c.due_ns = due_ns;
    ++in_flight;
    ssize_t w = send(c.fd, request.data(), request.size(), MSG_NOSIGNAL);
    if (w != static_cast<ssize_t>(request.size())) Die("send (a partial send is not handled)");
  };

  while (true) {
    int64_t now = NowNs();
    // Every request due by now is sent, or queued for a free connection.
    while (next_due_ns <= now && next_due_ns < end_ns) {
      waiting.push_back(next_due_ns);
      next_due_ns += interval_ns;
    }
    while (!waiting.empty() && !idle.empty()) {
      const int i = idle.back();
      idle.pop_back();
      send_on(i, waiting.front());
      waiting.pop_front();
    }
    if (next_due_ns >= end_ns && waiting.empty() && in_flight == 0) break;
    if (now > end_ns + 10'000'000'000LL) break;  // answers 10 s overdue: give up on them
    const int64_t timeout_ns =
        next_due_ns < end_ns ? std::max<int64_t>(0, next_due_ns - now) : 100'000'000;
    const int ready = Wait(epoll_fd, events.data(), n, timeout_ns);
    if (ready < 0) {
      if (errno == EINTR) continue;
      Die("epoll_pwait2");
    }
    for (int e = 0; e < ready; ++e) {
      const int i = static_cast<int>(events[e].data.u32);
      Connection& c = connections[i];
      while (true) {
        ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
        if (r > 0) {
          c.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
          std::fprintf(stderr, "connection %d closed by the server\n", i);
          return 1;
        }
        break;
      }
      while (size_t length = AnswerLength(c.in)) {
        if (!c.busy) {
          std::fprintf(stderr, "an answer nobody asked for\n");
          return 1;
        }
        const int64_t done = NowNs();
        if (c.in.compare(0, 12, "HTTP/1.1 200") != 0 && errors++ == 0) {
          std::fprintf(stderr, "first answer other than 200: %s\n",
                       c.in.substr(0, std::min<size_t>(length, 200)).c_str());
        }
        if (c.due_ns >= measure_from_ns) latencies_ns.push_back(done - c.due_ns);
        c.in.erase(0, length);
        c.busy = false;
        --in_flight;
        idle.push_back(i);
      }
    }
  }

  std::sort(latencies_ns.begin(), latencies_ns.end());
  auto at = [&](double q) {
    if (latencies_ns.empty()) return 0.0;
    size_t k = std::min(latencies_ns.size() - 1, static_cast<size_t>(q * latencies_ns.size()));
    return latencies_ns[k] / 1000.0;
  };
  std::printf("rate %.0f/s asked, %.0f/s answered (%zu answers in %.1f s, %lu not 200)\n", rate,
              latencies_ns.size() / seconds, latencies_ns.size(), seconds,
              static_cast<unsigned long>(errors));
  std::printf("latency_us p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f\n", at(0.5), at(0.9),
              at(0.99), at(0.999), latencies_ns.empty() ? 0.0 : latencies_ns.back() / 1000.0);
  return errors == 0 ? 0 : 1;
}
