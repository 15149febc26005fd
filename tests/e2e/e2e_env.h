// End-to-end test support: kleaf config files for tests and a started standalone server.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/http_client.h"
#include "tests/e2e/kleaf_process.h"

namespace kleaf::e2e {

inline constexpr char kAdminToken[] = "e2e-admin-token-0123456789";
inline constexpr std::chrono::seconds kStartTimeout{20};
inline constexpr std::chrono::seconds kExitTimeout{15};

// A kleaf config as dotted keys ("http.listen") rendered into YAML sections. Values are written
// as given (quote them yourself when YAML needs it).
class TestConfig {
 public:
  // The defaults for tests: a free port on 127.0.0.1, state under `state_path`, a fixed admin
  // token, quiet logs, a generous segment wait and a short snowflake reservation (fast restarts).
  explicit TestConfig(const std::filesystem::path& state_path);

  TestConfig& Set(const std::string& key, const std::string& value);
  TestConfig& Erase(const std::string& key);
  std::string Yaml() const;

 private:
  std::map<std::string, std::string> values_;
};

// A running `kleaf standalone` and the port it listens on.
struct Server {
  std::unique_ptr<KleafProcess> process;
  uint16_t port = 0;
};

// Starts `kleaf standalone --config config_file` (behind `prefix`, with `env`) and waits for it
// to listen.
std::expected<Server, std::string> StartStandalone(
    const std::filesystem::path& config_file, std::vector<std::string> prefix = {},
    std::vector<std::pair<std::string, std::string>> env = {});

// Runs kleaf with `args` to completion; its exit status, stdout and stderr.
struct CommandResult {
  ExitStatus status;
  std::string out;
  std::string err;
};
CommandResult RunKleaf(std::vector<std::string> args, std::vector<std::string> prefix = {},
                       std::chrono::milliseconds timeout = kExitTimeout);

// The IDs of a 200 reply: the decimal body of a Leaf-compatible route (`plain`), or the "ids" of
// {"tag","ids"} (which must name `tag`); an error text for anything else.
std::expected<std::vector<int64_t>, std::string> IdsOf(const HttpReply& reply, bool plain,
                                                       const std::string& tag);

// A snowflake ID split with the default layout (41/10/12 bits, Leaf's epoch).
struct SnowflakeParts {
  int64_t timestamp_ms;
  int64_t worker_id;
  int64_t sequence;
};
SnowflakeParts SplitDefaultSnowflake(int64_t id);

// Milliseconds since the Unix epoch, from the wall clock of the test process.
int64_t WallClockMs();

// "Authorization: Bearer <token>".
Headers Bearer(const std::string& token);

// --- libfaketime: a kleaf whose wall clock is moved (the monotonic clock, deadlines, stays true)

// The library CMake found (KLEAF_LIBFAKETIME); empty when it is not installed.
std::string Libfaketime();

// A command prefix that preloads libfaketime with a relative offset (as `faketime -m -f OFFSET`
// would), through env(1) rather than the faketime wrapper: the wrapper creates a named semaphore
// per pid with O_EXCL that a process killed with kill -9 leaves behind, and a later wrapper given
// the same pid then refuses to start ("sem_open: File exists"). Use with FaketimeEnv(). Here and
// in OffsetFile the shim of faketime_c11.cc is preloaded before libfaketime, so that librdkafka's
// timed waits follow the faked clock too.
std::vector<std::string> FaketimePrefix(const std::string& offset);
// The environment beside FaketimePrefix: the monotonic clock is not faked.
std::vector<std::pair<std::string, std::string>> FaketimeEnv();

// libfaketime reading its offset from a file the test rewrites: the clock of a running kleaf
// moves.
class OffsetFile {
 public:
  // The file is dir/faketime.offset, at "+0" until Set().
  explicit OffsetFile(const std::filesystem::path& dir);
  // An offset in libfaketime's syntax: seconds with an optional fraction ("-0.003" is 3 ms back,
  // "+60" a minute ahead, "-10m" ten minutes back; beware "-3ms", which reads as 3 minutes).
  // Replaced atomically: the library never reads a half-written file.
  void Set(const std::string& offset);
  // The environment that preloads libfaketime on this file.
  std::vector<std::pair<std::string, std::string>> Environment() const;

 private:
  std::filesystem::path file_;
};

}  // namespace kleaf::e2e
