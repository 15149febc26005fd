// Segment fetch round trip over Kafka: a gateway's KafkaAllocatorClient asks AllocatorNodes
// (all in this process, each with its own store, talking through a real broker) for segments,
// one at a time for latency (p50/p99), then with many in flight for throughput. Targets (issue
// 18): p50 <= 3 ms, p99 <= 15 ms on loopback; >= 20 k allocations/s with 12 partitions over 2
// allocators.
//
//   kleaf_kafka_bench BOOTSTRAP [sequential] [concurrent] [partitions] [allocators]
// (defaults 2000, 20000, 4, 1). docs/benchmarks.md has the commands. KLEAF_BENCH_DEBUG=eos,protocol
// sets librdkafka's `debug` (every broker request with its rtt, on stderr).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/await.h"
#include "base/clock.h"
#include "cluster/allocator_client.h"
#include "cluster/allocator_node.h"
#include "cluster/topics.h"
#include "state/store.h"

using namespace kleaf;
using std::chrono::milliseconds;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s BOOTSTRAP [sequential] [concurrent] [partitions] [allocators]\n",
                 argv[0]);
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  const int sequential = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int concurrent = argc > 3 ? std::atoi(argv[3]) : 20000;
  const int partitions = argc > 4 ? std::atoi(argv[4]) : 4;
  const int allocators = argc > 5 ? std::atoi(argv[5]) : 1;
  if (sequential < 1 || concurrent < 1 || partitions < 1 || allocators < 1) {
    std::fprintf(stderr, "every count must be at least 1\n");
    return 2;
  }
  kafka::Properties props{{"bootstrap.servers", argv[1]}};
  if (const char* d = std::getenv("KLEAF_BENCH_DEBUG")) props["debug"] = d;
  std::string prefix = "bench" + std::to_string(std::random_device{}());
  auto topics = cluster::ClusterTopics::For(prefix, partitions, 4);
  if (auto r = cluster::EnsureClusterTopics(props, topics, 1, milliseconds(30000)); !r) {
    std::fprintf(stderr, "topics: %s\n", r.error().message.c_str());
    return 1;
  }
  auto dir = std::filesystem::temp_directory_path() / prefix;
  Clock& clock = SystemClock::Instance();
  cluster::AllocatorNodeOptions options;
  options.props = props;
  options.topics = topics;
  options.rules.max_step = 1000000;
  options.rules.auto_create = true;
  options.group_id = prefix + ".allocators";
  // Each allocator node has a store of its own, as separate processes would.
  std::vector<std::unique_ptr<state::Store>> stores;
  std::vector<std::unique_ptr<cluster::AllocatorNode>> nodes;
  std::filesystem::create_directories(dir);
  for (int a = 0; a < allocators; ++a) {
    auto store = state::Store::Open((dir / std::to_string(a)).string());
    if (!store) {
      std::fprintf(stderr, "store: %s\n", store.error().message.c_str());
      return 1;
    }
    stores.push_back(std::move(*store));
    nodes.push_back(std::make_unique<cluster::AllocatorNode>(options, *stores.back(), clock));
    if (auto started = nodes.back()->Start(); !started) {
      std::fprintf(stderr, "allocator: %s\n", started.error().message.c_str());
      return 1;
    }
  }
  auto client = cluster::KafkaAllocatorClient::Start(
      {props, topics, "bench", 0, milliseconds(5000), 1}, clock);
  if (!client) {
    std::fprintf(stderr, "client: %s\n", client.error().message.c_str());
    return 1;
  }
  auto allocate = [&](const std::string& tag) {
    // The client gives up by itself (one attempt of 5 s).
    return Await<allocator::Segment>(kNoDeadline, "", [&](auto done) {
      (*client)->AllocateSegment(tag, 1000, std::move(done));
    });
  };
  // Warm up until every partition is served (by as many allocators as asked: the group may take
  // a rebalance or two to settle), then until a round of allocations on every partition succeeds.
  // Every allocator must serve some: the first one to join serves all of them until the others'
  // joins move partitions, and a takeover during the latency run would time the rebalance.
  const auto served = [&] {
    size_t n = 0;
    for (const auto& node : nodes) n += node->Serving().size();
    return n;
  };
  const auto settled = [&] {
    const size_t busy = std::min(nodes.size(), static_cast<size_t>(partitions));
    size_t serving = 0;
    for (const auto& node : nodes) serving += node->Serving().empty() ? 0 : 1;
    return serving >= busy && served() == static_cast<size_t>(partitions);
  };
  for (int i = 0; i < 600 && !settled(); ++i) {
    clock.SleepFor(milliseconds(100));
  }
  // Then kWarmRounds allocations on every partition. Besides settling the clients, this writes past
  // the first 4 KiB (log.index.interval.bytes) of each fresh partition: its first offset and time
  // index entries are the first writes into the index files' preallocated pages, which took the
  // broker 37-45 ms each on this machine's ext4 (its request log: localTimeMs of the 22nd request
  // of every requests partition). A live cluster pays that once per log segment (1 GiB), so it
  // belongs to the topics' creation, not to the round trip measured here.
  constexpr int kWarmRounds = 32;
  std::vector<std::string> warm_tags(static_cast<size_t>(partitions));
  for (int t = 0, found = 0; found < partitions; ++t) {
    std::string tag = "warm" + std::to_string(t);
    auto& slot = warm_tags[static_cast<size_t>(topics.PartitionOf(tag))];
    if (slot.empty()) {
      slot = std::move(tag);
      ++found;
    }
  }
  for (int i = 0; i < 200; ++i) {
    bool ok = true;
    for (const auto& tag : warm_tags) ok = ok && allocate(tag).has_value();
    if (ok) break;
  }
  for (int round = 1; round < kWarmRounds; ++round) {
    for (const auto& tag : warm_tags) (void)allocate(tag);
  }
  std::string split;
  for (const auto& node : nodes) {
    split += (split.empty() ? "" : " + ") + std::to_string(node->Serving().size());
  }
  std::printf("%d partitions over %d allocators (%zu served: %s)\n", partitions, allocators,
              served(), split.c_str());

  std::vector<double> ms;
  int64_t failures = 0;
  for (int i = 0; i < sequential; ++i) {
    auto start = clock.MonotonicNs();
    auto s = allocate("tag" + std::to_string(i % 16));
    if (!s) ++failures;
    ms.push_back((clock.MonotonicNs() - start) / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "sequential round trips: %d, failures %lld, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f "
      "ms\n",
      sequential, static_cast<long long>(failures), pct(0.50), pct(0.90), pct(0.99), ms.back());

  std::atomic<int> left{concurrent};
  std::atomic<int64_t> bad{0};
  std::mutex mu;
  std::condition_variable cv;
  auto start = clock.MonotonicNs();
  for (int i = 0; i < concurrent; ++i) {
    (*client)->AllocateSegment("tag" + std::to_string(i % 64), 1000,
                               [&](Result<allocator::Segment> s) {
                                 if (!s) bad.fetch_add(1);
                                 if (left.fetch_sub(1) == 1) {
                                   std::lock_guard lock(mu);
                                   cv.notify_all();
                                 }
                               });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return left.load() == 0; });
  }
  double secs = (clock.MonotonicNs() - start) / 1e9;
  std::printf("concurrent: %d allocations in %.2f s = %.0f allocations/s, failures %lld\n",
              concurrent, secs, concurrent / secs, static_cast<long long>(bad.load()));
  (*client)->Stop();
  for (auto& node : nodes) node->Stop();
  nodes.clear();
  stores.clear();
  std::filesystem::remove_all(dir);
  return 0;
}
