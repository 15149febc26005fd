// Issue 16: consumers in different languages share one group by docs/ids-topic.md alone. The real
// allocator and `kleaf producer` fill one stream while C++ (examples/batch_consumer_example),
// Python (examples/python/kleaf_batch_consumer.py) and Java (examples/java) consumers take it
// concurrently in ONE group; one member of each language is killed with SIGKILL and restarted
// mid-run. Every ID printed by any of them is
// unique, checked over all of them, and each member got batches of the tag.
// Issue 17: the three take uuid7 and ulid streams too, and the listed segment batches of an
// obfuscated tag (ids without start and end).
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
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kafka/client.h"
#include "kleaf/batch.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/producer/producer_env.h"

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

// Starts the reference consumer in `lang` on stream (tag, mode) of `ids_topic` in `group`: it
// prints `count` IDs (0: until stopped, or idle for `idle_ms`), one per line, and exits.
// `properties`: property=value arguments for its Kafka client.
std::expected<std::unique_ptr<e2e::KleafProcess>, std::string> StartConsumer(
    Lang lang, const std::string& bootstrap, const std::string& ids_topic, const std::string& group,
    const std::string& tag, const std::string& mode, int64_t count, int64_t idle_ms,
    const std::string& properties = "") {
  const std::string args = " " + bootstrap + " " + ids_topic + " " + group + " " + tag + " " +
                           mode + " " + std::to_string(count) + " " + std::to_string(idle_ms) +
                           (properties.empty() ? "" : " " + properties);
  e2e::ProcessOptions options;
  // `sh -c CMD` takes the kleaf binary KleafProcess appends as its $0 and ignores it.
  options.prefix = {"/bin/sh", "-c", "exec " + Program(lang) + args};
  return e2e::KleafProcess::Start(std::move(options));
}

// Fails the test (fatally) when the Python or the Java consumer cannot run here.
void RequirePythonAndJava() {
  ASSERT_TRUE(std::filesystem::exists(KLEAF_PYTHON))
      << KLEAF_PYTHON << " is missing: run scripts/install-deps.sh --test";
  ASSERT_TRUE(std::filesystem::exists(KLEAF_JAVA_CONSUMER_JAR))
      << KLEAF_JAVA_CONSUMER_JAR << " is missing: the build makes it with mvn (examples/java)";
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
    auto p = StartConsumer(kind_, bootstrap_, ids_topic_, group_, kTag, "segment", 0, 120000,
                           "session.timeout.ms=6000 heartbeat.interval.ms=500");
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

class MixedConsumersTest : public KafkaTest {};

TEST_F(MixedConsumersTest, CppPythonAndJavaInOneGroupWithKillsNeverPrintAnIdTwice) {
  ASSERT_NO_FATAL_FAILURE(RequirePythonAndJava());
  const auto began = SteadyClock::now();
  Cluster cluster(broker_, "mixed-consumers", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();

  // The producer: one segment stream, 4 batches of 50 ahead on each of its topic's partitions.
  ProducerNode producer(
      cluster, "prod-1", 4,
      "[{tag: mixed, mode: segment, batch_size: " + std::to_string(kBatchSize) + "}]");
  auto started = producer.Start();
  ASSERT_TRUE(started.has_value()) << started.error();

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
    std::string out;
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
  EXPECT_TRUE(producer.Stop());

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

// One run of a reference consumer that takes a number of IDs of one stream and exits.
struct ConsumerRun {
  std::string name, mode;
  std::unique_ptr<e2e::KleafProcess> process;
  std::vector<std::string> lines = {};  // what it printed, once it exited (AwaitRuns)
};

// Starts the C++ example and the Python and Java consumers on stream (tag, mode), "cpp-MODE",
// "py-MODE" and "java-MODE", each to print `count` IDs (60 s idle timeout).
std::expected<void, std::string> StartEveryLanguage(
    std::vector<ConsumerRun>& runs, const std::string& bootstrap, const std::string& ids_topic,
    const std::string& group, const std::string& tag, const std::string& mode, int count) {
  for (auto [name, lang] : {std::pair{"cpp", Lang::kCpp}, std::pair{"py", Lang::kPython},
                            std::pair{"java", Lang::kJava}}) {
    auto p = StartConsumer(lang, bootstrap, ids_topic, group, tag, mode, count, 60000);
    if (!p) return std::unexpected(std::string(name) + ": " + p.error());
    runs.push_back({std::string(name) + "-" + mode, mode, std::move(*p)});
  }
  return {};
}

// Waits for every run to exit, which must be with code 0 after printing `count` lines; fills
// their `lines`. The lines printed per mode: a line printed twice for one mode fails the test.
std::map<std::string, std::set<std::string>> AwaitRuns(std::vector<ConsumerRun>& runs, int count) {
  std::map<std::string, std::set<std::string>> by_mode;
  for (auto& r : runs) {
    auto status = r.process->WaitExit(seconds(90));
    EXPECT_TRUE(status.exited && status.code == 0) << r.name << ": " << status.ToString() << "\n"
                                                   << r.process->Stderr();
    r.lines = PrintedLines(r.process->Stdout());
    EXPECT_EQ(r.lines.size(), static_cast<size_t>(count)) << r.name << "\n" << r.process->Stderr();
    for (const auto& id : r.lines) {
      EXPECT_TRUE(by_mode[r.mode].insert(id).second) << id << " printed twice (" << r.name << ")";
    }
  }
  return by_mode;
}

// Issue 17: the C++ example (BatchConsumer::NextText) and the Python and Java reference consumers
// take the uuid7 and ulid streams of the producer, one member of each per stream in one group; what
// they print is unique per stream and read right by Python's `uuid` module and a Crockford decoder
// (tests/e2e/check_uuid7_ulid.py: version 7, RFC 9562 variant, timestamps of this run, the
// producer's worker id).
TEST_F(MixedConsumersTest, CppPythonAndJavaExamplesTakeUuid7AndUlidStreams) {
  ASSERT_NO_FATAL_FAILURE(RequirePythonAndJava());
  const int64_t from_ms = e2e::WallClockMs();
  Cluster cluster(broker_, "id128-consumers", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  ProducerNode producer(
      cluster, "prod-1", 2,
      "[{tag: ev, mode: uuid7, batch_size: 50}, {tag: ev, mode: ulid, batch_size: 50}]");
  auto started = producer.Start();
  ASSERT_TRUE(started.has_value()) << started.error();
  const auto worker = producer.WorkerId();
  ASSERT_TRUE(worker.has_value()) << producer.Logs();

  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string group = ids_topic + ".consumers";
  constexpr int kCount = 150;  // three batches each
  std::vector<ConsumerRun> runs;
  for (std::string mode : {"uuid7", "ulid"}) {
    auto r = StartEveryLanguage(runs, broker_.bootstrap, ids_topic, group, "ev", mode, kCount);
    ASSERT_TRUE(r.has_value()) << r.error();
  }
  auto by_mode = AwaitRuns(runs, kCount);
  EXPECT_TRUE(producer.Stop());
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
      " --worker " + std::to_string(*worker) + " > '" + output.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("checked " + std::to_string(3 * kCount) + " UUIDv7s and " +
                      std::to_string(3 * kCount) + " ULIDs: 0 problems"),
            std::string::npos)
      << text;
}

// Issue 17 (listed segment batches): an obfuscated tag's segment batches list their IDs, a keyed
// permutation of its counters, with no start and end (docs/ids-topic.md). The C++ example and the
// Python and Java reference consumers take such a stream in one group: each prints whole published
// batches, each in its published order (the last one possibly cut by COUNT); every ID is printed
// once over the three, and every one was published.
TEST_F(MixedConsumersTest, CppPythonAndJavaExamplesTakeTheListedIdsOfAnObfuscatedTag) {
  ASSERT_NO_FATAL_FAILURE(RequirePythonAndJava());
  Cluster cluster(broker_, "listed-consumers",
                  {{"segment.auto_create", "true"}, {"segment.default_id_mode", "obfuscated"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  // 4 batches on each of the 4 partitions, then the producer stops: the consumers claim 11 at
  // most (three each, and the C++ one up to two ahead), and a claim deletes its batch from the
  // topic (the claim floor), so what was published is read before anyone consumes.
  ProducerNode producer(
      cluster, "prod-1", 4,
      "[{tag: obf, mode: segment, batch_size: " + std::to_string(kBatchSize) + "}]");
  auto started = producer.Start();
  ASSERT_TRUE(started.has_value()) << started.error();
  ASSERT_TRUE(producer.WaitRounds(1, seconds(30))) << producer.Logs();
  EXPECT_TRUE(producer.Stop());

  const std::string ids_topic = cluster.prefix() + ".ids";
  // What the producer published (read_committed, as the consumers read): listed batches only,
  // none of them a run of counters, no ID twice. A commit returns once the coordinator has
  // decided it; the markers that make its batches readable reach the partitions after that, so
  // a read right after the producer's last round can stop short of them (12 of 16 seen once, with
  // librdkafka 2.14): read until all 16 are there.
  std::vector<Published> published;
  ASSERT_TRUE(WaitUntil(
      [&] {
        published = ReadAll(broker_.bootstrap, StreamTopics(ids_topic, {"obf/segment"}),
                            Cluster::kPartitions);
        return published.size() >= 16u;
      },
      seconds(30)))
      << "read " << published.size() << " of the 16 published batches";
  ASSERT_EQ(published.size(), 16u);

  constexpr int kCount = 3 * kBatchSize;
  std::vector<ConsumerRun> runs;
  auto r = StartEveryLanguage(runs, broker_.bootstrap, ids_topic, ids_topic + ".consumers", "obf",
                              "segment", kCount);
  ASSERT_TRUE(r.has_value()) << r.error();
  auto by_mode = AwaitRuns(runs, kCount);
  const std::set<std::string>& printed = by_mode["segment"];
  EXPECT_EQ(printed.size(), 3u * kCount);

  std::map<std::string, const IdBatch*> by_first_id;
  std::set<std::string> published_ids;
  for (const auto& p : published) {
    const IdBatch& b = p.batch;
    EXPECT_EQ(b.start, 0) << p.value;
    EXPECT_EQ(b.end, 0) << p.value;
    ASSERT_FALSE(b.ids.empty()) << "not a listed batch: " << p.value;
    EXPECT_LE(b.ids.size(), static_cast<size_t>(kBatchSize)) << p.value;
    bool consecutive = true;
    for (size_t i = 1; i < b.ids.size(); ++i) consecutive &= b.ids[i] == b.ids[i - 1] + 1;
    EXPECT_FALSE(consecutive && b.ids.size() > 1) << "counters, not obfuscated: " << p.value;
    by_first_id[std::to_string(b.ids.front())] = &b;
    for (int64_t id : b.ids) {
      EXPECT_GT(id, 0) << p.value;
      EXPECT_TRUE(published_ids.insert(std::to_string(id)).second) << id << " published twice";
    }
  }
  EXPECT_GE(published.size(), 9u) << "the consumers took 9 batches at least";

  // Every run printed whole batches, one after the other, each in its published order.
  for (const auto& run : runs) {
    size_t line = 0;
    int batches = 0;
    while (line < run.lines.size()) {
      auto batch = by_first_id.find(run.lines[line]);
      if (batch == by_first_id.end()) {
        ADD_FAILURE() << run.name << " line " << line + 1 << ": " << run.lines[line]
                      << " begins no published batch ("
                      << (published_ids.contains(run.lines[line]) ? "published in another place"
                                                                  : "never published")
                      << ")";
        break;
      }
      ++batches;
      const std::vector<int64_t>& ids = batch->second->ids;
      size_t i = 0;
      for (; i < ids.size() && line < run.lines.size(); ++i, ++line) {
        if (run.lines[line] != std::to_string(ids[i])) break;
      }
      if (i < ids.size() && line < run.lines.size()) {
        ADD_FAILURE() << run.name << " line " << line + 1 << ": " << run.lines[line]
                      << " where the batch that begins with " << batch->first << " has " << ids[i]
                      << " (its ID " << i + 1 << " of " << ids.size() << ")";
        break;
      }
    }
    std::cerr << "[listed] " << run.name << " printed " << run.lines.size() << " IDs of " << batches
              << " batches\n";
  }
  std::cerr << "[listed] " << printed.size() << " distinct IDs printed of " << published_ids.size()
            << " published in " << published.size() << " batches\n";
}

// A broker of the test's own, run by compose/kafka.sh with `props` (k=v) beside the shared one:
// for broker settings the other tests must not get. Stopped (killed) and removed with the object.
class OwnBroker {
 public:
  explicit OwnBroker(const KafkaBroker& shared) { broker_.script = shared.script; }
  ~OwnBroker() {
    if (!broker_.bootstrap.empty()) {
      (void)RunScript({broker_.script, "stop", "--dir", broker_.dir, "--kill", "--clean"},
                      seconds(60));
    }
  }
  OwnBroker(const OwnBroker&) = delete;
  OwnBroker& operator=(const OwnBroker&) = delete;

  std::expected<void, std::string> Start(const std::vector<std::string>& props) {
    auto port = RunScript({broker_.script, "free-port"}, seconds(30));
    if (port.exit_code != 0) return std::unexpected("free-port: " + port.output);
    broker_.port = port.output.substr(0, port.output.find_first_of("\r\n"));
    broker_.dir = (dir_.path() / "kafka").string();
    std::vector<std::string> argv{broker_.script, "start", "--port",
                                  broker_.port,   "--dir", broker_.dir};
    for (const auto& p : props) {
      argv.push_back("--prop");
      argv.push_back(p);
    }
    broker_.bootstrap = "127.0.0.1:" + broker_.port;
    auto started = RunScript(argv, seconds(180));
    if (started.exit_code != 0) return std::unexpected("kafka.sh start: " + started.output);
    return {};
  }
  const KafkaBroker& broker() const { return broker_; }

 private:
  e2e::TempDir dir_;
  KafkaBroker broker_;
};

// Issue 36: Kafka deletes an empty group's committed offsets offsets.retention.minutes after the
// group emptied, and a consumer without a committed offset starts at the log's start. On a
// broker with that retention at its least (1 minute, checked every second), consumers of every
// language claim and print batches and stop; once the broker has deleted the group's offsets
// (asked through the admin API until it has; the producer keeps running meanwhile), the producer
// stops and they start again and take everything left: no ID may be printed twice over both
// rounds. Before the claim floor (each claim moves the log start past its batch) the second round
// printed the first round's IDs again.
TEST_F(MixedConsumersTest, NoIdTwiceAfterKafkaExpiredTheEmptyGroupsOffsets) {
  ASSERT_NO_FATAL_FAILURE(RequirePythonAndJava());
  OwnBroker own(broker_);
  auto started_broker =
      own.Start({"offsets.retention.minutes=1", "offsets.retention.check.interval.ms=1000"});
  ASSERT_TRUE(started_broker.has_value()) << started_broker.error();
  const KafkaBroker& broker = own.broker();
  Cluster cluster(broker, "offset-expiry", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  ProducerNode producer(
      cluster, "prod-1", 4,
      "[{tag: mixed, mode: segment, batch_size: " + std::to_string(kBatchSize) + "}]");
  auto started = producer.Start();
  ASSERT_TRUE(started.has_value()) << started.error();
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string group = ids_topic + ".consumers";
  const std::string topic = StreamTopic(ids_topic, kTag, IdBatch::Mode::kSegment);
  constexpr int kCount = 3 * kBatchSize;

  std::vector<ConsumerRun> first;
  ASSERT_TRUE(StartEveryLanguage(first, broker.bootstrap, ids_topic, group, kTag, "segment", kCount)
                  .has_value());
  AwaitRuns(first, kCount);
  ASSERT_FALSE(HasFailure());

  // Every member left: the group is empty. Wait (the admin API, not a sleep) until the broker has
  // deleted its offsets; the producer keeps running meanwhile, as it would in production.
  auto offsets = kafka::GroupOffsets::Create({{"bootstrap.servers", broker.bootstrap}}, group);
  ASSERT_TRUE(offsets.has_value()) << offsets.error().message;
  std::vector<kafka::TopicPartition> parts;
  for (int32_t p = 0; p < 4; ++p) parts.push_back({topic, p, 0});
  auto committed_partitions = [&]() -> int {
    auto committed = (*offsets)->Committed(parts, milliseconds(10000));
    if (!committed) return -1;
    return static_cast<int>(std::count_if(committed->begin(), committed->end(),
                                          [](const auto& tp) { return tp.offset >= 0; }));
  };
  const int had = committed_partitions();
  ASSERT_GT(had, 0) << "the first round committed nothing";
  const auto emptied = SteadyClock::now();
  ASSERT_TRUE(WaitUntil([&] { return committed_partitions() == 0; }, seconds(180)))
      << "the broker kept the empty group's offsets";
  std::cerr << "[expiry] the group's offsets of " << had << " partitions were gone after "
            << SecondsSince(emptied) << " s\n";

  // The producer stops too, and the consumers come back and take every batch they can get, until
  // none comes for 8 s: on a log whose claimed batches were not put below its start, they would
  // read them again.
  EXPECT_TRUE(producer.Stop());
  std::vector<ConsumerRun> second;
  for (auto [name, lang] : {std::pair{"cpp", Lang::kCpp}, std::pair{"py", Lang::kPython},
                            std::pair{"java", Lang::kJava}}) {
    auto p = StartConsumer(lang, broker.bootstrap, ids_topic, group, kTag, "segment", 0, 8000);
    ASSERT_TRUE(p.has_value()) << p.error();
    second.push_back({std::string(name) + "-segment", "segment", std::move(*p)});
  }
  size_t again = 0;
  for (auto& r : second) {
    auto status = r.process->WaitExit(seconds(120));
    EXPECT_TRUE(status.exited && status.code == 0) << r.name << ": " << status.ToString() << "\n"
                                                   << r.process->Stderr();
    r.lines = PrintedLines(r.process->Stdout());
    again += r.lines.size();
  }
  EXPECT_GT(again, 0u) << "the batches nobody claimed were not handed out after the outage";
  std::cerr << "[expiry] after the outage the consumers printed " << again << " IDs\n";

  std::map<std::string, std::string> by_id;
  size_t twice = 0;
  for (const auto* runs : {&first, &second}) {
    for (const auto& r : *runs) {
      const std::string who = r.name + (runs == &first ? " (before)" : " (after)");
      for (const auto& id : r.lines) {
        auto [it, fresh] = by_id.emplace(id, who);
        if (!fresh && ++twice <= 10) {
          ADD_FAILURE() << "ID " << id << " printed by " << it->second << " and by " << who;
        }
      }
    }
  }
  EXPECT_EQ(twice, 0u);
  EXPECT_EQ(by_id.size(), 3u * kCount + again);
}

// The operator who points a second consumer group at a stream (a new service with its own group
// name): every batch names the group its producer tops up for, and a consumer of another group,
// in every language, claims none (the partitions' log starts stay where they were) and stops with
// a message that says why. The stream's own group then gets every batch.
TEST_F(MixedConsumersTest, AConsumerOfAnotherGroupClaimsNothingAndIsToldWhy) {
  ASSERT_NO_FATAL_FAILURE(RequirePythonAndJava());
  Cluster cluster(broker_, "other-group", {{"segment.auto_create", "true"}});
  ASSERT_TRUE(cluster.StartNodes(1, 0).has_value()) << cluster.Logs();
  ProducerNode producer(
      cluster, "prod-1", 2,
      "[{tag: mixed, mode: segment, batch_size: " + std::to_string(kBatchSize) + "}]");
  auto started = producer.Start();
  ASSERT_TRUE(started.has_value()) << started.error();
  const std::string ids_topic = cluster.prefix() + ".ids";
  const std::string topic = StreamTopic(ids_topic, kTag, IdBatch::Mode::kSegment);

  std::vector<ConsumerRun> others;
  ASSERT_TRUE(StartEveryLanguage(others, broker_.bootstrap, ids_topic, ids_topic + ".another", kTag,
                                 "segment", kBatchSize)
                  .has_value());
  for (auto& r : others) {
    auto status = r.process->WaitExit(seconds(90));
    EXPECT_TRUE(status.exited && status.code == 3) << r.name << ": " << status.ToString() << "\n"
                                                   << r.process->Stderr();
    EXPECT_TRUE(r.process->Stdout().empty()) << r.name << " printed IDs: " << r.process->Stdout();
    EXPECT_NE(
        r.process->Stderr().find("are published for consumer group " + ids_topic + ".consumers"),
        std::string::npos)
        << r.name << ": " << r.process->Stderr();
  }
  auto reader = kafka::LogStartClient::Create({{"bootstrap.servers", broker_.bootstrap}});
  ASSERT_TRUE(reader.has_value()) << reader.error().message;
  std::vector<kafka::TopicPartition> parts;
  for (int32_t p = 0; p < 4; ++p) parts.push_back({topic, p, 0});
  auto starts = (*reader)->LogStarts(parts, milliseconds(10000));
  ASSERT_TRUE(starts.has_value()) << starts.error().message;
  for (const auto& tp : *starts) EXPECT_EQ(tp.offset, 0) << "partition " << tp.partition;

  std::vector<ConsumerRun> owners;
  ASSERT_TRUE(StartEveryLanguage(owners, broker_.bootstrap, ids_topic, ids_topic + ".consumers",
                                 kTag, "segment", kBatchSize)
                  .has_value());
  AwaitRuns(owners, kBatchSize);
  EXPECT_TRUE(producer.Stop());
}

}  // namespace
}  // namespace kleaf::integration
