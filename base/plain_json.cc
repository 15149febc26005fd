#include "base/plain_json.h"

#include <charconv>
#include <limits>

namespace kleaf::plain_json {

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;  // 24 chars hold every 64-bit value
  out.append(buf, ptr);
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  out.append(buf, ptr);
}

bool IsPlain(std::string_view s) {
  for (const char c : s) {
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

bool Reader::Literal(std::string_view piece) {
  if (text_.substr(at_, piece.size()) != piece) return false;
  at_ += piece.size();
  return true;
}

bool Reader::Uint(uint64_t& v) {
  size_t end = at_;
  while (end < text_.size() && text_[end] >= '0' && text_[end] <= '9') ++end;
  const std::string_view digits = text_.substr(at_, end - at_);
  if (digits.empty() || (digits.size() > 1 && digits.front() == '0')) return false;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return false;
  at_ = end;
  return true;
}

bool Reader::Int(int64_t& v) {
  const size_t start = at_;
  const bool negative = Literal("-");
  uint64_t magnitude = 0;
  const uint64_t limit =
      negative ? uint64_t{1} << 63 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  // "-0" is not what dump() writes.
  if (!Uint(magnitude) || magnitude > limit || (negative && magnitude == 0)) {
    at_ = start;
    return false;
  }
  v = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool Reader::String(std::string_view& s) {
  if (at_ >= text_.size() || text_[at_] != '"') return false;
  const size_t close = text_.find('"', at_ + 1);
  if (close == std::string_view::npos) return false;
  const std::string_view inside = text_.substr(at_ + 1, close - at_ - 1);
  if (!IsPlain(inside)) return false;
  s = inside;
  at_ = close + 1;
  return true;
}

bool Reader::UintList(std::vector<uint64_t>& out, size_t max) {
  const size_t start = at_;
  const size_t had = out.size();
  const auto fail = [&] {
    at_ = start;
    out.resize(had);
    return false;
  };
  if (!Literal("[")) return false;
  if (Literal("]")) return true;
  do {
    uint64_t v = 0;
    if (out.size() - had == max || !Uint(v)) return fail();
    out.push_back(v);
  } while (Literal(","));
  return Literal("]") ? true : fail();
}

}  // namespace kleaf::plain_json
