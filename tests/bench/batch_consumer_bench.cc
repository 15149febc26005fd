// IDs per second delivered to one BatchConsumer through the ids topic: pre-publishes batches of
// one tag into a fresh 4-partition topic, then times Next() until every ID came out (each batch
// claimed by a synchronous commit first, as in production).
//
//   kleaf_batch_consumer_bench BOOTSTRAP [batches=2000] [batch_size=1000] [prefetch_batches=1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kafka/client.h"
#include "kleaf/batch.h"
#include "kleaf/batch_consumer.h"

using namespace kleaf;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BOOTSTRAP [batches] [batch_size] [prefetch_batches]\n", argv[0]);
    return 2;
  }
  const int batches = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int64_t size = argc > 3 ? std::atoll(argv[3]) : 1000;
  const int prefetch = argc > 4 ? std::atoi(argv[4]) : 1;
  const std::string bootstrap = argv[1];
  const std::string topic = "bench" + std::to_string(std::random_device{}()) + ".ids";
  const std::string stream_topic = StreamTopic(topic, "bench", IdBatch::Mode::kSegment);
  constexpr int32_t kPartitions = 4;
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
    IdBatch b{"bench", IdBatch::Mode::kSegment, i * size, (i + 1) * size, {}};
    if (!(*producer)->Send(stream_topic, i % kPartitions, b.tag, EncodeBatch(b), {})) return 1;
  }
  if (!(*producer)->Flush(milliseconds(60000))) return 1;

  BatchConsumer::Options options;
  options.bootstrap = bootstrap;
  options.topic = topic;
  options.group_id = topic + ".group";
  options.prefetch_batches = prefetch;
  options.streams = {{"bench", IdBatch::Mode::kSegment}};
  auto consumer = BatchConsumer::Create(options);
  if (!consumer) {
    std::fprintf(stderr, "consumer: %s\n", consumer.error().message.c_str());
    return 1;
  }
  const int64_t total = batches * size;
  // The first ID waits for the group join; time from it to the last one.
  auto first = (*consumer)->Next("bench", IdBatch::Mode::kSegment, milliseconds(60000));
  if (!first) return 1;
  const auto start = SteadyClock::now();
  int64_t sum = *first;
  for (int64_t i = 1; i < total; ++i) {
    auto id = (*consumer)->Next("bench", IdBatch::Mode::kSegment, milliseconds(30000));
    if (!id) {
      std::fprintf(stderr, "after %lld IDs: %s\n", static_cast<long long>(i), id.error().message.c_str());
      return 1;
    }
    sum += *id;
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  // Every ID exactly once <=> the sum is 0 + 1 + ... + (total - 1) (all IDs are in that range).
  const bool exact = sum == total * (total - 1) / 2;
  auto stats = (*consumer)->stats();
  std::printf("batch consumer: %lld IDs in %d batches of %lld, prefetch %d: %.3f s, %.2f M IDs/s, "
              "%.0f batches/s (claimed %lld, commit failures %lld), IDs %s\n",
              static_cast<long long>(total), batches, static_cast<long long>(size), prefetch, secs,
              total / secs / 1e6, batches / secs, static_cast<long long>(stats.claimed_batches),
              static_cast<long long>(stats.commit_failures), exact ? "exact" : "WRONG");
  return exact ? 0 : 1;
}
