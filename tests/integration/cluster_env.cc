#include "tests/integration/cluster_env.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "allocator/sequences.h"
#include "kafka/client.h"
#include "kafka/message.h"
#include "tests/e2e/http_client.h"

extern char** environ;

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

// --- The broker ----------------------------------------------------------------------------------

std::optional<KafkaBroker> KafkaBroker::FromEnvironment() {
  KafkaBroker b;
  b.bootstrap = Env("KLEAF_TEST_KAFKA_BOOTSTRAP");
  b.port = Env("KLEAF_TEST_KAFKA_PORT");
  b.dir = Env("KLEAF_TEST_KAFKA_DIR");
  b.script = Env("KLEAF_TEST_KAFKA_SCRIPT");
  if (b.bootstrap.empty()) return std::nullopt;
  return b;
}

std::expected<void, std::string> KafkaBroker::Stop() const {
  if (script.empty() || dir.empty()) {
    return std::unexpected(
        "KLEAF_TEST_KAFKA_SCRIPT and KLEAF_TEST_KAFKA_DIR are needed to stop the broker");
  }
  auto r = RunScript({script, "stop", "--dir", dir, "--timeout", "30"}, std::chrono::seconds(90));
  if (r.exit_code != 0) {
    return std::unexpected("kafka.sh stop: exit " + std::to_string(r.exit_code) + ":\n" + r.output);
  }
  return {};
}

std::expected<void, std::string> KafkaBroker::Start() const {
  if (script.empty() || dir.empty() || port.empty()) {
    return std::unexpected(
        "KLEAF_TEST_KAFKA_SCRIPT, _DIR and _PORT are needed to start the broker");
  }
  auto r = RunScript({script, "start", "--port", port, "--dir", dir, "--timeout", "90"},
                     std::chrono::seconds(150));
  if (r.exit_code != 0) {
    return std::unexpected("kafka.sh start: exit " + std::to_string(r.exit_code) + ":\n" +
                           r.output);
  }
  return {};
}

BrokerRestartGuard::~BrokerRestartGuard() {
  if (auto r = broker_.Start(); !r) {
    ADD_FAILURE() << "could not bring the broker back for the next tests: " << r.error();
  }
}

BrokerFreeze::BrokerFreeze(const KafkaBroker& broker) : broker_(broker) {
  std::ifstream(broker.dir + "/kafka.pid") >> pid_;
}

bool BrokerFreeze::Freeze() {
  frozen_ = pid_ > 0 && ::kill(pid_, SIGSTOP) == 0;
  // kill() returns before the JVM's threads have stopped: without this wait a request sent right
  // after could still be answered (a transaction committed "on a frozen broker", CI 2026-12-06).
  return frozen_ && e2e::WaitStopped({pid_}, std::chrono::seconds(10));
}

void BrokerFreeze::Thaw() {
  if (!frozen_) return;
  frozen_ = false;
  ::kill(pid_, SIGCONT);
  // A frozen broker missed its heartbeats to its controller: it is fenced until it registers
  // again, and meanwhile creates no topic and leads no partition. The next test needs it whole.
  const std::string probe = "kleaf-thaw-probe-" + std::to_string(::getpid()) + "-" +
                            std::to_string(SteadyClock::now().time_since_epoch().count());
  // Until it has registered again, creating a topic fails at once ("All brokers are currently
  // fenced"): ask again until the deadline.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  auto ready = kafka::EnsureTopics({{"bootstrap.servers", broker_.bootstrap}}, {{probe, 1, 1, {}}},
                                   std::chrono::seconds(10));
  while (!ready && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ready = kafka::EnsureTopics({{"bootstrap.servers", broker_.bootstrap}}, {{probe, 1, 1, {}}},
                                std::chrono::seconds(10));
  }
  if (!ready)
    ADD_FAILURE() << "the broker did not recover after a freeze: " << ready.error().message;
}

// --- The three-broker cluster --------------------------------------------------------------------

std::optional<KafkaCluster3> KafkaCluster3::FromEnvironment() {
  KafkaCluster3 k{Env("KLEAF_TEST_KAFKA3_BOOTSTRAP"), Env("KLEAF_TEST_KAFKA3_DIR"),
                  Env("KLEAF_TEST_KAFKA3_SCRIPT")};
  if (k.bootstrap.empty()) return std::nullopt;
  return k;
}

KafkaBroker KafkaCluster3::AsBroker() const {
  KafkaBroker b;
  b.bootstrap = bootstrap;
  b.script = script;
  b.replication_factor = kNodes;
  return b;
}

std::expected<std::string, std::string> KafkaCluster3::Call(const std::vector<std::string>& args,
                                                            std::chrono::seconds timeout) const {
  if (script.empty() || dir.empty()) {
    return std::unexpected("KLEAF_TEST_KAFKA3_SCRIPT and KLEAF_TEST_KAFKA3_DIR are needed for " +
                           args.front());
  }
  std::vector<std::string> argv = {script, args.front(), "--dir", dir};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  auto r = RunScript(argv, timeout);
  if (r.exit_code != 0) {
    std::string command = "kafka.sh";
    for (const auto& a : args) command += " " + a;
    return std::unexpected(command + ": exit " + std::to_string(r.exit_code) + ":\n" + r.output);
  }
  return r.output;
}

namespace {

// The last line of kafka.sh's output that is not one of its own "kafka.sh: ..." messages (they go
// to stderr, which RunScript mixes in): what it printed on stdout.
std::string Answer(const std::string& output) {
  std::istringstream in(output);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.rfind("kafka.sh:", 0) != 0) last = line;
  }
  return last;
}

std::expected<int, std::string> NodeIdIn(const std::expected<std::string, std::string>& output) {
  if (!output) return std::unexpected(output.error());
  const std::string answer = Answer(*output);
  int id = 0;
  auto [ptr, ec] = std::from_chars(answer.data(), answer.data() + answer.size(), id);
  if (answer.empty() || ec != std::errc() || ptr != answer.data() + answer.size()) {
    return std::unexpected("not a node id: " + *output);
  }
  return id;
}

std::expected<void, std::string> Done(const std::expected<std::string, std::string>& output) {
  if (!output) return std::unexpected(output.error());
  return {};
}

}  // namespace

std::expected<void, std::string> KafkaCluster3::Kill(int node) const {
  return Done(Call({"cluster-node", std::to_string(node), "kill"}, std::chrono::seconds(30)));
}

std::expected<void, std::string> KafkaCluster3::Stop(int node) const {
  return Done(Call({"cluster-node", std::to_string(node), "stop", "--timeout", "30"},
                   std::chrono::seconds(60)));
}

std::expected<void, std::string> KafkaCluster3::Start(int node) const {
  return Done(Call({"cluster-node", std::to_string(node), "start", "--timeout", "90"},
                   std::chrono::seconds(120)));
}

std::expected<void, std::string> KafkaCluster3::StartAll() const {
  return Done(Call({"cluster-start", "--timeout", "120"}, std::chrono::seconds(150)));
}

std::expected<void, std::string> KafkaCluster3::Freeze(int node) const {
  return Done(Call({"cluster-node", std::to_string(node), "freeze"}, std::chrono::seconds(30)));
}

std::expected<void, std::string> KafkaCluster3::Thaw(int node) const {
  return Done(Call({"cluster-node", std::to_string(node), "thaw"}, std::chrono::seconds(30)));
}

std::expected<int, std::string> KafkaCluster3::LeaderOf(const std::string& topic,
                                                        int32_t partition) const {
  return NodeIdIn(
      Call({"cluster-leader", topic, std::to_string(partition)}, std::chrono::seconds(30)));
}

std::expected<int, std::string> KafkaCluster3::ActiveController() const {
  return NodeIdIn(Call({"cluster-controller"}, std::chrono::seconds(30)));
}

std::string KafkaCluster3::Status() const {
  auto r = RunScript({script, "cluster-status", "--dir", dir}, std::chrono::seconds(30));
  return r.output;
}

std::string KafkaCluster3::NodeLog(int node, int lines) const {
  std::ifstream in(dir + "/node-" + std::to_string(node) + "/kafka.log");
  std::stringstream text;
  text << in.rdbuf();
  return LastLines(text.str(), lines);
}

ClusterRestartGuard::~ClusterRestartGuard() {
  if (auto r = kafka_.StartAll(); !r) {
    ADD_FAILURE() << "could not bring the Kafka cluster back for the next tests: " << r.error();
  }
}

std::expected<void, std::string> NodeFreeze::Freeze() {
  auto r = kafka_.Freeze(node_);
  frozen_ = r.has_value();
  return r;
}

void NodeFreeze::Thaw() {
  if (!frozen_) return;
  frozen_ = false;
  if (auto r = kafka_.Thaw(node_); !r) ADD_FAILURE() << "could not thaw Kafka node " << node_;
  // The frozen node missed its heartbeats: it is fenced until it registers again. The rest of the
  // test and the next tests need all three.
  if (auto r = kafka_.StartAll(); !r) {
    ADD_FAILURE() << "Kafka node " << node_ << " did not rejoin after a freeze: " << r.error();
  }
}

ScriptResult RunScript(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  ScriptResult result;
  // Output goes to an anonymous memory file: no pipe to drain, and a background child of the
  // script (the broker) cannot hold it open for us.
  int out = ::memfd_create("kleaf-script-output", MFD_CLOEXEC);
  if (out < 0) {
    result.output = std::string("memfd_create: ") + std::strerror(errno);
    return result;
  }
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  // Our sockets and pipes must not live on in the broker the script may start.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, ptrs[0], &actions, &attr, ptrs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ::close(out);
    result.output = "posix_spawn " + argv.front() + ": " + std::strerror(rc);
    return result;
  }
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  const auto deadline = SteadyClock::now() + timeout;
  bool ended = false;
  while (pidfd >= 0) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
    pollfd p{pidfd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (n > 0) {
      ended = true;
      break;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // deadline
  }
  if (!ended && pidfd >= 0) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pidfd >= 0) ::close(pidfd);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  ::lseek(out, 0, SEEK_SET);
  char buf[8192];
  for (ssize_t n; (n = ::read(out, buf, sizeof(buf))) > 0;)
    result.output.append(buf, static_cast<size_t>(n));
  ::close(out);
  if (!ended)
    result.output += "\n(killed at the deadline of " + std::to_string(timeout.count()) + " s)";
  return result;
}

// --- Waiting and text ----------------------------------------------------------------------------

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (SteadyClock::now() >= deadline) return done();
    std::this_thread::sleep_for(milliseconds(20));  // poll interval of a deadline-bounded wait
  }
}

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

int Count(std::string_view text, std::string_view needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

std::string LastLines(const std::string& text, int lines) {
  if (text.empty()) return text;
  size_t pos = text.size();
  for (int i = 0; i <= lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return "[...]\n" + text.substr(pos + 1);
}

std::vector<std::string> LinesWith(std::string_view text, std::string_view needle) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string TagOnPartition(const std::string& base, int32_t partition, int32_t partitions) {
  for (int k = 0;; ++k) {
    std::string tag = base + "-" + std::to_string(k);
    if (kafka::PartitionFor(tag, partitions) == partition) return tag;
  }
}

// --- Leases ---------------------------------------------------------------------------------

std::map<std::string, std::string> ShortLeases(int64_t ttl_ms) {
  return {{"workers.lease_ttl_ms", std::to_string(ttl_ms)},
          {"workers.renew_interval_ms", std::to_string(kRenewIntervalMs)},
          {"workers.safety_margin_ms", std::to_string(kSafetyMarginMs)},
          {"workers.max_clock_skew_ms", std::to_string(kMaxClockSkewMs)},
          {"workers.claim_timeout_ms", "20000"}};
}

// --- HTTP calls ----------------------------------------------------------------------------------

namespace {

std::expected<TagState, std::string> TagFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("max_id") || !j.contains("step")) {
    return std::unexpected("not a tag: " + j.dump());
  }
  return TagState{j["max_id"].get<int64_t>(), j["step"].get<int64_t>(),
                  j.value("description", std::string())};
}

}  // namespace

std::expected<nlohmann::json, std::string> AdminCall(uint16_t port, const std::string& method,
                                                     const std::string& target, std::string body,
                                                     e2e::Transport transport) {
  e2e::HttpClient client(port, std::chrono::seconds(20), std::move(transport));
  auto reply = client.Request(method, target, std::move(body), e2e::Bearer(e2e::kAdminToken));
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected(method + " " + target + ": status " + std::to_string(reply->status) +
                           ": " + reply->body);
  }
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded())
    return std::unexpected(method + " " + target + ": not JSON: " + reply->body);
  return j;
}

std::expected<std::map<std::string, TagState>, std::string> ListTags(uint16_t port) {
  auto j = AdminCall(port, "GET", "/api/v1/tags", "");
  if (!j) return std::unexpected(j.error());
  if (!j->contains("tags") || !(*j)["tags"].is_array()) {
    return std::unexpected("tag list without tags: " + j->dump());
  }
  std::map<std::string, TagState> out;
  for (const auto& t : (*j)["tags"]) {
    auto state = TagFromJson(t);
    if (!state) return std::unexpected(state.error());
    out[t.value("tag", std::string())] = *state;
  }
  return out;
}

std::expected<TagState, std::string> GetTag(uint16_t port, const std::string& tag) {
  auto j = AdminCall(port, "GET", "/api/v1/tags/" + tag, "");
  if (!j) return std::unexpected(j.error());
  return TagFromJson(*j);
}

std::expected<TagState, std::string> PutTag(uint16_t port, const std::string& tag,
                                            const std::string& body) {
  auto j = AdminCall(port, "PUT", "/api/v1/tags/" + tag, body);
  if (!j) return std::unexpected(j.error());
  return TagFromJson(*j);
}

std::expected<void, std::string> DeleteTag(uint16_t port, const std::string& tag) {
  auto j = AdminCall(port, "DELETE", "/api/v1/tags/" + tag, "");
  if (!j) return std::unexpected(j.error());
  return {};
}

std::expected<std::vector<int64_t>, std::string> FetchIds(uint16_t port, const std::string& tag,
                                                          int count) {
  e2e::HttpClient client(port, std::chrono::seconds(20));
  const bool plain = count == 1;
  auto reply = client.Get(plain ? "/api/segment/get/" + tag
                                : "/api/v1/segment/" + tag + "?count=" + std::to_string(count));
  if (!reply) return std::unexpected(reply.error());
  return e2e::IdsOf(*reply, plain, tag);
}

std::expected<std::vector<int64_t>, std::string> GetSnowflakes(uint16_t port,
                                                               const std::string& tag, int count) {
  e2e::HttpClient client(port, std::chrono::seconds(20));
  const bool plain = count == 1;
  auto reply = client.Get(plain ? "/api/snowflake/get/" + tag
                                : "/api/v1/snowflake/" + tag + "?count=" + std::to_string(count));
  if (!reply) return std::unexpected(reply.error());
  return e2e::IdsOf(*reply, plain, tag);
}

std::expected<WorkersView, std::string> GetWorkers(uint16_t port) {
  e2e::HttpClient client(port, std::chrono::seconds(20));
  auto reply = client.Get("/api/v1/workers", e2e::Bearer(e2e::kAdminToken));
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected("GET /api/v1/workers: status " + std::to_string(reply->status) + ": " +
                           reply->body);
  }
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (!j.is_object()) {
    return std::unexpected("GET /api/v1/workers: not a JSON object: " + reply->body);
  }
  WorkersView v;
  v.body = reply->body;
  v.source = j.value("source", "");
  v.leased = j.value("leased", int64_t{-1});
  v.free = j.value("free", int64_t{-1});
  if (j.contains("node") && j["node"].is_object()) {
    v.worker_id = j["node"].value("worker_id", int64_t{-1});
    v.valid_for_ms = j["node"].value("valid_for_ms", int64_t{-1});
  }
  return v;
}

std::expected<int64_t, std::string> WorkerIdOf(uint16_t port) {
  e2e::HttpClient client(port, std::chrono::seconds(10));
  auto reply = client.Get("/api/v1/status");
  if (!reply) return std::unexpected(reply.error());
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (reply->status != 200 || !j.is_object() || !j.contains("worker") || !j["worker"].is_object() ||
      !j["worker"].contains("worker_id")) {
    return std::unexpected("GET /api/v1/status: status " + std::to_string(reply->status) +
                           " without worker.worker_id: " + reply->body);
  }
  return j["worker"]["worker_id"].get<int64_t>();
}

std::optional<double> Metrics::Value(const std::string& name, const std::string& labels) const {
  auto it = series.find(labels.empty() ? name : name + "{" + labels + "}");
  if (it == series.end()) return std::nullopt;
  return it->second;
}

double Metrics::Sum(const std::string& name) const {
  double sum = 0;
  for (auto it = series.lower_bound(name); it != series.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, name.size(), name) != 0) break;
    if (key.size() == name.size() || key[name.size()] == '{') sum += it->second;
  }
  return sum;
}

std::expected<Metrics, std::string> ScrapeMetrics(uint16_t port, e2e::Transport transport) {
  e2e::HttpClient client(port, std::chrono::seconds(5), std::move(transport));
  auto reply = client.Get("/metrics");
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected("GET /metrics: status " + std::to_string(reply->status));
  }
  Metrics m;
  std::istringstream in(reply->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    m.series[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return m;
}

// --- Nodes ---------------------------------------------------------------------------------------

namespace {

const char* RoleName(Node::Role role) {
  return role == Node::Role::kAllocator ? "allocator" : "gateway";
}

}  // namespace

bool Node::Exited() const { return !process || !process->WaitExit(milliseconds(0)).timed_out; }

std::expected<void, std::string> Spawn(Node& node, ProcessEnv env,
                                       std::vector<std::string> prefix) {
  if (node.process) {
    if (!node.Exited()) return std::unexpected(node.name + " is still running");
    node.earlier_logs += "----- earlier run -----\n" + node.process->Stderr();
    node.process.reset();
  }
  e2e::ProcessOptions options;
  options.args = {RoleName(node.role), "--config", node.config.string()};
  options.prefix = std::move(prefix);
  options.env = std::move(env);
  auto p = e2e::KleafProcess::Start(std::move(options));
  if (!p) return std::unexpected(node.name + ": " + p.error());
  node.process = std::move(*p);
  node.port = 0;
  return {};
}

std::expected<void, std::string> WaitReady(Node& node, SteadyClock::time_point deadline) {
  static const std::regex kListening(R"(kleaf gateway listening on https?://\S+:(\d+)\r?\n)");
  static const std::regex kRunning(R"(kleaf allocator running; https?://\S+:(\d+)\r?\n)");
  const std::regex& ready = node.role == Node::Role::kGateway ? kListening : kRunning;
  std::string error;
  bool done = WaitUntil(
      [&] {
        std::string out = node.process->Stdout();
        if (std::smatch m; std::regex_search(out, m, ready)) {
          node.port = static_cast<uint16_t>(std::stoi(m[1].str()));
          return true;
        }
        if (auto s = node.process->WaitExit(milliseconds(0)); !s.timed_out) {
          error = "exited (" + s.ToString() + ")";
          return true;
        }
        return false;
      },
      std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
  if (!done) error = "no ready line before the deadline";
  if (!error.empty()) {
    return std::unexpected(node.name + ": " + error + "; stdout:\n" + node.process->Stdout() +
                           "\nstderr:\n" + LastLines(node.process->Stderr(), 40));
  }
  return {};
}

std::expected<void, std::string> StartNode(Node& node, ProcessEnv env,
                                           std::vector<std::string> prefix, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  if (auto r = Spawn(node, std::move(env), std::move(prefix)); !r) return r;
  return WaitReady(node, deadline);
}

std::expected<Exit, std::string> StartExpectingExit(Node& node, milliseconds timeout,
                                                    ProcessEnv env,
                                                    std::vector<std::string> prefix) {
  const auto start = SteadyClock::now();
  if (auto r = Spawn(node, std::move(env), std::move(prefix)); !r) {
    return std::unexpected(r.error());
  }
  Exit exit;
  WaitUntil(
      [&] {
        exit.status = node.process->WaitExit(milliseconds(0));
        return !exit.status.timed_out;
      },
      timeout);
  exit.seconds = SecondsSince(start);
  exit.out = node.process->Stdout();
  exit.err = node.process->Stderr();
  exit.was_ready = exit.out.find("listening on") != std::string::npos ||
                   exit.out.find("kleaf allocator running") != std::string::npos;
  if (exit.status.timed_out) {
    node.process->KillAndWait();
    return std::unexpected(node.name + " still ran after " + std::to_string(timeout.count()) +
                           " ms (killed now)" + (exit.was_ready ? ", serving" : "") +
                           "; stdout:\n" + exit.out + "\nstderr:\n" + LastLines(exit.err, 40));
  }
  return exit;
}

e2e::ExitStatus Stop(Node& node, milliseconds timeout) {
  node.process->Terminate();
  return node.process->WaitExit(timeout);
}

// --- What an allocator serves --------------------------------------------------------------------

std::expected<std::map<int32_t, PartitionActivity>, std::string> AllocatorPartitions(
    const Node& allocator) {
  if (allocator.port == 0) return std::unexpected(allocator.name + " has no HTTP port");
  auto m = ScrapeMetrics(allocator.port);
  if (!m) return std::unexpected(allocator.name + ": " + m.error());
  static const std::regex kSeries(
      R"re(kleaf_allocator_partition_(serving|assignments_total|takeovers_total|releases_total)\{partition="(\d+)"\})re");
  std::map<int32_t, PartitionActivity> out;
  for (const auto& [key, value] : m->series) {
    std::smatch match;
    if (!std::regex_match(key, match, kSeries)) continue;
    PartitionActivity& a = out[std::stoi(match[2].str())];
    const std::string what = match[1].str();
    const auto count = static_cast<int64_t>(value);
    if (what == "serving") a.serving = value == 1;
    if (what == "assignments_total") a.assignments = count;
    if (what == "takeovers_total") a.takeovers = count;
    if (what == "releases_total") a.releases = count;
  }
  return out;
}

std::expected<std::set<int32_t>, std::string> ServedPartitions(const Node& allocator) {
  auto partitions = AllocatorPartitions(allocator);
  if (!partitions) return std::unexpected(partitions.error());
  std::set<int32_t> served;
  for (const auto& [p, a] : *partitions) {
    if (a.serving) served.insert(p);
  }
  return served;
}

std::vector<RestoreLine> Restores(std::string_view log) {
  static const std::regex kRestored(
      R"(\[allocator\] partition (\d+) restored \((\d+) records, offsets (-?\d+) to (-?\d+)\) in (\d+) ms)");
  std::vector<RestoreLine> out;
  std::string text(log);
  for (std::sregex_iterator it(text.begin(), text.end(), kRestored), end; it != end; ++it) {
    const auto& m = *it;
    out.push_back({std::stoi(m[1].str()), std::stoll(m[2].str()), std::stoll(m[3].str()),
                   std::stoll(m[4].str()), std::stoll(m[5].str())});
  }
  return out;
}

// --- Clusters ------------------------------------------------------------------------------------

Cluster::Cluster(const KafkaBroker& broker, const std::string& name,
                 std::map<std::string, std::string> overrides)
    : broker_(broker), overrides_(std::move(overrides)) {
  // Unique per run and per test: topics of earlier runs and other tests stay out of sight.
  auto nonce =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  prefix_ = "kleaf-it-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(nonce);
}

Cluster::~Cluster() {
  if (::testing::Test::HasFailure()) {
    std::cerr << "===== logs of cluster " << prefix_ << " =====\n" << Logs() << std::flush;
  }
  for (auto& n : nodes_) {
    if (n.process && n.process->running()) n.process->Kill();
  }
  for (auto& n : nodes_) {
    if (n.process && n.process->running()) n.process->WaitExit(std::chrono::seconds(10));
  }
}

e2e::TestConfig Cluster::Config(const std::string& node_id,
                                const std::filesystem::path& state) const {
  e2e::TestConfig c(state);
  c.Set("node.id", node_id)
      .Set("log.level", "info")
      .Set("kafka.bootstrap", "\"" + broker_.bootstrap + "\"")
      .Set("kafka.topic_prefix", prefix_)
      .Set("kafka.partitions", std::to_string(kPartitions))
      .Set("kafka.reply_partitions", std::to_string(kReplyPartitions))
      .Set("kafka.session_timeout_ms", "6000");
  // The consumer-protocol lane (label kafka-consumer-protocol) runs tests again with the
  // allocators' group under KIP-848.
  if (const char* protocol = std::getenv("KLEAF_TEST_GROUP_PROTOCOL"); protocol && *protocol) {
    c.Set("kafka.group_protocol", protocol);
  }
  if (broker_.replication_factor > 0) {
    c.Set("kafka.replication_factor", std::to_string(broker_.replication_factor));
  }
  for (const auto& [key, value] : overrides_) c.Set(key, value);
  return c;
}

std::filesystem::path Cluster::WriteConfig(const std::string& file,
                                           const e2e::TestConfig& config) const {
  return dir_.WriteFile(file, config.Yaml());
}

Node& Cluster::AddNode(const std::string& name, Node::Role role,
                       std::map<std::string, std::string> overrides) {
  Node& n = nodes_.emplace_back();
  n.name = name;
  n.role = role;
  n.state = dir() / (name + "-state");
  n.overrides = std::move(overrides);
  Reconfigure(n, {});
  return n;
}

Node& Cluster::AddAllocator(const std::string& name) {
  return AddNode(name, Node::Role::kAllocator);
}

Node& Cluster::AddGateway(const std::string& name, int32_t reply_partition) {
  return AddNode(name, Node::Role::kGateway,
                 {{"kafka.reply_partition", std::to_string(reply_partition)},
                  {"snowflake.worker_id", std::to_string(reply_partition + 1)}});
}

void Cluster::Reconfigure(Node& node, const std::map<std::string, std::string>& overrides) {
  for (const auto& [key, value] : overrides) node.overrides[key] = value;
  e2e::TestConfig c = Config(node.name, node.state);
  for (const auto& [key, value] : node.overrides) c.Set(key, value);
  node.config = WriteConfig(node.name + ".yaml", c);
}

std::expected<void, std::string> Cluster::Start(const std::vector<Node*>& nodes,
                                                std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (Node* n : nodes) {
    if (auto r = Spawn(*n); !r) return r;
  }
  for (Node* n : nodes) {
    if (auto r = WaitReady(*n, deadline); !r) return r;
  }
  return {};
}

std::expected<void, std::string> Cluster::WaitBalanced(const std::vector<Node*>& allocators,
                                                       std::chrono::milliseconds timeout) {
  std::string state;
  bool ok = WaitUntil(
      [&] {
        std::map<int32_t, int> owners;
        state.clear();
        bool each_serves = true;
        for (const Node* a : allocators) {
          auto served = ServedPartitions(*a);
          if (!served) {
            state += served.error() + " ";
            return false;
          }
          if (served->empty()) each_serves = false;
          state += a->name + " serves {";
          for (int32_t p : *served) {
            ++owners[p];
            state += " " + std::to_string(p);
          }
          state += " } ";
        }
        if (!each_serves) return false;
        for (int32_t p = 0; p < kPartitions; ++p) {
          if (owners[p] != 1) return false;
        }
        return true;
      },
      timeout);
  if (!ok) return std::unexpected("partitions not balanced in time: " + state);
  return {};
}

Node* Cluster::OwnerOf(int32_t p, const std::vector<Node*>& allocators) const {
  Node* owner = nullptr;
  for (Node* a : allocators) {
    auto served = ServedPartitions(*a);
    if (!served) return nullptr;
    if (!served->contains(p)) continue;
    if (owner != nullptr) return nullptr;
    owner = a;
  }
  return owner;
}

std::expected<Cluster::Nodes, std::string> Cluster::StartNodes(int allocators, int gateways) {
  Nodes nodes;
  for (int i = 0; i < allocators; ++i) {
    nodes.allocators.push_back(&AddAllocator("alloc-" + std::to_string(i + 1)));
  }
  for (int i = 0; i < gateways; ++i) {
    nodes.gateways.push_back(&AddGateway(std::string("gw-") + static_cast<char>('a' + i), i));
  }
  // One at a time: each joins a group whose members already serve their partitions.
  for (size_t i = 0; i < nodes.allocators.size(); ++i) {
    if (auto r = Start({nodes.allocators[i]}); !r) return std::unexpected(r.error());
    std::vector<Node*> running(nodes.allocators.begin(), nodes.allocators.begin() + i + 1);
    if (auto r = WaitBalanced(running, std::chrono::seconds(90)); !r)
      return std::unexpected(r.error());
  }
  if (auto r = Start(nodes.gateways); !r) return std::unexpected(r.error());
  if (!nodes.gateways.empty()) {
    if (auto r = CheckEveryPartitionAnswers(*nodes.gateways.front()); !r)
      return std::unexpected(r.error());
  }
  return nodes;
}

std::expected<void, std::string> Cluster::CheckEveryPartitionAnswers(const Node& gateway) {
  // The tag list is gathered from every partition's owner: it answers only if all of them serve.
  auto listed = ListTags(gateway.port);
  if (!listed) {
    return std::unexpected("not every partition is served (" + listed.error() +
                           "); allocator logs:\n" + Logs());
  }
  return {};
}

e2e::CommandResult Cluster::Run(std::vector<std::string> args,
                                std::chrono::milliseconds timeout) const {
  return e2e::RunKleaf(std::move(args), {}, timeout);
}

std::string Cluster::Logs() const {
  std::string out;
  for (const auto& n : nodes_) {
    out += "----- " + n.name + " (" + RoleName(n.role) + ") -----\n";
    if (!n.earlier_logs.empty()) out += LastLines(n.earlier_logs, 40) + "\n";
    out += LastLines(n.Log(), 80) + "\n";
  }
  return out;
}

void KafkaTest::SetUp() {
  auto broker = KafkaBroker::FromEnvironment();
  if (!broker) GTEST_SKIP() << kNoBrokerMessage;
  broker_ = *broker;
}

void Kafka3Test::SetUp() {
  auto kafka = KafkaCluster3::FromEnvironment();
  if (!kafka) GTEST_SKIP() << kNoCluster3Message;
  kafka_ = *kafka;
  broker_ = kafka_.AsBroker();
}

uint64_t SeqKeyOnPartition(const std::string& space, int32_t p) {
  for (uint64_t key = 0;; ++key) {
    if (kafka::PartitionFor(allocator::SectionRouteKey(space, key), Cluster::kPartitions) == p) {
      return key;
    }
  }
}

std::expected<uint64_t, std::string> SeqNext(uint16_t port, const std::string& space,
                                             uint64_t key) {
  e2e::HttpClient http(port, std::chrono::seconds(10));
  auto reply = http.Get("/api/v1/seq/" + space + "/" + std::to_string(key));
  if (!reply) return std::unexpected(reply.error());
  if (reply->status != 200) {
    return std::unexpected(std::to_string(reply->status) + " " + reply->body);
  }
  return std::stoull(nlohmann::json::parse(reply->body).at("seq").get<std::string>());
}

void StartWithSeqSpace(Cluster& cluster, Node& allocator, Node& gateway, const std::string& space,
                       int64_t step) {
  ASSERT_TRUE(cluster.Start({&allocator}));
  ASSERT_TRUE(cluster.Start({&gateway}));
  auto put = AdminCall(gateway.port, "PUT", "/api/v1/spaces/" + space,
                       nlohmann::json{{"section_size", 1}, {"step", step}}.dump());
  ASSERT_TRUE(put) << put.error();
}

}  // namespace kleaf::integration
