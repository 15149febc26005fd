// Snowflake IDs: the bit layout (timestamp | worker | sequence under a zero sign bit) and the
// generator that issues IDs for one worker id with Leaf's clock-rollback rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"

namespace kleaf::snowflake {

// Immutable after Make(). Bits add up to 63, so every ID is a non-negative int64.
class SnowflakeLayout {
 public:
  struct Parts {
    int64_t timestamp_ms;
    int64_t worker_id;
    int64_t sequence;
  };

  // Validates: bits add up to 63, each part at least 1 bit, epoch not after `now_ms`, time unit >= 1.
  [[nodiscard]] static Result<SnowflakeLayout> Make(int timestamp_bits, int worker_bits,
                                                    int sequence_bits, int64_t epoch_ms,
                                                    int64_t time_unit_ms, int64_t now_ms);
  static SnowflakeLayout Default();  // 41/10/12, epoch 1288834974657, 1 ms

  int64_t Compose(int64_t ticks, int64_t worker_id, int64_t sequence) const {
    return (ticks << (worker_bits_ + sequence_bits_)) | (worker_id << sequence_bits_) | sequence;
  }
  // Fails for a negative ID.
  [[nodiscard]] Result<Parts> Decode(int64_t id) const;
  // The smallest ID of the tick holding the wall-clock time `ms` (worker 0, sequence 0): every ID
  // issued at `ms` or later is >= it, every ID issued before its tick is below it, so
  // `id >= FirstIdAt(t0) AND id < FirstIdAt(t1)` selects IDs by time (to the time unit).
  // kInvalidArgument, naming the layout's range, for a time before the epoch or past last_ms().
  [[nodiscard]] Result<int64_t> FirstIdAt(int64_t ms) const;

  // Ticks (time units since the epoch) of a wall-clock time, and back.
  int64_t TicksOf(int64_t ms) const { return (ms - epoch_ms_) / time_unit_ms_; }
  // Saturates at INT64_MAX: a wide layout with a long time unit (61 timestamp bits of minutes)
  // outruns 64-bit milliseconds, and its end must read as "never", not as a wrapped date.
  int64_t MsOf(int64_t ticks) const {
    int64_t ms = 0;
    if (__builtin_mul_overflow(ticks, time_unit_ms_, &ms) ||
        __builtin_add_overflow(ms, epoch_ms_, &ms)) {
      return std::numeric_limits<int64_t>::max();
    }
    return ms;
  }

  int64_t max_ticks() const { return (int64_t{1} << timestamp_bits_) - 1; }
  int64_t max_worker_id() const { return (int64_t{1} << worker_bits_) - 1; }
  int64_t max_sequence() const { return (int64_t{1} << sequence_bits_) - 1; }
  int64_t epoch_ms() const { return epoch_ms_; }
  int64_t time_unit_ms() const { return time_unit_ms_; }
  // The last wall-clock millisecond this layout can encode.
  int64_t last_ms() const { return MsOf(max_ticks()); }

 private:
  SnowflakeLayout(int t, int w, int s, int64_t epoch, int64_t unit)
      : timestamp_bits_(t), worker_bits_(w), sequence_bits_(s), epoch_ms_(epoch), time_unit_ms_(unit) {}
  int timestamp_bits_;
  int worker_bits_;
  int sequence_bits_;
  int64_t epoch_ms_;
  int64_t time_unit_ms_;
};

// Parses a decimal ID and describes it as JSON:
// {"id":"…","timestamp_ms":…,"time":"…Z","worker_id":…,"sequence":…}.
[[nodiscard]] Result<std::string> DecodeToJson(const SnowflakeLayout& layout,
                                               std::string_view id_text);
// The same as Leaf's /decodeSnowflakeId answers it, every value a string:
// {"timestamp":"<ms>(yyyy-MM-dd HH:mm:ss.SSS)","sequenceId":"…","workerId":"…"}, the time in UTC
// (Leaf wrote its JVM's time zone). Errors name the parameter `snowflakeId`.
[[nodiscard]] Result<std::string> DecodeToLeafJson(const SnowflakeLayout& layout,
                                                   std::string_view id_text);

// Parses a time (RFC 3339 or epoch milliseconds, ParseTimeMs) and answers the first ID of it
// (SnowflakeLayout::FirstIdAt) as JSON: {"id":"…"}.
[[nodiscard]] Result<std::string> ComposeToJson(const SnowflakeLayout& layout,
                                                std::string_view time_text);

// Issues snowflake IDs for one worker id. Thread-safe (one mutex; IDs strictly increase in the
// order they are issued). Guarantees, for the lifetime of the object:
// - never a timestamp at or below the floor given by SetFloorMs (the durable high-water mark of
//   the previous run) and never above the limit given by SetLimitMs (the durable reservation);
// - timestamps never go back: clock moved back by <= max_backward_ms -> wait; more -> kUnavailable;
// - timestamp bits used up -> kResourceExhausted, never a negative ID.
class SnowflakeGenerator {
 public:
  struct Options {
    int64_t worker_id = 0;
    bool random_sequence_start = true;  // sequence starts at a random value in [0,100) per tick
    int64_t max_backward_ms = 5;
  };

  SnowflakeGenerator(SnowflakeLayout layout, Options options, Clock& clock);

  [[nodiscard]] Result<int64_t> Next();
  // Appends `count` IDs to `out` (all or nothing).
  [[nodiscard]] Result<void> NextBatch(int64_t count, std::vector<int64_t>& out);

  // No ID will carry a timestamp at or before `ms`.
  void SetFloorMs(int64_t ms);
  // No ID will carry a timestamp after `ms` until the limit is raised (kUnavailable meanwhile).
  void SetLimitMs(int64_t ms) { limit_ms_.store(ms, std::memory_order_release); }
  // No ID is issued once the monotonic clock reaches `ns` (the worker lease is then in doubt)
  // until a later deadline is set.
  void SetLeaseDeadlineNs(int64_t ns) { lease_deadline_ns_.store(ns, std::memory_order_release); }
  // No ID will carry a timestamp after `ms`, the end of the worker lease by the allocator's clock
  // (kUnavailable meanwhile), whatever this node's wall clock reads.
  void SetLeaseEndMs(int64_t ms) { lease_end_ms_.store(ms, std::memory_order_release); }
  // Wall-clock ms of the newest timestamp issued (or of the floor), for persisting.
  int64_t last_ms() const;
  // Wall-clock ms of the start of the newest tick issued (or of the floor), for the registry.
  int64_t last_tick_ms() const;
  const SnowflakeLayout& layout() const { return layout_; }
  int64_t worker_id() const { return options_.worker_id; }

 private:
  [[nodiscard]] Result<int64_t> NextLocked() KLEAF_REQUIRES(mu_);

  const SnowflakeLayout layout_;
  const Options options_;
  Clock& clock_;
  std::atomic<int64_t> limit_ms_;
  std::atomic<int64_t> lease_deadline_ns_;
  std::atomic<int64_t> lease_end_ms_;
  // kleaf_snowflake_clock_backward_total: draws that found the clock behind the last timestamp
  // issued and waited it out, or refused (503).
  metrics::Counter& clock_back_waited_;
  metrics::Counter& clock_back_refused_;
  mutable Mutex mu_;
  int64_t last_ticks_ KLEAF_GUARDED_BY(mu_) = -1;
  int64_t last_backward_log_ms_ KLEAF_GUARDED_BY(mu_) = 0;  // when a clock step back was logged
  int64_t sequence_ KLEAF_GUARDED_BY(mu_) = 0;
  std::minstd_rand rng_ KLEAF_GUARDED_BY(mu_);
};

}  // namespace kleaf::snowflake
