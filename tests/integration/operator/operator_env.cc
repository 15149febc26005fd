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

// --- Client load ---------------------------------------------------------------------------------

IdLoad::IdLoad(Options options) : options_(std::move(options)) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { Client(i); });
}

void IdLoad::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  stop_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool IdLoad::WaitForReplies(int64_t replies, milliseconds timeout) const {
  return WaitUntil([&] { return ok() >= replies; }, timeout);
}

std::vector<int64_t> IdLoad::Ids() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [tag, ids] : ids_) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::vector<int64_t> IdLoad::Ids(const std::string& tag) const {
  std::lock_guard lock(mu_);
  auto it = ids_.find(tag);
  return it == ids_.end() ? std::vector<int64_t>() : it->second;
}

std::string IdLoad::Summary() const {
  std::string s = options_.name + ": " + std::to_string(ok()) + " replies, " +
                  std::to_string(Ids().size()) + " IDs, " + std::to_string(unavailable()) +
                  " 503s, " + std::to_string(errors()) + " errors";
  std::lock_guard lock(mu_);
  if (!first_error_.empty()) s += " (first error: " + first_error_ + ")";
  if (!last_unavailable_.empty()) s += " (last 503: " + last_unavailable_ + ")";
  return s;
}

void IdLoad::Client(int index) {
  e2e::HttpClient client(options_.port, std::chrono::seconds(10));
  const bool plain = options_.count == 1;
  const char* route = options_.mode == Mode::kSnowflake ? "snowflake" : "segment";
  for (int64_t i = 0; i < options_.max_requests && !stop_.load(); ++i) {
    if (i > 0 && options_.pause.count() > 0) {
      std::unique_lock lock(mu_);
      if (stop_cv_.wait_for(lock, options_.pause, [this] { return stop_.load(); })) break;
    }
    const std::string& tag = options_.tags[(static_cast<size_t>(i) + index) % options_.tags.size()];
    const std::string target =
        plain ? std::string("/api/") + route + "/get/" + tag
              : std::string("/api/v1/") + route + "/" + tag + "?count=" +
                    std::to_string(options_.count);
    auto reply = client.Get(target);
    if (reply && reply->status == 503) {
      unavailable_.fetch_add(1);
      std::lock_guard lock(mu_);
      last_unavailable_ = reply->body;
      continue;
    }
    auto ids = reply ? e2e::IdsOf(*reply, plain, tag)
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
    auto& kept = ids_[tag];
    kept.insert(kept.end(), ids->begin(), ids->end());
  }
}

int64_t ReportSegmentDuplicates(const std::string& scenario, const std::vector<const IdLoad*>& loads,
                                const std::vector<std::string>& tags) {
  int64_t total = 0, dups = 0;
  for (const auto& tag : tags) {
    std::vector<int64_t> ids;
    for (const IdLoad* l : loads) {
      auto some = l->Ids(tag);
      ids.insert(ids.end(), some.begin(), some.end());
    }
    total += static_cast<int64_t>(ids.size());
    Duplicates d = FindDuplicates(ids);
    dups += d.count;
    if (d.count > 0) {
      std::cout << "[ operator ] " << scenario << ": tag " << tag << ": " << d.count
                << " IDs served twice, e.g. " << d.examples.front() << "\n";
    }
  }
  std::cout << "[ operator ] " << scenario << ": checked " << total << " IDs, " << dups
            << " duplicates" << std::endl;
  return dups;
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
  auto r = RunScript(argv, std::chrono::seconds(90));
  // Without a log4j config the JVM warns about it: not the tool's answer.
  std::string kept;
  for (const auto& line : LinesWith(r.output, "")) {
    if (!line.starts_with("log4j:")) kept += line + "\n";
  }
  r.output = kept;
  return r;
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
