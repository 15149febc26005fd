#include "tests/integration/operator/operator_env.h"

#include <iostream>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration::mistakes {

using std::chrono::milliseconds;

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
