// Joins a consumer group on the topic of one stream (TAG, MODE) of an ids topic and prints each
// ID it is handed, one per line.
// Usage: batch_consumer_example BOOTSTRAP TOPIC GROUP TAG MODE(segment|snowflake|uuid7|ulid) COUNT
//        [idle_timeout_ms] [librdkafka.property=value ...]
// COUNT 0 means: until no ID arrives for idle_timeout_ms (default 10000). SIGTERM or SIGINT stops
// it cleanly: it leaves the group and prints its summary. Exit code 0 when COUNT IDs were printed
// (or, with COUNT 0, on the idle timeout), and on SIGTERM/SIGINT; 1 on bad arguments, 2 on a
// timeout, 3 when the stream is refused (its batches are published for another consumer group).
// The last line on stderr is always the summary ("summary: printed=N ...").
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "kleaf/batch_consumer.h"

namespace {

volatile std::sig_atomic_t stop_signal = 0;

void OnStopSignal(int signal) { stop_signal = signal; }

// Closes the consumer (leaving the group) and prints what it did.
int Finish(kleaf::BatchConsumer& consumer, long long printed, const char* why, int code) {
  const auto began = std::chrono::steady_clock::now();
  consumer.Close();
  const auto close_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - began)
                            .count();
  const auto s = consumer.stats();
  std::fprintf(stderr,
               "summary: printed=%lld claimed=%lld dropped=%lld released=%lld rebalances=%lld "
               "commit_failures=%lld close_ms=%lld stopped_by=%s\n",
               printed, static_cast<long long>(s.claimed_batches),
               static_cast<long long>(s.dropped_batches),
               static_cast<long long>(s.released_batches), static_cast<long long>(s.rebalances),
               static_cast<long long>(s.commit_failures), static_cast<long long>(close_ms), why);
  return code;
}

}  // namespace

// Long on purpose: an example a reader copies from reads best as one story, arguments to summary.
int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s BOOTSTRAP TOPIC GROUP TAG segment|snowflake|uuid7|ulid COUNT "
                 "[idle_timeout_ms]\n",
                 argv[0]);
    return 1;
  }
  auto mode = kleaf::IdBatch::Mode::kSegment;
  if (!kleaf::ParseMode(argv[5], mode)) {
    std::fprintf(stderr, "mode must be segment, snowflake, uuid7 or ulid, not %s\n", argv[5]);
    return 1;
  }
  const long long count = std::atoll(argv[6]);
  const std::chrono::milliseconds idle(argc > 7 ? std::atoll(argv[7]) : 10000);

  kleaf::BatchConsumer::Options options;
  options.bootstrap = argv[1];
  options.topic = argv[2];
  options.group_id = argv[3];
  options.streams = {{argv[4], mode}};  // subscribes to this stream's topic only
  // The process exits right after Close(): let Close() wait for the whole group leave, so that a
  // leave held back by a rebalance is not cut short (the group would wait for this member's
  // session). It takes milliseconds otherwise.
  options.close_wait = options.close_timeout;
  for (int i = 8; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "expected property=value, not %s\n", kv.c_str());
      return 1;
    }
    options.properties[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  struct sigaction stop = {};
  stop.sa_handler = OnStopSignal;
  sigemptyset(&stop.sa_mask);
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
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
  // Short waits, so that a stop signal is seen within a fifth of a second.
  const auto step = std::min(idle, std::chrono::milliseconds(200));
  long long printed = 0;
  auto stopped = [] { return stop_signal != 0; };
  auto stopped_by = [] { return stop_signal == SIGTERM ? "SIGTERM" : "SIGINT"; };
  // The next ID as text: 64-bit streams through Next (in decimal), 128-bit ones (uuid7, ulid)
  // through NextText (canonical text); each refuses the other kind of stream.
  auto next = [&](std::chrono::milliseconds timeout) -> kleaf::ClientResult<std::string> {
    if (kleaf::Is128Bit(mode)) return (*consumer)->NextText(argv[4], mode, timeout);
    auto id = (*consumer)->Next(argv[4], mode, timeout);
    if (!id) return std::unexpected(std::move(id.error()));
    return std::to_string(*id);
  };
  while (count == 0 || printed < count) {
    auto waited = std::chrono::milliseconds(0);
    auto id = next(step);
    for (waited += step; !id && id.error().kind == kleaf::ClientError::Kind::kTimeout &&
                         waited < idle && !stopped();
         waited += step) {
      report();
      id = next(step);
    }
    if (id) {
      std::printf("%s\n", id->c_str());
      std::fflush(stdout);
      ++printed;
      report();
    }
    if (stopped()) return Finish(**consumer, printed, stopped_by(), 0);
    if (!id && id.error().kind == kleaf::ClientError::Kind::kRejected) {
      std::fprintf(stderr, "refused: %s\n", id.error().message.c_str());
      return Finish(**consumer, printed, "foreign_group", 3);
    }
    if (!id) {
      std::fprintf(stderr, "%s\n", id.error().message.c_str());
      return Finish(**consumer, printed, "idle", count == 0 ? 0 : 2);
    }
  }
  return Finish(**consumer, printed, "count", 0);
}
