// End-to-end test support: runs the real kleaf binary as a child process (optionally behind a
// command prefix such as faketime), captures its output, and gives each test a temp directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <expected>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace kleaf::e2e {

// The kleaf binary under test: $KLEAF_E2E_BINARY if set, else the one CMake built.
std::string KleafBinary();

// kill(SIGSTOP) returns before the process has stopped: one of its threads takes the signal when
// it next runs and only then stops the others, so on a busy machine the rest go on running (a
// broker answers requests) for milliseconds after. Waits until every thread of every process of
// `pids` is stopped (state T in /proc/PID/task/TID/stat); false at the deadline or if one is gone.
bool WaitStopped(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);
// The processes of process group `pgid` (from /proc).
std::vector<pid_t> ProcessGroupMembers(pid_t pgid);

// A fresh directory (mkdtemp) removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to path()/name and returns the full path.
  std::filesystem::path WriteFile(std::string_view name, std::string_view content) const;

 private:
  std::filesystem::path path_;
};

// Reads a whole file; empty when it cannot be read.
std::string ReadFile(const std::filesystem::path& path);

struct ProcessOptions {
  std::vector<std::string> args;    // arguments after the kleaf binary, e.g. {"standalone", ...}
  std::vector<std::string> prefix;  // a command in front of kleaf, e.g. {"faketime", "-f", "+1d"}
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) our environment
};

struct ExitStatus {
  bool exited = false;  // ended through exit(); `code` is valid
  int code = -1;
  int signal = 0;       // ended by this signal
  bool timed_out = false;  // still running when the deadline passed
  std::string ToString() const;
};

// One child process (fork + execve) and the ones it starts. The child runs in its own process
// group; signals go to the whole group, so a command prefix that forks (faketime does) cannot leave
// kleaf behind. The test process makes itself a child subreaper, so orphaned group members are
// reaped here too, and the child gets SIGKILL if the test process dies (PR_SET_PDEATHSIG).
//
// A pump thread drains stdout and stderr (poll()) into buffers, so a chatty child never blocks on
// a full pipe. Every wait takes a deadline. Not thread-safe except where noted.
class KleafProcess {
 public:
  static std::expected<std::unique_ptr<KleafProcess>, std::string> Start(ProcessOptions options);
  ~KleafProcess();  // kills (SIGKILL) and reaps the group if still running
  KleafProcess(const KleafProcess&) = delete;
  KleafProcess& operator=(const KleafProcess&) = delete;

  // Waits for the line "kleaf standalone listening on http://HOST:PORT" on stdout and returns
  // PORT; an error (with the captured stderr) if the process exits or the deadline passes first.
  std::expected<uint16_t, std::string> WaitListening(std::chrono::milliseconds timeout);
  // Waits until stderr contains `needle`; false at the deadline or at end of output.
  bool WaitForStderr(std::string_view needle, std::chrono::milliseconds timeout);

  void Terminate() { Signal(SIGTERM); }  // SIGTERM to the group
  void Kill() { Signal(SIGKILL); }       // SIGKILL to the group
  // To the group. SIGSTOP returns once every thread of the group is stopped (WaitStopped, up to
  // 10 s), so the caller can count on a frozen process from then on.
  void Signal(int signal);

  // Waits for the process to end and reaps it (and every other member of its group).
  ExitStatus WaitExit(std::chrono::milliseconds timeout);
  // Kill() + WaitExit(); for teardown and crash tests.
  ExitStatus KillAndWait(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  bool running() const { return !reaped_; }
  pid_t pid() const { return pid_; }
  // What the process printed so far (thread-safe).
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  KleafProcess() = default;
  void Pump();
  void ReapGroup();
  void StopPump();

  pid_t pid_ = -1;  // also the process group id
  int pidfd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int wake_read_fd_ = -1;  // the pump stops when this becomes readable
  int wake_write_fd_ = -1;
  bool reaped_ = false;
  ExitStatus status_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string stdout_;  // guarded by mu_
  std::string stderr_;  // guarded by mu_
  bool pump_done_ = false;  // guarded by mu_: both pipes at end of file (or pump stopped)
  std::thread pump_;
};

}  // namespace kleaf::e2e
