#include "tests/integration/operator/operator_env.h"

#include <iostream>
#include <regex>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration::mistakes {
namespace {

using std::chrono::milliseconds;

std::string Tail(const std::string& text, size_t chars = 4000) {
  return text.size() <= chars ? text : "[...]" + text.substr(text.size() - chars);
}

std::string RoleName(const Node& node) {
  return node.role == Node::Role::kAllocator ? "allocator" : "gateway";
}

}  // namespace

std::map<std::string, std::string> ShortLeases(int64_t ttl_ms) {
  return {{"workers.lease_ttl_ms", std::to_string(ttl_ms)},
          {"workers.renew_interval_ms", std::to_string(kRenewIntervalMs)},
          {"workers.safety_margin_ms", std::to_string(kSafetyMarginMs)},
          {"workers.max_clock_skew_ms", std::to_string(kMaxClockSkewMs)},
          {"workers.claim_timeout_ms", "20000"}};
}

std::expected<void, std::string> Spawn(Node& node, ProcessEnv env,
                                       std::vector<std::string> prefix) {
  if (node.process) {
    if (node.process->running() && node.process->WaitExit(milliseconds(0)).timed_out) {
      return std::unexpected(node.name + " is still running");
    }
    node.earlier_logs += "----- earlier run -----\n" + node.process->Stderr();
    node.process.reset();
  }
  e2e::ProcessOptions options;
  options.args = {RoleName(node), "--config", node.config.string()};
  options.prefix = std::move(prefix);
  options.env = std::move(env);
  auto p = e2e::KleafProcess::Start(std::move(options));
  if (!p) return std::unexpected(node.name + ": " + p.error());
  node.process = std::move(*p);
  node.port = 0;
  return {};
}

std::expected<void, std::string> WaitReady(Node& node, milliseconds timeout) {
  static const std::regex kListening(R"(kleaf gateway listening on http://\S+:(\d+)\r?\n)");
  static const std::regex kRunning(R"(kleaf allocator running; http://\S+:(\d+)\r?\n)");
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
      timeout);
  if (!done) error = "no ready line before the deadline";
  if (!error.empty()) {
    return std::unexpected(node.name + ": " + error + "; stdout:\n" + node.process->Stdout() +
                           "\nstderr:\n" + Tail(node.process->Stderr()));
  }
  return {};
}

std::expected<void, std::string> StartNode(Node& node, ProcessEnv env,
                                           std::vector<std::string> prefix,
                                           milliseconds timeout) {
  if (auto r = Spawn(node, std::move(env), std::move(prefix)); !r) return r;
  return WaitReady(node, timeout);
}

std::expected<Exit, std::string> StartExpectingExit(Node& node, milliseconds timeout,
                                                    ProcessEnv env) {
  const auto start = SteadyClock::now();
  if (auto r = Spawn(node, std::move(env)); !r) return std::unexpected(r.error());
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
    return std::unexpected(node.name + " still ran after " +
                           std::to_string(timeout.count()) + " ms (killed now); stdout:\n" +
                           exit.out + "\nstderr:\n" + Tail(exit.err));
  }
  return exit;
}

std::vector<int64_t> ClaimedWorkerIds(const std::string& log) {
  static const std::regex kClaimed(R"(\[lease\] claimed worker id (\d+))");
  std::vector<int64_t> out;
  for (std::sregex_iterator it(log.begin(), log.end(), kClaimed), end; it != end; ++it) {
    out.push_back(std::stoll((*it)[1].str()));
  }
  return out;
}

// --- Snowflake load ------------------------------------------------------------------------------

SnowflakeLoad::SnowflakeLoad(Options options) : options_(std::move(options)) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { Client(i); });
}

void SnowflakeLoad::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  stop_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<int64_t> SnowflakeLoad::Ids() const {
  std::lock_guard lock(mu_);
  return ids_;
}

std::string SnowflakeLoad::Summary() const {
  std::string s = options_.name + ": " + std::to_string(ok()) + " replies, " +
                  std::to_string(Ids().size()) + " IDs, " + std::to_string(unavailable()) +
                  " 503s, " + std::to_string(errors()) + " errors";
  std::lock_guard lock(mu_);
  if (!first_error_.empty()) s += " (first error: " + first_error_ + ")";
  return s;
}

void SnowflakeLoad::Client(int /*index*/) {
  e2e::HttpClient client(options_.port, std::chrono::seconds(10));
  const bool plain = options_.count == 1;
  const std::string target =
      plain ? "/api/snowflake/get/" + options_.tag
            : "/api/v1/snowflake/" + options_.tag + "?count=" + std::to_string(options_.count);
  for (int64_t i = 0; i < options_.max_requests && !stop_.load(); ++i) {
    if (i > 0 && options_.pause.count() > 0) {
      std::unique_lock lock(mu_);
      if (stop_cv_.wait_for(lock, options_.pause, [this] { return stop_.load(); })) break;
    }
    auto reply = client.Get(target);
    if (reply && reply->status == 503) {
      unavailable_.fetch_add(1);
      continue;
    }
    auto ids = reply ? e2e::IdsOf(*reply, plain, options_.tag)
                     : std::expected<std::vector<int64_t>, std::string>(
                           std::unexpected(reply.error()));
    if (!ids) {
      errors_.fetch_add(1);
      std::lock_guard lock(mu_);
      if (first_error_.empty()) first_error_ = ids.error();
      continue;
    }
    ok_.fetch_add(1);
    std::lock_guard lock(mu_);
    ids_.insert(ids_.end(), ids->begin(), ids->end());
  }
}

// --- The broker ----------------------------------------------------------------------------------

ScriptResult TopicAdmin(const KafkaBroker& broker, const std::vector<std::string>& args) {
  auto libs = RunScript({broker.script, "libs"}, std::chrono::seconds(120));
  if (libs.exit_code != 0) return libs;
  std::string dir = libs.output;
  // The script prints the folder last, on its own line.
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  if (auto nl = dir.rfind('\n'); nl != std::string::npos) dir = dir.substr(nl + 1);
  std::vector<std::string> argv = {"java", "-cp", dir + "/*", KLEAF_TOPIC_ADMIN, broker.bootstrap};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunScript(argv, std::chrono::seconds(90));
}

int64_t ReportDuplicates(const std::string& scenario, const std::vector<int64_t>& ids) {
  Duplicates d = FindDuplicates(ids);
  std::cout << "[ operator ] " << scenario << ": checked " << ids.size() << " IDs, " << d.count
            << " duplicates";
  if (!d.examples.empty()) {
    std::cout << " (e.g.";
    for (int64_t id : d.examples) std::cout << " " << id;
    std::cout << ")";
  }
  std::cout << std::endl;
  return d.count;
}

}  // namespace kleaf::integration::mistakes
