// IDs per second that N BatchConsumers of one group take from one stream: pre-publishes segment
// batches of one tag into a fresh stream topic (12 partitions, what `kleaf producer` creates by
// default), starts N consumers (a thread and a BatchConsumer each, one group), waits until the
// group's partitions are all assigned among them, then times them taking IDs until every ID came
// out. Each batch is claimed by a synchronous offset commit first, as in production. Checks that
// every published ID came out exactly once across all consumers.
//
//   kleaf_batch_consumer_bench BOOTSTRAP [batches=2400] [batch_size=10000] [prefetch_batches=1]
//                              [consumers=1] [ids_per_call=1]
//
// ids_per_call 1 takes IDs with Next(), one at a time; more takes them with Take(n).
//
// With KLEAF_BENCH_LIVE_TOPIC=<ids topic> set, nothing is pre-published: the consumers join the
// group a running `kleaf producer` tops up for (<ids topic>.consumers), take batches x batch_size
// IDs of its segment stream of tag "bench" as the producer publishes them, and check that no ID
// came out twice (what the producer published before is in the group's past).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kafka/producer.h"
#include "kafka/topics.h"
#include "kleaf/batch.h"
#include "kleaf/batch_consumer.h"

using namespace kleaf;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr int32_t kPartitions = 12;  // kleaf creates its topics with 12; stream topics follow
const std::string kTag = "bench";
constexpr IdBatch::Mode kMode = IdBatch::Mode::kSegment;

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// CPU seconds this process used so far (all threads: callers and the consumers' fetch threads).
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

// The machine's busy and total CPU time so far, in clock ticks (/proc/stat's first line).
std::pair<double, double> MachineTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  double total = 0, idle = 0, v = 0;
  for (int i = 0; i < 8 && in >> v; ++i) {
    total += v;
    if (i == 3 || i == 4) idle += v;  // idle, iowait
  }
  return {total - idle, total};
}

// IDs one consumer took, as runs of consecutive IDs [start, end): exact checking without
// storing every ID.
struct Run {
  int64_t start = 0;
  int64_t end = 0;
};

struct Taker {
  std::unique_ptr<BatchConsumer> consumer;
  std::vector<Run> runs;
  int64_t taken = 0;
  SteadyClock::time_point last_id{};
  std::string error;

  void Add(int64_t id) {
    if (!runs.empty() && runs.back().end == id) {
      ++runs.back().end;
    } else {
      runs.push_back({id, id + 1});
    }
    ++taken;
  }
};

// Takes IDs until all takers together took `total`; progress is published to `done` every few
// thousand IDs, at the last ID, and whenever a call times out (this taker's partitions may be
// drained while others still work). `last_id` is the time of its last publication with IDs.
void TakeUntilDone(Taker& t, int64_t total, int64_t per_call, std::atomic<int64_t>& done,
                   std::atomic<bool>& go) {
  while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  int64_t unpublished = 0;
  auto idle_since = SteadyClock::now();
  std::vector<int64_t> ids;
  while (done.load(std::memory_order_relaxed) < total) {
    size_t got = 0;
    if (per_call == 1) {
      auto id = t.consumer->Next(kTag, kMode, milliseconds(100));
      if (id) {
        t.Add(*id);
        got = 1;
      } else if (id.error().kind != ClientError::Kind::kTimeout) {
        t.error = id.error().message;
        return;
      }
    } else {
      auto r = t.consumer->Take(kTag, kMode, per_call, milliseconds(100));
      if (r) {
        for (int64_t id : *r) t.Add(id);
        got = r->size();
      } else if (r.error().kind != ClientError::Kind::kTimeout) {
        t.error = r.error().message;
        return;
      }
    }
    if (got > 0) {
      unpublished += static_cast<int64_t>(got);
      // Reading the clock per ID would cost more than taking the ID: only when progress is
      // published, and at the last ID of all.
      if (unpublished < 4096 && done.load(std::memory_order_relaxed) + unpublished < total) {
        continue;
      }
      t.last_id = SteadyClock::now();
      idle_since = t.last_id;
    } else if (SteadyClock::now() - idle_since > std::chrono::seconds(30)) {
      t.error = "no ID for 30 s";
      return;
    }
    done.fetch_add(unpublished, std::memory_order_relaxed);
    unpublished = 0;
  }
}

// Every ID of [0, total) came out exactly once across all takers.
bool ExactlyOnce(const std::vector<Taker>& takers, int64_t total, std::string& why) {
  std::vector<Run> all;
  for (const auto& t : takers) all.insert(all.end(), t.runs.begin(), t.runs.end());
  std::sort(all.begin(), all.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  int64_t next = 0;
  for (const Run& r : all) {
    if (r.start != next) {
      why = r.start < next ? "ID " + std::to_string(r.start) + " came out twice"
                           : "IDs " + std::to_string(next) + ".." + std::to_string(r.start - 1) +
                                 " never came out";
      return false;
    }
    next = r.end;
  }
  if (next != total) {
    why = "IDs from " + std::to_string(next) + " never came out";
    return false;
  }
  return true;
}

// No ID came out twice across all takers (a live stream: which IDs is the producer's choice).
bool NoneTwice(const std::vector<Taker>& takers, std::string& why) {
  std::vector<Run> all;
  for (const auto& t : takers) all.insert(all.end(), t.runs.begin(), t.runs.end());
  std::sort(all.begin(), all.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i].start < all[i - 1].end) {
      why = "ID " + std::to_string(all[i].start) + " came out twice";
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s BOOTSTRAP [batches] [batch_size] [prefetch_batches] [consumers] "
                 "[ids_per_call]\n",
                 argv[0]);
    return 2;
  }
  const std::string bootstrap = argv[1];
  const int batches = argc > 2 ? std::atoi(argv[2]) : 2400;
  const int64_t size = argc > 3 ? std::atoll(argv[3]) : 10000;
  const int prefetch = argc > 4 ? std::atoi(argv[4]) : 1;
  const int n = argc > 5 ? std::atoi(argv[5]) : 1;
  const int64_t per_call = argc > 6 ? std::atoll(argv[6]) : 1;
  if (batches < 1 || size < 1 || prefetch < 0 || n < 1 || n > kPartitions || per_call < 1) {
    std::fprintf(stderr, "batches, batch_size, consumers (<= %d), ids_per_call >= 1\n",
                 kPartitions);
    return 2;
  }
  const char* live_topic = std::getenv("KLEAF_BENCH_LIVE_TOPIC");
  const bool live = live_topic != nullptr && *live_topic != '\0';
  const std::string topic =
      live ? std::string(live_topic) : "bench" + std::to_string(std::random_device{}()) + ".ids";
  const std::string stream_topic = StreamTopic(topic, kTag, kMode);
  if (!live) {
    kafka::Properties props{{"bootstrap.servers", bootstrap}};
    if (auto r =
            kafka::EnsureTopics(props, {{stream_topic, kPartitions, 1, {}}}, milliseconds(30000));
        !r) {
      std::fprintf(stderr, "topic: %s\n", r.error().message.c_str());
      return 1;
    }
    auto producer = kafka::Producer::Create({{"bootstrap.servers", bootstrap}, {"linger.ms", "5"}});
    if (!producer) return 1;
    for (int i = 0; i < batches; ++i) {
      IdBatch b{kTag, kMode, i * size, (i + 1) * size, {}};
      if (!(*producer)->Send(stream_topic, i % kPartitions, b.tag, EncodeBatch(b), {})) return 1;
    }
    if (!(*producer)->Flush(milliseconds(60000))) return 1;
  }

  std::vector<Taker> takers(n);
  for (auto& t : takers) {
    BatchConsumer::Options options;
    options.bootstrap = bootstrap;
    options.topic = topic;
    options.group_id = topic + (live ? ".consumers" : ".group");
    options.prefetch_batches = prefetch;
    options.max_buffered_batches = std::max(16, prefetch + 1);
    options.streams = {{kTag, kMode}};
    auto consumer = BatchConsumer::Create(options);
    if (!consumer) {
      std::fprintf(stderr, "consumer: %s\n", consumer.error().message.c_str());
      return 1;
    }
    t.consumer = std::move(*consumer);
  }
  // No consumer claims before it is asked for IDs, so the group settles first: every member
  // holds partitions and together they hold all of them.
  const auto join_deadline = SteadyClock::now() + std::chrono::seconds(60);
  for (;;) {
    int sum = 0;
    bool each = true;
    for (const auto& t : takers) {
      const int a = t.consumer->stats().assigned_partitions;
      sum += a;
      each = each && a > 0;
    }
    if (each && sum == kPartitions) break;
    if (SteadyClock::now() > join_deadline) {
      std::fprintf(stderr, "the group did not settle within 60 s\n");
      return 1;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }

  const int64_t total = batches * size;
  const std::string load_before = LoadAverage();
  std::atomic<int64_t> done{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (auto& t : takers) {
    threads.emplace_back(
        [&t, total, per_call, &done, &go] { TakeUntilDone(t, total, per_call, done, go); });
  }
  const double cpu_before = ProcessCpuSeconds();
  const auto machine_before = MachineTicks();
  const auto start = SteadyClock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  // Includes up to 100 ms of waiting past the last ID (the takers' last timeout): a bound.
  const double cpu = ProcessCpuSeconds() - cpu_before;
  const auto machine_after = MachineTicks();
  const double machine_busy = (machine_after.first - machine_before.first) /
                              std::max(1.0, machine_after.second - machine_before.second);
  auto end = start;
  for (const auto& t : takers) end = std::max(end, t.last_id);
  const double secs = std::chrono::duration<double>(end - start).count();

  bool ok = true;
  for (size_t i = 0; i < takers.size(); ++i) {
    const auto& t = takers[i];
    const auto stats = t.consumer->stats();
    std::printf(
        "  consumer %zu: %lld IDs (%.1f %%), %.2f M IDs/s, partitions %d, claimed %lld, "
        "commit failures %lld, rebalances %lld, stale %lld, released %lld%s%s\n",
        i, static_cast<long long>(t.taken), 100.0 * static_cast<double>(t.taken) / total,
        static_cast<double>(t.taken) / secs / 1e6, stats.assigned_partitions,
        static_cast<long long>(stats.claimed_batches),
        static_cast<long long>(stats.commit_failures), static_cast<long long>(stats.rebalances),
        static_cast<long long>(stats.stale_batches), static_cast<long long>(stats.released_batches),
        t.error.empty() ? "" : ", error: ", t.error.c_str());
    ok = ok && t.error.empty();
  }
  std::string why;
  const bool exact = ok && (live ? NoneTwice(takers, why) : ExactlyOnce(takers, total, why));
  std::printf(
      "batch consumers: %d, %lld IDs in %d batches of %lld, prefetch %d, %lld per call: "
      "%.3f s, %.2f M IDs/s in total, %.0f batches/s, load %s -> %s, IDs %s%s\n"
      "  CPU: this process %.2f s (%.0f ns per ID), the machine %.0f %% busy\n",
      n, static_cast<long long>(total), batches, static_cast<long long>(size), prefetch,
      static_cast<long long>(per_call), secs, static_cast<double>(total) / secs / 1e6,
      batches / secs, load_before.c_str(), LoadAverage().c_str(),
      exact ? (live ? "none twice" : "exact") : "WRONG: ", why.c_str(), cpu,
      cpu / static_cast<double>(total) * 1e9, 100.0 * machine_busy);
  return exact ? 0 : 1;
}
