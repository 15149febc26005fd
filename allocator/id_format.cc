#include "allocator/id_format.h"

#include <bit>
#include <cstdio>
#include <limits>
#include <random>
#include <utility>

#include "base/clock.h"

namespace kleaf::allocator {
namespace {

constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();  // 2^63 - 1

uint64_t Mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }
  void Compress(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t SipHash64(const IdKey& key, uint64_t word) {
  SipState s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL,
             key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};
  s.Compress(word);
  s.Compress(uint64_t{8} << 56);  // the final block: the length (8 bytes), no tail
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

FeistelPermutation::FeistelPermutation(IdKey key, int width) : key_(key), width_(width) {}

uint64_t FeistelPermutation::Round(int round, uint64_t half) const {
  return SipHash64(key_, half | (uint64_t(round) << 40) | (uint64_t(width_) << 48));
}

// x = hi | lo with hi of `hb` bits above lo of `lb` bits. A round makes (lo, hi ^ F(lo)): the old
// low half moves up, so the widths swap.
uint64_t FeistelPermutation::Forward(uint64_t x) const {
  int hb = width_ / 2;
  int lb = width_ - hb;
  x &= Mask(width_);
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t hi = x >> lb;
    const uint64_t lo = x & Mask(lb);
    x = (lo << hb) | ((hi ^ Round(i, lo)) & Mask(hb));
    std::swap(hb, lb);
  }
  return x;
}

uint64_t FeistelPermutation::Backward(uint64_t y) const {
  int hb = width_ / 2;  // kRounds is even: the widths after the last round are the first ones
  int lb = width_ - hb;
  y &= Mask(width_);
  for (int i = kRounds - 1; i >= 0; --i) {
    // Before round i the widths were (lb, hb): y = lo_before (lb' = hb bits) | hi_before ^ F.
    const uint64_t lo_before = y >> lb;
    const uint64_t hi_before = (y & Mask(lb)) ^ (Round(i, lo_before) & Mask(lb));
    y = (hi_before << hb) | lo_before;
    std::swap(hb, lb);
  }
  return y;
}

uint64_t BoundedPermutation::Forward(uint64_t x) const {
  uint64_t y = feistel_.Forward(x);
  while (y >= n_) y = feistel_.Forward(y);
  return y;
}

uint64_t BoundedPermutation::Backward(uint64_t y) const {
  uint64_t x = feistel_.Backward(y);
  while (x >= n_) x = feistel_.Backward(x);
  return x;
}

IdFormat::IdFormat(state::IdMode mode, IdKey key, std::string key_hex, int64_t base, Datacenter dc)
    : mode_(mode),
      key_hex_(std::move(key_hex)),
      key_(key),
      base_(base),
      dc_(dc),
      permutation_(key, mode == state::IdMode::kObfuscatedTime ? kTimeCounterBits : 63,
                   mode == state::IdMode::kObfuscatedTime ? uint64_t(kTimeCounterCapacity)
                                                          : uint64_t(kMaxId - base)) {}

Result<std::shared_ptr<const IdFormat>> IdFormat::Of(const state::TagRecord& record) {
  if (record.id_mode == state::IdMode::kPlain) return std::shared_ptr<const IdFormat>();
  auto key = ParseIdKey(record.id_key);
  if (!key) {
    return Fail(Code::kInternal, "tag '" + record.tag + "': " + key.error().message);
  }
  if (record.id_base < 0 || record.id_base >= (int64_t{1} << 62)) {
    return Fail(Code::kInternal, "tag '" + record.tag + "': id_base out of range");
  }
  return std::shared_ptr<const IdFormat>(
      new IdFormat(record.id_mode, *key, record.id_key, record.id_base));
}

std::shared_ptr<const IdFormat> IdFormat::PlainIn(const Datacenter& dc) {
  if (dc.single()) return nullptr;
  return std::shared_ptr<const IdFormat>(new IdFormat(state::IdMode::kPlain, IdKey{}, "", 0, dc));
}

void IdFormat::WriteTo(state::TagRecord& record) const {
  record.id_mode = mode_;
  record.id_key = key_hex_;
  record.id_base = base_;
}

int64_t IdFormat::counter_limit() const {
  if (mode_ == state::IdMode::kPlain) return MaxSegmentCounter(dc_) + 1;
  if (mode_ == state::IdMode::kObfuscatedTime) return base_ + kTimeCounterCapacity;
  return kMaxId;
}

Result<int64_t> IdFormat::Map(int64_t counter, int64_t now_ms) const {
  if (mode_ == state::IdMode::kPlain) {
    if (counter < 0 || counter > MaxSegmentCounter(dc_)) {
      return Fail(Code::kResourceExhausted, "counter " + std::to_string(counter) +
                                                " has no ID in " + dc_.Describe() +
                                                " (the tag used up its ID space); use a new tag");
    }
    return SegmentIdOf(dc_, counter);
  }
  if (counter < base_ || counter - base_ >= int64_t(permutation_.size())) {
    return Fail(Code::kResourceExhausted, "counter " + std::to_string(counter) +
                                              " is outside this tag's " + state::IdModeName(mode_) +
                                              " range (from id_base " + std::to_string(base_) +
                                              ", " + std::to_string(permutation_.size()) + " IDs)");
  }
  const int64_t p = int64_t(permutation_.Forward(uint64_t(counter - base_)));
  if (mode_ == state::IdMode::kObfuscated) return base_ + 1 + p;
  const int64_t hour =
      now_ms < kTimePrefixEpochMs ? 0 : (now_ms - kTimePrefixEpochMs) / kTimePrefixPeriodMs;
  if (hour < 1 || hour >= (int64_t{1} << kTimePrefixBits)) {
    return Fail(Code::kUnavailable,
                "obfuscated_time IDs need a clock between 2020-01-01T01:00Z and "
                "2139; this node's clock says " +
                    FormatUtcMs(now_ms));
  }
  const int64_t id = (hour << kTimeCounterBits) | (p + 1);
  if (id < base_) {
    // The tag had plain IDs up to id_base: an ID below it could repeat one. Refused, loudly.
    return Fail(Code::kFailedPrecondition,
                "obfuscated_time ID " + std::to_string(id) + " would be below the tag's id_base " +
                    std::to_string(base_) + " (its plain IDs end there): this node's clock (" +
                    FormatUtcMs(now_ms) + ") is before the switch to obfuscated_time");
  }
  return id;
}

Result<int64_t> IdFormat::Unmap(int64_t id) const {
  if (mode_ == state::IdMode::kPlain) {
    if (id < 0 || id % dc_.count != dc_.index) {
      return Fail(Code::kInvalidArgument,
                  "not an ID of " + dc_.Describe() + ": " + std::to_string(id));
    }
    return id / dc_.count;
  }
  int64_t p = 0;
  if (mode_ == state::IdMode::kObfuscated) {
    p = id - base_ - 1;
  } else {
    p = (id & int64_t(Mask(kTimeCounterBits))) - 1;
  }
  if (id <= 0 || p < 0 || uint64_t(p) >= permutation_.size()) {
    return Fail(Code::kInvalidArgument, "not an ID of this format: " + std::to_string(id));
  }
  return base_ + int64_t(permutation_.Backward(uint64_t(p)));
}

std::string NewIdKey() {
  std::random_device device;
  char hex[33];
  uint32_t words[4];
  for (auto& w : words) w = device();
  std::snprintf(hex, sizeof(hex), "%08x%08x%08x%08x", words[0], words[1], words[2], words[3]);
  return std::string(hex, 32);
}

Result<IdKey> ParseIdKey(std::string_view hex) {
  if (hex.size() != 32) return Fail(Code::kInvalidArgument, "id_key: expected 32 hex digits");
  IdKey key;
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    uint64_t v = 0;
    if (c >= '0' && c <= '9') {
      v = uint64_t(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = uint64_t(c - 'a' + 10);
    } else {
      return Fail(Code::kInvalidArgument, "id_key: expected 32 lowercase hex digits");
    }
    uint64_t& word = i < 16 ? key.k0 : key.k1;
    word = (word << 4) | v;
  }
  return key;
}

}  // namespace kleaf::allocator
