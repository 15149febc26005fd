// JSON written and read by hand on the hot paths' fixed shapes: a sequence fan-out's answer
// (gateway/seq_json.h), and the next_seq envelope and its values between gateways and owners
// (cluster/wire.h), which would otherwise pass through nlohmann::json once per partition a call
// reaches. The reader takes only the bytes nlohmann's dump() writes (no spaces, no escapes,
// numbers of digits without a leading zero); a caller that meets anything else hands the whole
// text to nlohmann::json, which decides, so either side may write either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kleaf::plain_json {

void AppendUint(std::string& out, uint64_t v);
void AppendInt(std::string& out, int64_t v);
// True when `s` is written between quotes as it is: printable ASCII other than '"' and '\'.
bool IsPlain(std::string_view s);

// Reads a text from its start, one expected piece at a time. Each step consumes its piece and
// says true, or consumes nothing and says false when the text does not go on that way.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}
  bool Literal(std::string_view piece);
  // Digits, no leading zero (but "0"), at most 2^64 - 1.
  bool Uint(uint64_t& v);
  // Uint's, with an optional '-', within int64_t.
  bool Int(int64_t& v);
  // "…" of IsPlain characters.
  bool String(std::string_view& s);
  // [] or [u,u,…] of at most `max` Uint's, appended to `out` (left as it was on false).
  bool UintList(std::vector<uint64_t>& out, size_t max);
  bool AtEnd() const { return at_ == text_.size(); }

 private:
  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace kleaf::plain_json
