#include "tests/e2e/kleaf_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace kleaf::e2e {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

int MillisLeft(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// The environment for the child: ours, with `overrides` added or replaced.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  for (const auto& [name, value] : overrides) env[name] = value;
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// `name` as execve() needs it: unchanged if it holds a slash, else the first match on $PATH.
std::string ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = dirs.find(':');
    std::string candidate = std::string(dirs.substr(0, colon)) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return name;
    dirs.remove_prefix(colon + 1);
  }
}

}  // namespace

std::string KleafBinary() {
  // Lets the suite run against another build (a sanitizer build, an installed binary).
  const char* other = std::getenv("KLEAF_E2E_BINARY");
  return other != nullptr && *other != '\0' ? other : KLEAF_BINARY;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kleaf-e2e-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error(Errno("mkdtemp " + pattern));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path TempDir::WriteFile(std::string_view name, std::string_view content) const {
  std::filesystem::path file = path_ / name;
  std::ofstream out(file, std::ios::trunc | std::ios::binary);
  out << content;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return file;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ExitStatus::ToString() const {
  if (timed_out) return "still running at the deadline";
  if (exited) return "exit code " + std::to_string(code);
  if (signal != 0) return std::string("killed by signal ") + strsignal(signal);
  return "unknown";
}

std::expected<std::unique_ptr<KleafProcess>, std::string> KleafProcess::Start(
    ProcessOptions options) {
  // Orphans of our children (e.g. kleaf when a faketime wrapper dies) come back to us for reaping.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::unique_ptr<KleafProcess> p(new KleafProcess());
  int out_pipe[2], err_pipe[2], wake_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return std::unexpected(Errno("pipe"));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return std::unexpected(Errno("pipe"));
  if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return std::unexpected(Errno("pipe"));

  std::vector<std::string> argv_strings = options.prefix;
  argv_strings.push_back(KleafBinary());
  argv_strings.insert(argv_strings.end(), options.args.begin(), options.args.end());
  std::vector<std::string> env_strings = ChildEnvironment(options.env);
  auto argv = Pointers(argv_strings);
  auto envp = Pointers(env_strings);

  // Resolved before fork(): between fork and exec the child only makes async-signal-safe calls.
  std::string program = ResolveProgram(argv_strings.front());
  int exec_pipe[2];  // the child reports a failed exec through it; closes on a successful one
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return std::unexpected(Errno("pipe"));
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    // A test runner that dies (crash, ctest timeout) takes its servers with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD, SIGHUP}) ::signal(sig, SIG_DFL);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out_pipe[1], 1) < 0 ||
        ::dup2(err_pipe[1], 2) < 0 || ::dup2(exec_pipe[1], 3) < 0) {
      ::_exit(127);
    }
    ::fcntl(3, F_SETFD, FD_CLOEXEC);
    // Sockets of this test (Asio does not mark them close-on-exec) must not live on in kleaf.
    ::closefrom(4);
    ::execve(program.c_str(), argv.data(), envp.data());
    int error = errno;
    [[maybe_unused]] ssize_t n = ::write(3, &error, sizeof(error));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int exec_error = 0;
  ssize_t got = -1;
  if (pid > 0) {
    ::setpgid(pid, pid);  // also here, so the group exists before we signal it
    do {
      got = ::read(exec_pipe[0], &exec_error, sizeof(exec_error));
    } while (got < 0 && errno == EINTR);
  }
  ::close(exec_pipe[0]);
  if (pid < 0 || got > 0) {
    std::string error =
        pid < 0 ? Errno("fork") : "exec " + program + ": " + std::strerror(exec_error);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::close(wake_pipe[0]);
    ::close(wake_pipe[1]);
    return std::unexpected(error);
  }
  p->pid_ = pid;
  p->stdout_fd_ = out_pipe[0];
  p->stderr_fd_ = err_pipe[0];
  p->wake_read_fd_ = wake_pipe[0];
  p->wake_write_fd_ = wake_pipe[1];
  p->pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (p->pidfd_ < 0) {
    std::string error = Errno("pidfd_open");
    ::kill(-pid, SIGKILL);
    p->ReapGroup();
    return std::unexpected(error);
  }
  p->pump_ = std::thread([raw = p.get()] { raw->Pump(); });
  return p;
}

KleafProcess::~KleafProcess() {
  if (!reaped_ && pid_ > 0) KillAndWait();
  StopPump();
  CloseFd(pidfd_);
  CloseFd(stdout_fd_);
  CloseFd(stderr_fd_);
  CloseFd(wake_read_fd_);
  CloseFd(wake_write_fd_);
}

void KleafProcess::Pump() {
  char buf[16384];
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[3] = {{out_open ? stdout_fd_ : -1, POLLIN, 0},
                     {err_open ? stderr_fd_ : -1, POLLIN, 0},
                     {wake_read_fd_, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard lock(mu_);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? stdout_ : stderr_).append(buf, static_cast<size_t>(n));
      }
      cv_.notify_all();
    }
  }
  std::lock_guard lock(mu_);
  pump_done_ = true;
  cv_.notify_all();
}

void KleafProcess::StopPump() {
  if (!pump_.joinable()) return;
  if (wake_write_fd_ >= 0) {
    char c = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_write_fd_, &c, 1);
  }
  pump_.join();
}

std::expected<uint16_t, std::string> KleafProcess::WaitListening(
    std::chrono::milliseconds timeout) {
  // The port is what follows the last colon, whatever the host looks like.
  static const std::regex kListening(R"(kleaf standalone listening on https?://\S+:(\d+)\r?\n)");
  std::unique_lock lock(mu_);
  std::smatch match;
  bool found = cv_.wait_for(lock, timeout, [&] {
    return std::regex_search(stdout_, match, kListening) || pump_done_;
  });
  if (found && !match.empty()) return static_cast<uint16_t>(std::stoi(match[1].str()));
  return std::unexpected(std::string(pump_done_ ? "kleaf ended its output" : "deadline passed") +
                         " before printing 'listening on'; stdout:\n" + stdout_ + "\nstderr:\n" +
                         stderr_);
}

bool KleafProcess::WaitForStderr(std::string_view needle, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    return stderr_.find(needle) != std::string::npos || pump_done_;
  }) && stderr_.find(needle) != std::string::npos;
}

void KleafProcess::Signal(int signal) {
  // The group id cannot be reused while its leader is unreaped, so this reaches only our group.
  if (reaped_ || pid_ <= 0) return;
  ::kill(-pid_, signal);
  if (signal == SIGSTOP && !WaitStopped(ProcessGroupMembers(pid_), std::chrono::seconds(10))) {
    std::fprintf(stderr, "[kleaf_process] group %d not stopped 10 s after SIGSTOP\n",
                 static_cast<int>(pid_));
  }
}

namespace {

// The state letter of /proc/.../stat ("PID (COMM) S ..."; COMM may hold spaces and parentheses);
// 0 if it cannot be read.
char StatState(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string line;
  if (!std::getline(in, line)) return 0;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

// Whether every thread of `pid` is stopped; nullopt if the process is gone.
std::optional<bool> AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return std::nullopt;
  bool any = false;
  for (const auto& task : it) {
    const char state = StatState(task.path() / "stat");
    if (state == 0) continue;  // that thread just ended
    any = true;
    if (state != 'T' && state != 't') return false;
  }
  if (!any) return std::nullopt;
  return true;
}

}  // namespace

bool WaitStopped(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true;
    for (pid_t pid : pids) {
      auto stopped = AllThreadsStopped(pid);
      if (!stopped) return false;
      all = all && *stopped;
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<pid_t> ProcessGroupMembers(pid_t pgid) {
  std::vector<pid_t> members;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (::getpgid(pid) == pgid) members.push_back(pid);
  }
  return members;
}

void KleafProcess::ReapGroup() {
  // The leader has ended but is not reaped yet: stop whatever else is left in its group (a
  // wrapper's child), then reap everything.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_.exited = WIFEXITED(status);
    status_.code = status_.exited ? WEXITSTATUS(status) : -1;
    status_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  reaped_ = true;
  // Remaining members were SIGKILLed above; wait for each (they are our children: subreaper).
  while (true) {
    r = ::waitpid(-pid_, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
  }
}

ExitStatus KleafProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (reaped_) return status_;
  auto deadline = Clock::now() + timeout;
  while (true) {
    pollfd fd{pidfd_, POLLIN, 0};
    int n = ::poll(&fd, 1, MillisLeft(deadline));
    if (n > 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (Clock::now() >= deadline) {
      ExitStatus s;
      s.timed_out = true;
      return s;
    }
  }
  ReapGroup();
  // Every writer of the pipes is gone: collect the rest of the output.
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [this] { return pump_done_; });
  }
  return status_;
}

ExitStatus KleafProcess::KillAndWait(std::chrono::milliseconds timeout) {
  Kill();
  return WaitExit(timeout);
}

std::string KleafProcess::Stdout() const {
  std::lock_guard lock(mu_);
  return stdout_;
}

std::string KleafProcess::Stderr() const {
  std::lock_guard lock(mu_);
  return stderr_;
}

}  // namespace kleaf::e2e
