#include "snowflake/snowflake.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <limits>
#include <stdexcept>

namespace kleaf::snowflake {

namespace {

metrics::Counter& ClockBackward(const std::string& outcome) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_snowflake_clock_backward_total",
      "Snowflake draws that found the wall clock behind the last timestamp issued: waited (back "
      "by at most snowflake.max_backward_ms) or refused (503).",
      {{"outcome", outcome}});
}

}  // namespace

Result<SnowflakeLayout> SnowflakeLayout::Make(int timestamp_bits, int worker_bits,
                                              int sequence_bits, int64_t epoch_ms,
                                              int64_t time_unit_ms, int64_t now_ms) {
  if (timestamp_bits < 1 || worker_bits < 1 || sequence_bits < 1 ||
      timestamp_bits + worker_bits + sequence_bits != 63) {
    return Fail(Code::kInvalidArgument,
                "snowflake layout: timestamp, worker and sequence bits must each be >= 1 and add "
                "up to 63");
  }
  if (time_unit_ms < 1) return Fail(Code::kInvalidArgument, "snowflake layout: time unit must be >= 1 ms");
  if (epoch_ms < 0 || epoch_ms > now_ms) {
    return Fail(Code::kInvalidArgument, "snowflake layout: epoch must be between 0 and now");
  }
  return SnowflakeLayout(timestamp_bits, worker_bits, sequence_bits, epoch_ms, time_unit_ms);
}

SnowflakeLayout SnowflakeLayout::Default() {
  return SnowflakeLayout(41, 10, 12, 1288834974657, 1);
}

Result<SnowflakeLayout::Parts> SnowflakeLayout::Decode(int64_t id) const {
  if (id < 0) return Fail(Code::kInvalidArgument, "a snowflake ID is a non-negative 64-bit integer");
  Parts p;
  p.sequence = id & max_sequence();
  p.worker_id = (id >> sequence_bits_) & max_worker_id();
  p.timestamp_ms = MsOf(id >> (sequence_bits_ + worker_bits_));
  return p;
}

Result<int64_t> SnowflakeLayout::FirstIdAt(int64_t ms) const {
  // The last millisecond of the last tick, saturated (MsOf): a wide layout can outrun int64 ms.
  int64_t end_ms = 0;
  if (__builtin_add_overflow(last_ms(), time_unit_ms_ - 1, &end_ms)) {
    end_ms = std::numeric_limits<int64_t>::max();
  }
  if (ms < epoch_ms_ || ms > end_ms) {
    return Fail(Code::kInvalidArgument,
                "time: outside the snowflake layout's range, " + FormatUtcMs(epoch_ms_) + " (" +
                    std::to_string(epoch_ms_) + ") to " + FormatUtcMs(end_ms) + " (" +
                    std::to_string(end_ms) + "), epoch milliseconds in brackets");
  }
  return Compose(TicksOf(ms), 0, 0);
}

Result<std::string> ComposeToJson(const SnowflakeLayout& layout, std::string_view time_text) {
  auto ms = ParseTimeMs(time_text);
  if (!ms) return std::unexpected(ms.error());
  auto id = layout.FirstIdAt(*ms);
  if (!id) return std::unexpected(id.error());
  return "{\"id\":\"" + std::to_string(*id) + "\"}";
}

namespace {

// A decimal snowflake ID; `name` (the parameter) names it in the error.
[[nodiscard]] Result<int64_t> ParseId(std::string_view text, std::string_view name) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || id < 0) {
    return Fail(Code::kInvalidArgument,
                std::string(name) + ": expected a non-negative 64-bit decimal integer");
  }
  return id;
}

}  // namespace

Result<std::string> DecodeToJson(const SnowflakeLayout& layout, std::string_view id_text) {
  auto id = ParseId(id_text, "id");
  if (!id) return std::unexpected(id.error());
  auto parts = layout.Decode(*id);
  if (!parts) return std::unexpected(parts.error());
  return "{\"id\":\"" + std::to_string(*id) +
         "\",\"timestamp_ms\":" + std::to_string(parts->timestamp_ms) + ",\"time\":\"" +
         FormatUtcMs(parts->timestamp_ms) + "\",\"worker_id\":" + std::to_string(parts->worker_id) +
         ",\"sequence\":" + std::to_string(parts->sequence) + "}";
}

Result<std::string> DecodeToLeafJson(const SnowflakeLayout& layout, std::string_view id_text) {
  auto id = ParseId(id_text, "snowflakeId");
  if (!id) return std::unexpected(id.error());
  auto parts = layout.Decode(*id);
  if (!parts) return std::unexpected(parts.error());
  // Leaf's "yyyy-MM-dd HH:mm:ss.SSS": FormatUtcMs's "yyyy-MM-ddTHH:mm:ss.SSSZ" without T and Z.
  std::string time = FormatUtcMs(parts->timestamp_ms);
  if (auto t = time.find('T'); t != std::string::npos) time[t] = ' ';
  if (time.ends_with('Z')) time.pop_back();
  return "{\"timestamp\":\"" + std::to_string(parts->timestamp_ms) + "(" + time +
         ")\",\"sequenceId\":\"" + std::to_string(parts->sequence) + "\",\"workerId\":\"" +
         std::to_string(parts->worker_id) + "\"}";
}

SnowflakeGenerator::SnowflakeGenerator(SnowflakeLayout layout, Options options, Clock& clock)
    : layout_(layout),
      options_(options),
      clock_(clock),
      limit_ms_(std::numeric_limits<int64_t>::max()),
      lease_deadline_ns_(std::numeric_limits<int64_t>::max()),
      lease_end_ms_(std::numeric_limits<int64_t>::max()),
      clock_back_waited_(ClockBackward("waited")),
      clock_back_refused_(ClockBackward("refused")),
      rng_(std::random_device{}()) {
  if (options_.worker_id < 0 || options_.worker_id > layout_.max_worker_id()) {
    // It would spill into the timestamp bits and collide with other workers: a wiring bug.
    throw std::invalid_argument("snowflake worker id " + std::to_string(options_.worker_id) +
                                " does not fit the layout's worker bits");
  }
}

void SnowflakeGenerator::SetFloorMs(int64_t ms) {
  MutexLock lock(mu_);
  int64_t ticks = layout_.TicksOf(ms);
  if (ticks >= last_ticks_) {
    last_ticks_ = ticks;
    sequence_ = layout_.max_sequence();  // the floor's tick itself is used up
  }
}

int64_t SnowflakeGenerator::last_ms() const {
  MutexLock lock(mu_);
  // The last millisecond of the newest tick, so a floor set from it excludes the whole tick.
  return last_ticks_ < 0 ? 0 : layout_.MsOf(last_ticks_) + layout_.time_unit_ms() - 1;
}

int64_t SnowflakeGenerator::last_tick_ms() const {
  MutexLock lock(mu_);
  return last_ticks_ < 0 ? 0 : layout_.MsOf(last_ticks_);
}

Result<int64_t> SnowflakeGenerator::Next() {
  MutexLock lock(mu_);
  return NextLocked();
}

Result<void> SnowflakeGenerator::NextBatch(int64_t count, std::vector<int64_t>& out) {
  MutexLock lock(mu_);
  const size_t before = out.size();
  out.reserve(before + count);
  for (int64_t i = 0; i < count; ++i) {
    auto id = NextLocked();
    if (!id) {
      out.resize(before);
      return std::unexpected(id.error());
    }
    out.push_back(*id);
  }
  return {};
}

// Reads better whole: the checks an ID passes, in order, on locals committed only at the end.
Result<int64_t> SnowflakeGenerator::NextLocked() {
  // Works on locals and commits last_ticks_/sequence_ only once every check has passed, so a
  // refused call never changes what the next call may issue.
  if (lease_deadline_ns_.load(std::memory_order_acquire) != std::numeric_limits<int64_t>::max() &&
      clock_.MonotonicNs() >= lease_deadline_ns_.load(std::memory_order_acquire)) {
    return Fail(Code::kUnavailable,
                "worker id lease not renewed in time (allocators or Kafka unreachable); retry");
  }
  int64_t now_ms = clock_.NowMs();
  if (now_ms < layout_.epoch_ms()) {
    return Fail(Code::kUnavailable, "clock is before the snowflake epoch");
  }
  int64_t ticks = layout_.TicksOf(now_ms);
  if (ticks < last_ticks_) {
    int64_t back_ms = layout_.MsOf(last_ticks_) - now_ms;
    // Once per second at most: a clock that stays behind would otherwise log on every request.
    if (now_ms - last_backward_log_ms_ >= 1000 || now_ms < last_backward_log_ms_) {
      last_backward_log_ms_ = now_ms;
      spdlog::warn("[snowflake] clock moved back by {} ms ({})", back_ms,
                   back_ms > options_.max_backward_ms ? "refusing to issue" : "waiting it out");
    }
    if (back_ms > options_.max_backward_ms) {
      clock_back_refused_.Inc();
      return Fail(Code::kUnavailable,
                  "clock moved backwards by " + std::to_string(back_ms) + " ms; refusing to issue");
    }
    clock_.SleepFor(std::chrono::milliseconds(back_ms));
    ticks = layout_.TicksOf(clock_.NowMs());
    if (ticks < last_ticks_) {
      clock_back_refused_.Inc();
      return Fail(Code::kUnavailable, "clock moved backwards and has not caught up; retry");
    }
    clock_back_waited_.Inc();
  }
  int64_t sequence = 0;
  if (ticks == last_ticks_ && sequence_ < layout_.max_sequence()) {
    sequence = sequence_ + 1;
  } else {
    // This tick's sequence is used up: wait for the next tick.
    while (ticks <= last_ticks_) {
      clock_.SleepFor(std::chrono::nanoseconds(0));
      ticks = layout_.TicksOf(clock_.NowMs());
      if (ticks < last_ticks_) {
        clock_back_refused_.Inc();
        return Fail(Code::kUnavailable, "clock moved backwards while waiting; retry");
      }
    }
    sequence = options_.random_sequence_start ? static_cast<int64_t>(rng_() % 100) : 0;
    sequence &= layout_.max_sequence();
  }
  if (ticks > layout_.max_ticks()) {
    return Fail(Code::kResourceExhausted,
                "snowflake timestamp bits are used up: the layout ends at epoch + " +
                    std::to_string(layout_.max_ticks()) + " time units");
  }
  if (layout_.MsOf(ticks) > limit_ms_.load(std::memory_order_acquire)) {
    return Fail(Code::kUnavailable, "snowflake timestamp not yet durably reserved; retry");
  }
  if (layout_.MsOf(ticks) > lease_end_ms_.load(std::memory_order_acquire)) {
    return Fail(Code::kUnavailable,
                "this node's clock is past the end of its worker id lease by the allocator's clock "
                "(clock jumped forward?); retry");
  }
  last_ticks_ = ticks;
  sequence_ = sequence;
  return layout_.Compose(ticks, options_.worker_id, sequence);
}

}  // namespace kleaf::snowflake
