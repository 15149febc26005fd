// Joins a consumer group on an ids topic and prints each ID it is handed, one per line.
// Usage: batch_consumer_example BOOTSTRAP TOPIC GROUP TAG MODE(segment|snowflake) COUNT
//        [idle_timeout_ms] [librdkafka.property=value ...]
// COUNT 0 means: until no ID arrives for idle_timeout_ms (default 10000). Exit code 0 when COUNT
// IDs were printed (or, with COUNT 0, on the idle timeout), 1 on bad arguments, 2 on a timeout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kleaf/batch_consumer.h"

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s BOOTSTRAP TOPIC GROUP TAG segment|snowflake COUNT [idle_timeout_ms]\n",
                 argv[0]);
    return 1;
  }
  const std::string mode_name = argv[5];
  if (mode_name != "segment" && mode_name != "snowflake") {
    std::fprintf(stderr, "mode must be segment or snowflake, not %s\n", mode_name.c_str());
    return 1;
  }
  const auto mode = mode_name == "segment" ? kleaf::IdBatch::Mode::kSegment
                                           : kleaf::IdBatch::Mode::kSnowflake;
  const long long count = std::atoll(argv[6]);
  const std::chrono::milliseconds idle(argc > 7 ? std::atoll(argv[7]) : 10000);

  kleaf::BatchConsumer::Options options;
  options.bootstrap = argv[1];
  options.topic = argv[2];
  options.group_id = argv[3];
  for (int i = 8; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "expected property=value, not %s\n", kv.c_str());
      return 1;
    }
    options.properties[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto consumer = kleaf::BatchConsumer::Create(options);
  if (!consumer) {
    std::fprintf(stderr, "error: %s\n", consumer.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "joined group %s on %s\n", options.group_id.c_str(), options.topic.c_str());
  kleaf::BatchConsumer::Stats stats;
  // Rebalances, assignments and failed claims as they happen (stderr; stdout has only IDs).
  auto report = [&] {
    auto now = (*consumer)->stats();
    if (now.rebalances != stats.rebalances || now.commit_failures != stats.commit_failures ||
        now.assigned_partitions != stats.assigned_partitions) {
      std::fprintf(stderr,
                   "stats: rebalances=%lld assigned=%d claimed=%lld commit_failures=%lld "
                   "released=%lld dropped=%lld last_error=%s\n",
                   static_cast<long long>(now.rebalances), now.assigned_partitions,
                   static_cast<long long>(now.claimed_batches),
                   static_cast<long long>(now.commit_failures),
                   static_cast<long long>(now.released_batches),
                   static_cast<long long>(now.dropped_batches), now.last_error.c_str());
      stats = now;
    }
  };
  const auto step = std::min(idle, std::chrono::milliseconds(500));
  for (long long printed = 0; count == 0 || printed < count;) {
    auto waited = std::chrono::milliseconds(0);
    auto id = (*consumer)->Next(argv[4], mode, step);
    for (waited += step; !id && id.error().kind == kleaf::ClientError::Kind::kTimeout && waited < idle;
         waited += step) {
      report();
      id = (*consumer)->Next(argv[4], mode, step);
    }
    if (!id) {
      std::fprintf(stderr, "%s\n", id.error().message.c_str());
      return count == 0 ? 0 : 2;
    }
    std::printf("%lld\n", static_cast<long long>(*id));
    std::fflush(stdout);
    ++printed;
    report();
  }
  return 0;
}
