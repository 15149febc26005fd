#include "gateway/admin_token.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace kleaf::gateway {

Result<std::string> AdminToken(const std::string& configured, const std::string& state_path) {
  if (!configured.empty()) return configured;
  std::filesystem::path path = std::filesystem::path(state_path) / "admin.token";
  if (std::ifstream in(path); in) {
    std::string token;
    std::getline(in, token);
    if (token.size() >= 16) {
      spdlog::info("[admin] token read from {}", path.string());
      return token;
    }
  }
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token += kHex[rd() % 16];
  // Created with mode 0600 from the start: no moment where another user could open it.
  std::filesystem::remove(path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  std::string line = token + "\n";
  bool written =
      fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!written) return Fail(Code::kInternal, "cannot write admin token file " + path.string());
  spdlog::info("[admin] generated an admin token into {}", path.string());
  return token;
}

}  // namespace kleaf::gateway
