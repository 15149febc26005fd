// What `kleaf standalone` prints when it is ready, the addresses http.listen takes, and a second
// process on the same state.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <regex>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"

namespace kleaf::e2e {
namespace {

using std::chrono::seconds;

bool Ipv6LoopbackAvailable() {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// GET /healthz over a raw connection to host:port; the status, 0 if there was no answer.
int Health(const std::string& host, uint16_t port) {
  auto raw = RawConnection::Connect(port, host);
  if (!raw) return 0;
  if (!raw->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) return 0;
  return StatusOf(raw->ReadResponse(seconds(5)).data);
}

TEST(StartupE2eTest, PrintsExactlyOneReadyLine) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  EXPECT_EQ(server->process->Stdout(), "kleaf standalone listening on http://127.0.0.1:" +
                                           std::to_string(server->port) + "\n");
  EXPECT_EQ(Health("127.0.0.1", server->port), 200);
}

// Plain HTTP on an address other hosts reach gets a warning at start (the README's rule: TLS on
// any listener that is not loopback); on loopback, none.
TEST(StartupE2eTest, PlainHttpBeyondLoopbackIsWarnedAbout) {
  TempDir dir;
  auto open = StartStandalone(dir.WriteFile(
      "open.yaml", TestConfig(dir.path() / "open").Set("http.listen", "0.0.0.0:0").Yaml()));
  ASSERT_TRUE(open) << open.error();
  EXPECT_EQ(Health("127.0.0.1", open->port), 200);
  const std::string warning = "plain HTTP on http://0.0.0.0:0: not a loopback address";
  EXPECT_TRUE(open->process->WaitForStderr(warning, seconds(5))) << open->process->Stderr();
  auto local =
      StartStandalone(dir.WriteFile("local.yaml", TestConfig(dir.path() / "local").Yaml()));
  ASSERT_TRUE(local) << local.error();
  EXPECT_EQ(Health("127.0.0.1", local->port), 200);
  EXPECT_EQ(local->process->Stderr().find("plain HTTP on"), std::string::npos)
      << local->process->Stderr();
}

TEST(StartupE2eTest, Ipv6ListenAddressGivesAUsableUrl) {
  if (!Ipv6LoopbackAvailable()) GTEST_SKIP() << "no IPv6 loopback here";
  TempDir dir;
  auto config = dir.WriteFile(
      "kleaf.yaml", TestConfig(dir.path() / "state").Set("http.listen", "\"[::1]:0\"").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  EXPECT_EQ(Health("::1", server->port), 200);
  // An IPv6 host in a URL goes in brackets (RFC 3986); "http://::1:8080" is no URL.
  EXPECT_EQ(server->process->Stdout(),
            "kleaf standalone listening on http://[::1]:" + std::to_string(server->port) + "\n");
}

TEST(StartupE2eTest, ListenAcceptsTheNameLocalhost) {
  // http.listen is host:port (docs/architecture.md, "Components"); "localhost:8080" is what
  // people write.
  TempDir dir;
  auto config = dir.WriteFile(
      "kleaf.yaml", TestConfig(dir.path() / "state").Set("http.listen", "localhost:0").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  int status = Health("127.0.0.1", server->port);
  if (status == 0) status = Health("::1", server->port);
  EXPECT_EQ(status, 200);
}

TEST(StartupE2eTest, SecondProcessOnTheSameStateRefusesAndTheFirstKeepsServing) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("segment.auto_create", "true")
                                                .Yaml());
  auto first = StartStandalone(config);
  ASSERT_TRUE(first) << first.error();
  HttpClient client(first->port);
  auto before = client.Get("/api/v1/segment/shared?count=10");
  ASSERT_TRUE(before) << before.error();
  ASSERT_EQ(before->status, 200);

  CommandResult second = RunKleaf({"standalone", "--config", config.string()});
  ASSERT_FALSE(second.status.timed_out) << "a second kleaf on the same state.path kept running";
  EXPECT_TRUE(second.status.exited && second.status.code != 0) << second.status.ToString();
  EXPECT_NE(second.err.find("state"), std::string::npos) << second.err;
  EXPECT_EQ(second.out.find("listening"), std::string::npos) << second.out;
  // The reason is said once: a log line (logging is set up by then), not that and a copy.
  const std::string lock = "another kleaf process";
  const size_t first_lock = second.err.find(lock);
  ASSERT_NE(first_lock, std::string::npos) << second.err;
  EXPECT_EQ(second.err.find(lock, first_lock + lock.size()), std::string::npos)
      << "the startup error was printed twice:\n"
      << second.err;

  auto after = client.Get("/api/v1/segment/shared?count=10");
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->status, 200) << after->body;
}

// The disk a fresh state.path takes (blocks allocated, preallocation included), with a few tags.
TEST(StartupE2eTest, AFreshStateDirectoryTakesAFewMegabytes) {
  TempDir dir;
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state").Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient admin(server->port);
  for (const char* tag : {"orders", "users", "payments"}) {
    auto put =
        admin.Put(std::string("/api/v1/tags/") + tag, R"({"step":1000})", Bearer(kAdminToken));
    ASSERT_TRUE(put && put->status == 200) << (put ? put->body : put.error());
  }
  int64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path() / "state")) {
    struct stat st {};
    if (entry.is_regular_file() && ::stat(entry.path().c_str(), &st) == 0) {
      bytes += st.st_blocks * 512;
    }
  }
  std::cout << "[ startup ] a fresh state.path with 3 tags takes " << bytes / 1024 << " KiB\n";
  EXPECT_LT(bytes, 16 << 20) << "a fresh state.path takes " << bytes << " bytes of disk";
}

}  // namespace
}  // namespace kleaf::e2e
