// UUIDv7 (RFC 9562) and ULID: 128-bit time-ordered IDs built from the node's snowflake draws, so
// the worker lease, the clock guard and the durable timestamp mark that keep snowflake IDs unique
// (I3) keep these unique too.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "snowflake/snowflake.h"

namespace kleaf::snowflake {

// 128 bits, most significant first: compares like the IDs' text (both formats sort as bytes).
struct Id128 {
  uint64_t high = 0;
  uint64_t low = 0;
  auto operator<=>(const Id128&) const = default;
};

enum class Id128Kind {
  // RFC 9562 UUIDv7: unix_ts_ms (48) | ver 0111 | rand_a (12) | var 10 | rand_b (62), written
  // 8-4-4-4-12 in lowercase hex.
  kUuid7,
  // ULID: 48-bit Unix milliseconds | 80 bits, written in Crockford base32 (26 characters).
  kUlid,
};

// How a snowflake draw fills the 128 bits. The bits after the timestamp and the UUID's version
// and variant (74 for UUIDv7: rand_a then rand_b; 80 for ULID) hold, from the top:
//   counter   the draw's snowflake sequence (sequence_bits; 12 by default, for UUIDv7 exactly
//             rand_a: RFC 9562 section 6.2, method 1, a fixed-length dedicated counter),
//   worker    the draw's worker id (worker_bits; 10 by default), the node's leased worker id,
//   random    the rest (52 bits for UUIDv7, 58 for ULID by default), from the OS's CSPRNG.
// The timestamp is the Unix millisecond where the draw's snowflake tick starts (the time itself
// with the default 1 ms time unit). So (timestamp, counter, worker) is the snowflake ID itself:
// two of these IDs are equal only if two snowflake draws were, which I3 rules out, and within a
// node they increase in the order drawn, because snowflake IDs do. Immutable; any thread.
class Id128Layout {
 public:
  Id128Layout(Id128Kind kind, const SnowflakeLayout& snowflake);

  struct Parts {
    int64_t timestamp_ms = 0;
    int64_t counter = 0;
    int64_t worker_id = 0;
  };

  // The ID of the snowflake draw `snowflake_id` with `random`'s low bits in the random field.
  // kResourceExhausted past the 48-bit timestamp (the year 10889).
  [[nodiscard]] Result<Id128> FromSnowflake(int64_t snowflake_id, Id128 random) const;
  // The smallest ID of the millisecond `ms` (counter, worker and random bits 0): every ID issued
  // in that millisecond or later is >= it, every one issued before it is below it. With a time
  // unit above 1 ms, `ms` is first rounded down to the start of its snowflake tick, as issued IDs
  // are. kInvalidArgument, naming the range, outside [0, 2^48) milliseconds.
  [[nodiscard]] Result<Id128> FirstAt(int64_t ms) const;
  Parts Split(Id128 id) const;

  std::string Format(Id128 id) const;
  // The canonical text (UUID: hex digits in either case; ULID: Crockford base32 in either case,
  // I/L read as 1 and O as 0); for UUIDv7 the version and variant must be 7 and RFC 9562's.
  [[nodiscard]] Result<Id128> Parse(std::string_view text) const;

  Id128Kind kind() const { return kind_; }
  // Bits after the timestamp (and the UUID's version and variant): 74 or 80.
  int tail_bits() const { return kind_ == Id128Kind::kUuid7 ? 74 : 80; }
  int counter_bits() const { return counter_bits_; }
  int worker_bits() const { return worker_bits_; }
  int random_bits() const { return tail_bits() - counter_bits_ - worker_bits_; }
  // "uuid7" or "ulid": the route and the metric's mode.
  std::string_view name() const { return kind_ == Id128Kind::kUuid7 ? "uuid7" : "ulid"; }

  static constexpr int64_t kMaxTimestampMs = (int64_t{1} << 48) - 1;

 private:
  Id128Kind kind_;
  SnowflakeLayout snowflake_;
  int counter_bits_;
  int worker_bits_;
};

// Parses a time (RFC 3339 or epoch milliseconds, ParseTimeMs) and answers the first ID of it
// (Id128Layout::FirstAt) as JSON: {"id":"…"}.
[[nodiscard]] Result<std::string> ComposeToJson(const Id128Layout& layout,
                                                std::string_view time_text);

// Draws `count` snowflake IDs from `generator` (the node's, shared with the snowflake routes: one
// sequence per node and tick for all three kinds) and appends the 128-bit IDs they make to `out`
// (all or nothing). The generator's rules apply unchanged: clock moved back a little → wait; more
// → kUnavailable; sequence of a tick used up → the next tick (the counter never wraps within a
// millisecond); lease in doubt → kUnavailable.
[[nodiscard]] Result<void> NextId128Batch(SnowflakeGenerator& generator, const Id128Layout& layout,
                                          int64_t count, std::vector<Id128>& out);

}  // namespace kleaf::snowflake
