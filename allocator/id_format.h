// The keyed permutations that make a tag's segment IDs non-countable (issue 17). Segments stay
// plain ranges of counters (docs/architecture.md, I1 and I2 untouched); a gateway maps each counter
// to the ID a client gets when it hands the counter out. Pure code, no I/O besides NewIdKey's
// random device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "allocator/datacenter.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// A 128-bit permutation key.
struct IdKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool operator==(const IdKey&) const = default;
};

// SipHash-2-4 of one 64-bit word (its 8 little-endian bytes), keyed by `key`.
uint64_t SipHash64(const IdKey& key, uint64_t word);

// A keyed permutation of [0, 2^width), 2 <= width <= 64: a Feistel network of kRounds rounds
// whose halves are floor(width/2) and ceil(width/2) bits (they swap each round, so an uneven
// width needs no cycle-walking), with SipHash-2-4 of (half, round, width) as round function.
class FeistelPermutation {
 public:
  static constexpr int kRounds = 8;  // even: the halves are back in place after the last round
  FeistelPermutation(IdKey key, int width);
  uint64_t Forward(uint64_t x) const;
  uint64_t Backward(uint64_t y) const;
  int width() const { return width_; }

 private:
  uint64_t Round(int round, uint64_t half) const;
  const IdKey key_;
  const int width_;
};

// A permutation of [0, n), 0 < n <= 2^width, by cycle-walking a FeistelPermutation: applied
// again until the value lands below n. Every x < n lies on a cycle of the permutation, so the
// walk ends, and the first value below n is a bijection of [0, n) (expected 2^width / n steps).
class BoundedPermutation {
 public:
  BoundedPermutation(IdKey key, int width, uint64_t n) : feistel_(key, width), n_(n) {}
  uint64_t Forward(uint64_t x) const;
  uint64_t Backward(uint64_t y) const;
  uint64_t size() const { return n_; }

 private:
  const FeistelPermutation feistel_;
  const uint64_t n_;
};

// The layout of IdMode::kObfuscatedTime: 20 bits of hours since 2020-01-01T00:00Z (until 2139),
// then 43 bits holding 1 + the permuted counter.
inline constexpr int64_t kTimePrefixEpochMs = 1577836800000;
inline constexpr int64_t kTimePrefixPeriodMs = 3600000;
inline constexpr int kTimeCounterBits = 43;
inline constexpr int kTimePrefixBits = 63 - kTimeCounterBits;
// Counters a kObfuscatedTime tag has from its id_base on, over its whole life (not per hour:
// the counter is the tag's segment counter, never reset).
inline constexpr int64_t kTimeCounterCapacity = (int64_t{1} << kTimeCounterBits) - 1;

// How the counters of one tag's segments become IDs. Immutable; shared by the segments of the
// tag that carry it.
//  - kObfuscated: ID = id_base + 1 + P(counter - id_base), P a permutation of [0, 2^63 - 1 -
//    id_base): every ID in [id_base + 1, 2^63 - 1], above every plain ID the tag had.
//  - kObfuscatedTime: ID = hour << 43 | (1 + P(counter - id_base)), P a permutation of
//    [0, 2^43 - 1). Unique because P is (the hour does not matter); refused when it would not be
//    above id_base (a clock before the switch from plain), before 2020-01-01T01:00Z or after 2139.
//  - kPlain in datacenter `dc` of more than one (PlainIn): ID = counter * dc.count + dc.index
//    (datacenter.h), the datacenter's own residue class. Attached by the rules when they reserve
//    the segment (ApplyDatacenter): a tag's record does not hold it.
class IdFormat {
 public:
  // The format of `record`'s segments; null for kPlain. kInternal for a malformed key.
  [[nodiscard]] static Result<std::shared_ptr<const IdFormat>> Of(const state::TagRecord& record);
  // The format of plain segments in datacenter `dc`; null in a single datacenter (IDs are the
  // counters).
  static std::shared_ptr<const IdFormat> PlainIn(const Datacenter& dc);
  const Datacenter& datacenter() const { return dc_; }

  state::IdMode mode() const { return mode_; }
  int64_t base() const { return base_; }
  // Segments of this format end at or below this counter (exclusive).
  int64_t counter_limit() const;
  // The ID of `counter` handed out at wall time `now_ms` (kObfuscatedTime only uses the time).
  [[nodiscard]] Result<int64_t> Map(int64_t counter, int64_t now_ms) const;
  // The counter of an ID of this format (for tests, and for an operator holding the key).
  [[nodiscard]] Result<int64_t> Unmap(int64_t id) const;
  bool operator==(const IdFormat& o) const {
    return mode_ == o.mode_ && key_ == o.key_ && base_ == o.base_ && dc_ == o.dc_;
  }
  // Writes mode, key and base into `record` (the allocator's segment replies carry them).
  void WriteTo(state::TagRecord& record) const;

 private:
  IdFormat(state::IdMode mode, IdKey key, std::string key_hex, int64_t base, Datacenter dc = {});
  const state::IdMode mode_;
  const std::string key_hex_;
  const IdKey key_;
  const int64_t base_;
  const Datacenter dc_;  // kPlain only: the residue class IDs are put in
  const BoundedPermutation permutation_;
};

// A new key, 32 hex digits from std::random_device.
std::string NewIdKey();
[[nodiscard]] Result<IdKey> ParseIdKey(std::string_view hex);

}  // namespace kleaf::allocator
