// Issue 16: consumers in different languages share one group by docs/ids-topic.md alone. The real
// allocator and `kleaf producer` fill one stream while C++ (examples/batch_consumer_example),
// Python (examples/python/kleaf_batch_consumer.py) and Java (examples/java) consumers take it
// concurrently in ONE group; one member of each language is killed with SIGKILL and restarted
// mid-run. Every ID printed by any of them is
// unique, checked over all of them, and each member got batches of the tag.
// Issue 17: the C++ example and the Python consumer take uuid7 and ulid streams too.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <expected>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kTag[] = "mixed";
constexpr int64_t kBatchSize = 50;

// The IDs of the complete lines of `out` (a last line cut by a kill is left out).
std::vector<int64_t> PrintedIds(const std::string& out) {
  std::vector<int64_t> ids;
  size_t pos = 0;
  for (size_t nl = out.find('\n'); nl != std::string::npos;
       pos = nl + 1, nl = out.find('\n', pos)) {
    int64_t v = -1;
    auto [end, ec] = std::from_chars(out.data() + pos, out.data() + nl, v);
    if (ec == std::errc() && end == out.data() + nl) ids.push_back(v);
  }
  return ids;
}

enum class Lang { kCpp, kPython, kJava };

// The command line, up to its arguments, of the reference consumer in `lang` (examples/).
std::string Program(Lang lang) {
  switch (lang) {
    case Lang::kCpp:
      return std::string(KLEAF_EXAMPLES_DIR) + "/batch_consumer_example";
    case Lang::kPython:
      return std::string(KLEAF_PYTHON) + " -u " + KLEAF_PYTHON_CONSUMER;
    case Lang::kJava:
      return std::string("java -cp '") + KLEAF_JAVA_CONSUMER_JAR + ":" + KLEAF_JAVA_CONSUMER_LIB +
             "/*' dev.kleaf.examples.KleafBatchConsumer";
  }
  return {};
}

// One consumer process of the group, C++, Python or Java; each run (a restart is a new run) is
// kept so that what a killed run printed is checked too.
class Member {
 public:
  using Kind = Lang;
  Member(std::string name, Kind kind, std::string bootstrap, std::string ids_topic,
         std::string group)
      : name_(std::move(name)),
        kind_(kind),
        bootstrap_(std::move(bootstrap)),
        ids_topic_(std::move(ids_topic)),
        group_(std::move(group)) {}

  std::expected<void, std::string> Start() {
    // COUNT 0 with a long idle timeout: it runs until stopped. 6 s sessions (the defaults of
    // both) so that a killed member's partitions move soon.
    const std::string args = " " + bootstrap_ + " " + ids_topic_ + " " + group_ + " " + kTag +
                             " segment 0 120000 session.timeout.ms=6000 heartbeat.interval.ms=500";
    e2e::ProcessOptions options;
    // `sh -c CMD` takes the kleaf binary KleafProcess appends as its $0 and ignores it.
    options.prefix = {"/bin/sh", "-c", "exec " + Program(kind_) + args};
    auto p = e2e::KleafProcess::Start(std::move(options));
    if (!p) return std::unexpected(p.error());
    runs_.push_back(std::move(*p));
    return {};
  }
  e2e::KleafProcess& current() { return *runs_.back(); }
  // IDs printed by the current run.
  size_t CurrentIds() const { return PrintedIds(runs_.back()->Stdout()).size(); }
  // IDs printed by every run.
  std::vector<int64_t> AllIds() const {
    std::vector<int64_t> all;
    for (const auto& r : runs_) {
      auto ids = PrintedIds(r->Stdout());
      all.insert(all.end(), ids.begin(), ids.end());
    }
    return all;
  }
  std::string Logs() const {
    std::string out;
    for (size_t i = 0; i < runs_.size(); ++i) {
      out += "----- " + name_ + " run " + std::to_string(i + 1) + " stderr -----\n" +
             runs_[i]->Stderr();
    }
    return out;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Kind kind_;
  std::string bootstrap_, ids_topic_, group_;
  std::vector<std::unique_ptr<e2e::KleafProcess>> runs_;
};

// Starts `kleaf producer` on `cluster` with `streams` (the YAML of producer.streams), keeping
// `batches_ahead` batches on each partition and topping up every 100 ms, and waits until it runs.
std::expected<std::unique_ptr<e2e::KleafProcess>, std::string> StartProducer(
    Cluster& cluster, const std::string& streams, int batches_ahead) {
  auto config = cluster.Config("prod-1", cluster.dir() / "prod-1-state");
  config.Set("producer.batches_ahead", std::to_string(batches_ahead))
      .Set("producer.check_interval_ms", "100")
      .Set("producer.streams", streams);
  auto producer = e2e::KleafProcess::Start(
      {{"producer", "--config", cluster.WriteConfig("prod-1.yaml", config).string()}, {}, {}});
  if (!producer) return std::unexpected(producer.error());
  if (!WaitUntil(
          [&] { return (*producer)->Stdout().find("kleaf producer running") != std::string::npos; },
          seconds(60))) {
    return std::unexpected("the producer did not start within 60 s: " + (*producer)->Stderr());
  }
  return producer;
}

class MixedConsumersTest : public KafkaTest {};

TEST_F(MixedConsumersTest, CppPythonAndJavaInOneGroupWithKillsNeverPrintAnIdTwice) {
  ASSERT_TRUE(std::filesystem::exists(KLEAF_PYTHON))
      << KLEAF_PYTHON << " is missing: run scripts/install-deps.sh --test";
  ASSERT_TRUE(std::filesystem::exists(KLEAF_JAVA_CONSUMER_JAR))
      << KLEAF_JAVA_CONSUMER_JAR << " is missing: the build makes it with mvn (examples/java)";
  const auto began = SteadyClock::now();
  Cluster cluster(broker_, "mixed-consumers", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();

  // The producer: one segment stream, 4 batches of 50 ahead on each of its topic's partitions.
  auto producer = StartProducer(
      cluster, "[{tag: mixed, mode: segment, batch_size: " + std::to_string(kBatchSize) + "}]", 4);
  ASSERT_TRUE(producer.has_value()) << producer.error();

  // Four members for the four partitions of the stream's topic: every language, C++ twice.
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string group = ids_topic + ".consumers";  // the group the producer tops up for
  std::vector<std::unique_ptr<Member>> members;
  for (auto [name, kind] :
       {std::pair{"cpp-1", Member::Kind::kCpp}, std::pair{"py-1", Member::Kind::kPython},
        std::pair{"java-1", Member::Kind::kJava}, std::pair{"cpp-2", Member::Kind::kCpp}}) {
    members.push_back(std::make_unique<Member>(name, kind, broker_.bootstrap, ids_topic, group));
    ASSERT_TRUE(members.back()->Start().has_value());
  }
  auto dump_logs = [&] {
    std::string out = "----- producer -----\n" + (*producer)->Stderr();
    for (const auto& m : members) out += m->Logs();
    return out;
  };
  // Every member's current run printed at least `n` batches' worth of IDs more than `from`.
  auto every_current_run_printed = [&](size_t n, const std::vector<size_t>& from,
                                       milliseconds timeout) {
    return WaitUntil(
        [&] {
          for (size_t i = 0; i < members.size(); ++i) {
            if (members[i]->CurrentIds() < from[i] + n * kBatchSize) return false;
          }
          return true;
        },
        timeout);
  };
  ASSERT_TRUE(every_current_run_printed(2, {0, 0, 0, 0}, seconds(40))) << dump_logs();

  // Kill one member of each language with SIGKILL while all consume, then restart them: after
  // the rebalance (the killed members' sessions expire after 6 s) every member, the restarted
  // ones included, gets batches again.
  const std::vector<int> killed{1, 2, 3};
  for (int who : killed) {
    members[who]->current().KillAndWait();
    std::cerr << "[mixed] killed " << members[who]->name() << " after "
              << members[who]->CurrentIds() << " IDs\n";
  }
  for (int who : killed) ASSERT_TRUE(members[who]->Start().has_value());
  // The survivor's count goes on from where it was; the restarted runs count from 0.
  std::vector<size_t> from;
  for (const auto& m : members) from.push_back(m->CurrentIds());
  for (int who : killed) from[who] = 0;
  ASSERT_TRUE(every_current_run_printed(2, from, seconds(40))) << dump_logs();

  for (const auto& m : members) m->current().Terminate();
  for (const auto& m : members) {
    auto status = m->current().WaitExit(seconds(20));
    EXPECT_TRUE(status.exited && status.code == 0) << m->name() << ": " << status.ToString();
  }
  (*producer)->Terminate();
  EXPECT_TRUE((*producer)->WaitExit(seconds(20)).exited);

  // No ID twice over every run of every member.
  std::map<int64_t, std::string> by_id;
  size_t twice = 0;
  for (const auto& m : members) {
    const auto ids = m->AllIds();
    std::cerr << "[mixed] " << m->name() << " printed " << ids.size() << " IDs\n";
    for (int64_t id : ids) {
      auto [it, fresh] = by_id.emplace(id, m->name());
      if (!fresh && ++twice <= 10) {
        ADD_FAILURE() << "ID " << id << " printed by " << it->second << " and " << m->name();
      }
    }
  }
  EXPECT_EQ(twice, 0u);
  EXPECT_GE(by_id.size(), 4u * 4u * kBatchSize);
  std::cerr << "[mixed] " << by_id.size() << " distinct IDs in " << SecondsSince(began) << " s\n";
  if (HasFailure()) std::cerr << dump_logs();
}

// The lines of `out` (the last one only if complete).
std::vector<std::string> PrintedLines(const std::string& out) {
  std::vector<std::string> lines;
  size_t pos = 0;
  for (size_t nl = out.find('\n'); nl != std::string::npos;
       pos = nl + 1, nl = out.find('\n', pos)) {
    lines.push_back(out.substr(pos, nl - pos));
  }
  return lines;
}

// Issue 17: the C++ example (BatchConsumer::NextText) and the Python and Java reference consumers
// take the uuid7 and ulid streams of the producer, one member of each per stream in one group; what
// they print is unique per stream and read right by Python's `uuid` module and a Crockford decoder
// (tests/e2e/check_uuid7_ulid.py: version 7, RFC 9562 variant, timestamps of this run, the
// producer's worker id).
TEST_F(MixedConsumersTest, CppPythonAndJavaExamplesTakeUuid7AndUlidStreams) {
  ASSERT_TRUE(std::filesystem::exists(KLEAF_PYTHON))
      << KLEAF_PYTHON << " is missing: run scripts/install-deps.sh --test";
  ASSERT_TRUE(std::filesystem::exists(KLEAF_JAVA_CONSUMER_JAR))
      << KLEAF_JAVA_CONSUMER_JAR << " is missing: the build makes it with mvn (examples/java)";
  const int64_t from_ms = e2e::WallClockMs();
  Cluster cluster(broker_, "id128-consumers", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  auto producer = StartProducer(
      cluster, "[{tag: ev, mode: uuid7, batch_size: 50}, {tag: ev, mode: ulid, batch_size: 50}]",
      2);
  ASSERT_TRUE(producer.has_value()) << producer.error();
  std::smatch worker;
  const std::string producer_log = (*producer)->Stderr();
  ASSERT_TRUE(std::regex_search(producer_log, worker, std::regex(R"(worker id (\d+)\))")))
      << producer_log;

  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string group = ids_topic + ".consumers";
  constexpr int kCount = 150;  // three batches each
  struct Run {
    std::string name, mode;
    std::unique_ptr<e2e::KleafProcess> process;
  };
  std::vector<Run> runs;
  for (std::string mode : {"uuid7", "ulid"}) {
    for (auto [name, lang] : {std::pair{"cpp", Lang::kCpp}, std::pair{"py", Lang::kPython},
                              std::pair{"java", Lang::kJava}}) {
      e2e::ProcessOptions options;
      options.prefix = {"/bin/sh", "-c",
                        "exec " + Program(lang) + " " + broker_.bootstrap + " " + ids_topic + " " +
                            group + " ev " + mode + " " + std::to_string(kCount) + " 60000"};
      auto p = e2e::KleafProcess::Start(std::move(options));
      ASSERT_TRUE(p.has_value()) << p.error();
      runs.push_back({std::string(name) + "-" + mode, mode, std::move(*p)});
    }
  }
  std::map<std::string, std::set<std::string>> by_mode;
  for (auto& r : runs) {
    auto status = r.process->WaitExit(seconds(90));
    EXPECT_TRUE(status.exited && status.code == 0) << r.name << ": " << status.ToString() << "\n"
                                                   << r.process->Stderr();
    const auto lines = PrintedLines(r.process->Stdout());
    EXPECT_EQ(lines.size(), static_cast<size_t>(kCount)) << r.name << "\n" << r.process->Stderr();
    for (const auto& id : lines) {
      EXPECT_TRUE(by_mode[r.mode].insert(id).second) << id << " printed twice (" << r.name << ")";
    }
  }
  (*producer)->Terminate();
  EXPECT_TRUE((*producer)->WaitExit(seconds(20)).exited);
  const int64_t to_ms = e2e::WallClockMs();

  // Sorted, so the checker's order check is a uniqueness check here (the members printed batches
  // of different partitions in the order they claimed them).
  const auto dir = cluster.dir();
  for (const std::string mode : {"uuid7", "ulid"}) {
    std::ofstream out(dir / (mode + ".txt"));
    for (const auto& id : by_mode[mode]) out << id << "\n";
  }
  const auto output = dir / "check.out";
  const std::string command =
      std::string(KLEAF_PYTHON) + " '" + KLEAF_SOURCE_DIR + "/tests/e2e/check_uuid7_ulid.py'" +
      " --uuid7 '" + (dir / "uuid7.txt").string() + "' --ulid '" + (dir / "ulid.txt").string() +
      "' --from-ms " + std::to_string(from_ms) + " --to-ms " + std::to_string(to_ms) +
      " --worker " + worker[1].str() + " > '" + output.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("checked " + std::to_string(3 * kCount) + " UUIDv7s and " +
                      std::to_string(3 * kCount) + " ULIDs: 0 problems"),
            std::string::npos)
      << text;
  if (HasFailure()) std::cerr << "----- producer -----\n" << (*producer)->Stderr();
}

}  // namespace
}  // namespace kleaf::integration
