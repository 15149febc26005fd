#include "tests/integration/workers/worker_env.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "tests/e2e/http_client.h"

namespace kleaf::integration::workers {

std::map<std::string, std::string> Layout::Keys() const {
  return {{"snowflake.timestamp_bits", std::to_string(timestamp_bits)},
          {"snowflake.worker_bits", std::to_string(worker_bits)},
          {"snowflake.sequence_bits", std::to_string(sequence_bits)},
          {"snowflake.epoch_ms", std::to_string(epoch_ms)}};
}

IdParts Split(const Layout& layout, int64_t id) {
  const int64_t worker_mask = (int64_t{1} << layout.worker_bits) - 1;
  const int64_t sequence_mask = (int64_t{1} << layout.sequence_bits) - 1;
  return {(id >> (layout.worker_bits + layout.sequence_bits)) + layout.epoch_ms,
          (id >> layout.sequence_bits) & worker_mask, id & sequence_mask};
}

bool WaitUntil(const std::function<bool()>& done, milliseconds timeout) {
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

std::optional<int64_t> ParseUtcMs(std::string_view text) {
  static const std::regex kIso(R"((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z)");
  std::string s(text);
  std::smatch m;
  if (!std::regex_match(s, m, kIso)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1].str()) - 1900;
  tm.tm_mon = std::stoi(m[2].str()) - 1;
  tm.tm_mday = std::stoi(m[3].str());
  tm.tm_hour = std::stoi(m[4].str());
  tm.tm_min = std::stoi(m[5].str());
  tm.tm_sec = std::stoi(m[6].str());
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + std::stoi(m[7].str());
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
  size_t pos = text.size();
  for (int i = 0; i <= lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return "[...]\n" + text.substr(pos + 1);
}

std::expected<WorkersView, std::string> GetWorkers(uint16_t port) {
  e2e::HttpClient client(port, seconds(20));
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

std::expected<std::vector<int64_t>, std::string> GetSnowflakes(uint16_t port,
                                                               const std::string& tag, int count) {
  e2e::HttpClient client(port, seconds(20));
  const bool plain = count == 1;
  auto reply = client.Get(plain ? "/api/snowflake/get/" + tag
                                : "/api/v1/snowflake/" + tag + "?count=" + std::to_string(count));
  if (!reply) return std::unexpected(reply.error());
  return e2e::IdsOf(*reply, plain, tag);
}

std::vector<Claim> Claims(std::string_view log) {
  static const std::regex kClaimed(R"(\[lease\] claimed worker id (\d+) \(not before ([^)]*)\))");
  std::vector<Claim> out;
  std::string text(log);
  for (std::sregex_iterator it(text.begin(), text.end(), kClaimed), end; it != end; ++it) {
    Claim c;
    c.worker_id = std::stoll((*it)[1].str());
    c.not_before_ms = ParseUtcMs((*it)[2].str()).value_or(-1);
    out.push_back(c);
  }
  return out;
}

std::optional<Claim> Node::CurrentClaim() const {
  auto claims = Claims(Log());
  if (claims.empty()) return std::nullopt;
  return claims.back();
}

// --- Cluster -------------------------------------------------------------------------------------

std::optional<std::string> RegistryCluster::BrokerBootstrap() {
  const char* v = std::getenv("KLEAF_TEST_KAFKA_BOOTSTRAP");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

RegistryCluster::RegistryCluster(std::string bootstrap, const std::string& name,
                                 std::map<std::string, std::string> overrides)
    : bootstrap_(std::move(bootstrap)), overrides_(std::move(overrides)) {
  // Unique per run and per test: topics (and registry records) of other tests stay out of sight.
  auto nonce = std::chrono::duration_cast<milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  prefix_ = "kleaf-wrk-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(nonce);
}

RegistryCluster::~RegistryCluster() {
  if (::testing::Test::HasFailure()) {
    std::cerr << "===== logs of registry cluster " << prefix_ << " =====\n" << Logs() << std::flush;
  }
  for (auto& n : nodes_) {
    if (n.process && n.process->running()) n.process->Kill();
  }
  for (auto& n : nodes_) {
    if (n.process && n.process->running()) n.process->WaitExit(seconds(10));
  }
}

e2e::TestConfig RegistryCluster::Config(const std::string& node_id,
                                        const std::filesystem::path& state) const {
  e2e::TestConfig c(state);
  c.Set("node.id", node_id)
      .Set("log.level", "info")
      .Set("kafka.bootstrap", "\"" + bootstrap_ + "\"")
      .Set("kafka.topic_prefix", prefix_)
      .Set("kafka.partitions", std::to_string(kPartitions))
      .Set("kafka.reply_partitions", std::to_string(kReplyPartitions))
      .Set("kafka.session_timeout_ms", "6000")
      .Set("workers.lease_ttl_ms", std::to_string(kLeaseTtlMs))
      .Set("workers.renew_interval_ms", std::to_string(kRenewIntervalMs))
      .Set("workers.safety_margin_ms", std::to_string(kSafetyMarginMs))
      .Set("workers.max_clock_skew_ms", std::to_string(kMaxClockSkewMs))
      .Set("workers.claim_timeout_ms", "20000");
  for (const auto& [key, value] : overrides_) c.Set(key, value);
  return c;
}

std::expected<void, std::string> RegistryCluster::StartAllocator(milliseconds timeout) {
  if (allocator_ == nullptr) {
    Node& n = nodes_.emplace_back();
    n.name = "alloc";
    n.gateway = false;
    n.state = dir() / "alloc-state";
    n.config = dir_.WriteFile("alloc.yaml", Config(n.name, n.state).Yaml());
    allocator_ = &n;
  }
  if (auto r = Spawn(*allocator_, {}, {}); !r) return r;
  // Ready once it serves every partition (the `__workers__` key is on one of them).
  static const std::regex kServing(R"(\[allocator\] partition (\d+) restored .*; serving)");
  std::string error;
  bool ready = WaitUntil(
      [&] {
        std::string log = allocator_->Log();
        std::set<int> served;
        for (std::sregex_iterator it(log.begin(), log.end(), kServing), end; it != end; ++it) {
          served.insert(std::stoi((*it)[1].str()));
        }
        if (static_cast<int>(served.size()) == kPartitions) return true;
        if (auto s = allocator_->process->WaitExit(milliseconds(0)); !s.timed_out) {
          error = "allocator exited (" + s.ToString() + ")";
          return true;
        }
        return false;
      },
      timeout);
  if (!ready) {
    error = "allocator did not serve all " + std::to_string(kPartitions) + " partitions in time";
  }
  if (!error.empty()) {
    return std::unexpected(error + "; stderr:\n" + LastLines(allocator_->Log(), 40));
  }
  return {};
}

Node& RegistryCluster::AddGateway(const std::string& name,
                                  std::map<std::string, std::string> overrides) {
  Node& n = nodes_.emplace_back();
  n.name = name;
  n.gateway = true;
  n.state = dir() / (name + "-state");
  // Gateways share the reply partitions round robin (replies carry the gateway's correlation ids).
  overrides.try_emplace("kafka.reply_partition", std::to_string(gateways_++ % kReplyPartitions));
  node_overrides_[&n] = std::move(overrides);
  Reconfigure(n, {});
  return n;
}

void RegistryCluster::Reconfigure(Node& node, std::map<std::string, std::string> overrides) {
  auto& mine = node_overrides_[&node];
  for (auto& [key, value] : overrides) mine[key] = value;
  e2e::TestConfig c = Config(node.name, node.state);
  for (const auto& [key, value] : mine) c.Set(key, value);
  node.config = dir_.WriteFile(node.name + ".yaml", c.Yaml());
}

std::expected<void, std::string> RegistryCluster::Spawn(Node& node, std::vector<std::string> prefix,
                                                        Env env) {
  if (node.process) {
    if (node.process->running() && node.process->WaitExit(milliseconds(0)).timed_out) {
      return std::unexpected(node.name + " is still running");
    }
    node.earlier_logs += "----- earlier run -----\n" + node.process->Stderr();
    node.process.reset();
  }
  e2e::ProcessOptions options;
  options.args = {node.gateway ? "gateway" : "allocator", "--config", node.config.string()};
  options.prefix = std::move(prefix);
  options.env = std::move(env);
  auto p = e2e::KleafProcess::Start(std::move(options));
  if (!p) return std::unexpected(node.name + ": " + p.error());
  node.process = std::move(*p);
  node.port = 0;
  return {};
}

std::expected<void, std::string> RegistryCluster::StartGateway(Node& node,
                                                               std::vector<std::string> prefix,
                                                               Env env, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  if (auto r = Spawn(node, std::move(prefix), std::move(env)); !r) return r;
  return WaitListening(node, deadline);
}

std::expected<void, std::string> RegistryCluster::StartGateways(const std::vector<Node*>& nodes,
                                                                milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (Node* n : nodes) {
    if (auto r = Spawn(*n, {}, {}); !r) return r;
  }
  for (Node* n : nodes) {
    if (auto r = WaitListening(*n, deadline); !r) return r;
  }
  return {};
}

std::expected<void, std::string> RegistryCluster::WaitListening(Node& node,
                                                                SteadyClock::time_point deadline) {
  static const std::regex kListening(R"(kleaf gateway listening on http://\S+:(\d+)\r?\n)");
  std::string error;
  bool ready = WaitUntil(
      [&] {
        std::string out = node.process->Stdout();
        if (std::smatch m; std::regex_search(out, m, kListening)) {
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
  if (!ready) error = "no 'listening on' line before the deadline";
  if (!error.empty()) {
    return std::unexpected(node.name + ": " + error + "; stdout:\n" + node.process->Stdout() +
                           "\nstderr:\n" + LastLines(node.process->Stderr(), 40));
  }
  return {};
}

std::expected<Refusal, std::string> RegistryCluster::StartExpectingExit(
    Node& node, std::vector<std::string> prefix, Env env, milliseconds timeout) {
  const auto start = SteadyClock::now();
  if (auto r = Spawn(node, std::move(prefix), std::move(env)); !r) {
    return std::unexpected(r.error());
  }
  Refusal refusal;
  bool serving = false;
  WaitUntil(
      [&] {
        refusal.status = node.process->WaitExit(milliseconds(0));
        serving = node.process->Stdout().find("listening on") != std::string::npos;
        return !refusal.status.timed_out || serving;
      },
      timeout);
  refusal.seconds = SecondsSince(start);
  refusal.out = node.process->Stdout();
  refusal.err = node.process->Stderr();
  if (serving) {
    return std::unexpected(node.name + " started serving instead of exiting; stdout:\n" +
                           refusal.out + "\nstderr:\n" + LastLines(refusal.err, 40));
  }
  if (refusal.status.timed_out) {
    return std::unexpected(node.name + " still runs after " + std::to_string(timeout.count()) +
                           " ms; stdout:\n" + refusal.out + "\nstderr:\n" +
                           LastLines(refusal.err, 40));
  }
  return refusal;
}

e2e::ExitStatus RegistryCluster::Stop(Node& node, milliseconds timeout) {
  node.process->Terminate();
  return node.process->WaitExit(timeout);
}

std::expected<int64_t, std::string> RegistryCluster::DecodeWorkerId(const Node& node,
                                                                    int64_t id) const {
  auto r = e2e::RunKleaf({"decode", std::to_string(id), "--config", node.config.string()});
  if (!r.status.exited || r.status.code != 0) {
    return std::unexpected("kleaf decode " + std::to_string(id) + ": " + r.status.ToString() +
                           ": " + r.err);
  }
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object() || !j.contains("worker_id")) {
    return std::unexpected("kleaf decode printed no worker_id: " + r.out);
  }
  return j["worker_id"].get<int64_t>();
}

std::string RegistryCluster::Logs() const {
  std::string out;
  for (const auto& n : nodes_) {
    out += "----- " + n.name + (n.gateway ? " (gateway)" : " (allocator)") + " -----\n";
    if (!n.earlier_logs.empty()) out += LastLines(n.earlier_logs, 30) + "\n";
    out += LastLines(n.Log(), 60) + "\n";
  }
  return out;
}

void WorkerRegistryTest::SetUp() {
  auto bootstrap = RegistryCluster::BrokerBootstrap();
  if (!bootstrap) GTEST_SKIP() << kNoBrokerMessage;
  bootstrap_ = *bootstrap;
}

std::optional<std::string> FindDuplicate(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup == ids.end()) return std::nullopt;
  return "ID " + std::to_string(*dup) + " issued twice (of " + std::to_string(ids.size()) + ")";
}

std::optional<std::string> FindNonIncreasing(const std::vector<int64_t>& ids) {
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      return "ID #" + std::to_string(i) + " (" + std::to_string(ids[i]) + ") is not above #" +
             std::to_string(i - 1) + " (" + std::to_string(ids[i - 1]) + ")";
    }
  }
  return std::nullopt;
}

}  // namespace kleaf::integration::workers
