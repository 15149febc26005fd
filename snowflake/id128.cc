#include "snowflake/id128.h"

#include <sys/random.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace kleaf::snowflake {
namespace {

__extension__ using U128 = unsigned __int128;

U128 Join(Id128 id) { return (U128{id.high} << 64) | id.low; }
Id128 SplitBits(U128 v) { return {static_cast<uint64_t>(v >> 64), static_cast<uint64_t>(v)}; }
U128 Mask(int bits) { return bits >= 128 ? ~U128{0} : (U128{1} << bits) - 1; }

constexpr int kRandBBits = 62;
constexpr U128 kUuidVersion = U128{7} << 76;
constexpr U128 kUuidVariant = U128{2} << 62;  // 0b10: RFC 9562's variant
constexpr U128 kUuidVersionVariantMask = (U128{0xF} << 76) | (U128{3} << 62);
constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// The 128 bits of a timestamp and the tail (tail_bits long) of `kind`.
U128 Assemble(Id128Kind kind, int64_t timestamp_ms, U128 tail) {
  const U128 ts = U128{static_cast<uint64_t>(timestamp_ms)} << 80;
  if (kind == Id128Kind::kUlid) return ts | tail;
  return ts | kUuidVersion | ((tail >> kRandBBits) << 64) | kUuidVariant |
         (tail & Mask(kRandBBits));
}

U128 TailOf(Id128Kind kind, U128 v) {
  if (kind == Id128Kind::kUlid) return v & Mask(80);
  return (((v >> 64) & 0xFFF) << kRandBBits) | (v & Mask(kRandBBits));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int CrockfordValue(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  if (c == 'I' || c == 'L') return 1;
  if (c == 'O') return 0;
  auto at = kCrockford.find(c);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

// Fills `words` from the kernel's CSPRNG (getrandom(2), which blocks only before the pool is
// first initialised at boot).
[[nodiscard]] Result<void> FillRandom(std::vector<uint64_t>& words) {
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  size_t left = words.size() * sizeof(uint64_t);
  while (left > 0) {
    ssize_t got = getrandom(bytes, left, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Fail(Code::kInternal, std::string("getrandom: ") + std::strerror(errno));
    }
    bytes += got;
    left -= static_cast<size_t>(got);
  }
  return {};
}

}  // namespace

Id128Layout::Id128Layout(Id128Kind kind, const SnowflakeLayout& snowflake)
    : kind_(kind),
      snowflake_(snowflake),
      counter_bits_(std::bit_width(static_cast<uint64_t>(snowflake.max_sequence()))),
      worker_bits_(std::bit_width(static_cast<uint64_t>(snowflake.max_worker_id()))) {}

Result<Id128> Id128Layout::FromSnowflake(int64_t snowflake_id, Id128 random) const {
  auto parts = snowflake_.Decode(snowflake_id);
  if (!parts) return std::unexpected(parts.error());
  if (parts->timestamp_ms < 0 || parts->timestamp_ms > kMaxTimestampMs) {
    return Fail(Code::kResourceExhausted,
                std::string(name()) + ": the 48-bit millisecond timestamp is used up");
  }
  const U128 tail =
      (U128{static_cast<uint64_t>(parts->sequence)} << (tail_bits() - counter_bits_)) |
      (U128{static_cast<uint64_t>(parts->worker_id)} << random_bits()) |
      (Join(random) & Mask(random_bits()));
  return SplitBits(Assemble(kind_, parts->timestamp_ms, tail));
}

Result<Id128> Id128Layout::FirstAt(int64_t ms) const {
  if (ms < 0 || ms > kMaxTimestampMs) {
    return Fail(Code::kInvalidArgument,
                "time: outside the " + std::string(name()) +
                    " range, 1970-01-01T00:00:00.000Z (0) to " + FormatUtcMs(kMaxTimestampMs) +
                    " (" + std::to_string(kMaxTimestampMs) + "), epoch milliseconds in brackets");
  }
  // Issued IDs carry the start of their snowflake tick.
  if (ms >= snowflake_.epoch_ms()) ms = snowflake_.MsOf(snowflake_.TicksOf(ms));
  return SplitBits(Assemble(kind_, ms, 0));
}

Id128Layout::Parts Id128Layout::Split(Id128 id) const {
  const U128 v = Join(id);
  const U128 tail = TailOf(kind_, v);
  Parts p;
  p.timestamp_ms = static_cast<int64_t>(v >> 80);
  p.counter = static_cast<int64_t>(tail >> (tail_bits() - counter_bits_));
  p.worker_id = static_cast<int64_t>((tail >> random_bits()) & Mask(worker_bits_));
  return p;
}

std::string Id128Layout::Format(Id128 id) const {
  const U128 v = Join(id);
  if (kind_ == Id128Kind::kUlid) {
    std::string text(26, '0');
    for (int i = 0; i < 26; ++i)
      text[i] = kCrockford[static_cast<size_t>((v >> (125 - 5 * i)) & 31)];
    return text;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(36);
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) text += '-';
    text += kHex[static_cast<size_t>((v >> (124 - 4 * i)) & 15)];
  }
  return text;
}

Result<Id128> Id128Layout::Parse(std::string_view text) const {
  U128 v = 0;
  if (kind_ == Id128Kind::kUlid) {
    if (text.size() != 26) return Fail(Code::kInvalidArgument, "ulid: expected 26 characters");
    for (char c : text) {
      int digit = CrockfordValue(c);
      if (digit < 0) return Fail(Code::kInvalidArgument, "ulid: not Crockford base32");
      v = (v << 5) | static_cast<unsigned>(digit);
    }
    if (CrockfordValue(text[0]) > 7) return Fail(Code::kInvalidArgument, "ulid: beyond 128 bits");
    return SplitBits(v);
  }
  if (text.size() != 36)
    return Fail(Code::kInvalidArgument, "uuid: expected 8-4-4-4-12 hex digits");
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-')
        return Fail(Code::kInvalidArgument, "uuid: expected 8-4-4-4-12 hex digits");
      continue;
    }
    int digit = HexValue(text[i]);
    if (digit < 0) return Fail(Code::kInvalidArgument, "uuid: expected 8-4-4-4-12 hex digits");
    v = (v << 4) | static_cast<unsigned>(digit);
  }
  if ((v & kUuidVersionVariantMask) != (kUuidVersion | kUuidVariant)) {
    return Fail(Code::kInvalidArgument, "uuid: not a UUIDv7 (version 7, RFC 9562 variant)");
  }
  return SplitBits(v);
}

Result<std::string> ComposeToJson(const Id128Layout& layout, std::string_view time_text) {
  auto ms = ParseTimeMs(time_text);
  if (!ms) return std::unexpected(ms.error());
  auto id = layout.FirstAt(*ms);
  if (!id) return std::unexpected(id.error());
  return "{\"id\":\"" + layout.Format(*id) + "\"}";
}

Result<void> NextId128Batch(SnowflakeGenerator& generator, const Id128Layout& layout, int64_t count,
                            std::vector<Id128>& out) {
  std::vector<int64_t> draws;
  if (auto r = generator.NextBatch(count, draws); !r) return r;
  // Outside the generator's lock: the random bits do not order anything.
  std::vector<uint64_t> random(draws.size() * 2);
  if (auto r = FillRandom(random); !r) return r;
  const size_t before = out.size();
  out.reserve(before + draws.size());
  for (size_t i = 0; i < draws.size(); ++i) {
    auto id = layout.FromSnowflake(draws[i], {random[2 * i], random[2 * i + 1]});
    if (!id) {
      out.resize(before);
      return std::unexpected(id.error());
    }
    out.push_back(*id);
  }
  return {};
}

}  // namespace kleaf::snowflake
