#include "gateway/seq_json.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "allocator/sequences.h"
#include "base/plain_json.h"

namespace kleaf::gateway {
namespace {

using nlohmann::json;

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

using plain_json::AppendUint;

}  // namespace

Result<uint64_t> ParseSeqKey(std::string_view text) {
  uint64_t key = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), key);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      (text.size() > 1 && text.front() == '0')) {
    // Quoted only when printable ASCII: a cut through UTF-8 (or bytes that never were) is not.
    const std::string_view shown = text.substr(0, 40);
    const bool printable =
        std::all_of(shown.begin(), shown.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    return Fail(Code::kInvalidArgument,
                "key: expected an unsigned 64-bit integer in decimal (0 to "
                "18446744073709551615)" +
                    (printable ? ", got '" + std::string(shown) + "'" : std::string()));
  }
  return key;
}

Result<std::vector<uint64_t>> ParseSeqKeys(std::string_view body) {
  if (auto keys = detail::ParsePlainSeqKeys(body)) return std::move(*keys);
  return detail::ParseAnySeqKeys(body);
}

void AppendSeqList(std::string& out, std::string_view space, std::span<const uint64_t> keys,
                   std::span<const uint64_t> values) {
  out.reserve(out.size() + 32 + space.size() + keys.size() * 48);
  out += "{\"space\":\"";
  out += space;  // validated: no characters that need escaping
  out += "\",\"seqs\":[";
  for (size_t i = 0; i < keys.size(); ++i) {
    out += i == 0 ? "{\"key\":\"" : ",{\"key\":\"";
    AppendUint(out, keys[i]);
    out += "\",\"seq\":\"";
    AppendUint(out, values[i]);
    out += "\"}";
  }
  out += "]}";
}

namespace detail {

std::optional<std::vector<uint64_t>> ParsePlainSeqKeys(std::string_view body) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < body.size() && IsJsonSpace(body[i])) ++i;
  };
  auto take = [&](char c) {
    skip_space();
    if (i == body.size() || body[i] != c) return false;
    ++i;
    return true;
  };
  if (!take('{')) return std::nullopt;
  skip_space();
  if (body.substr(i, 6) != "\"keys\"") return std::nullopt;
  i += 6;
  if (!take(':') || !take('[')) return std::nullopt;
  std::vector<uint64_t> keys;
  do {
    skip_space();
    const bool quoted = i < body.size() && body[i] == '"';
    if (quoted) ++i;
    const size_t start = i;
    while (i < body.size() && IsDigit(body[i])) ++i;
    const std::string_view digits = body.substr(start, i - start);
    // No digits, a leading zero (not JSON as a number, refused as a key), or past 2^64 - 1: the
    // general reader words the error.
    if (digits.empty() || (digits.size() > 1 && digits.front() == '0')) return std::nullopt;
    if (quoted) {
      if (i == body.size() || body[i] != '"') return std::nullopt;
      ++i;
    }
    uint64_t key = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), key);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
    if (keys.size() == allocator::kMaxSeqKeys) return std::nullopt;
    keys.push_back(key);
  } while (take(','));
  if (!take(']') || !take('}')) return std::nullopt;
  skip_space();
  if (i != body.size()) return std::nullopt;
  return keys;
}

Result<std::vector<uint64_t>> ParseAnySeqKeys(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto expected = "body: expected {\"keys\": [\"<key>\", ...]} with 1 to " +
                        std::to_string(allocator::kMaxSeqKeys) + " keys";
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array() || j.size() != 1) {
    return Fail(Code::kInvalidArgument, expected);
  }
  const json& list = j["keys"];
  if (list.empty() || list.size() > allocator::kMaxSeqKeys) {
    return Fail(Code::kInvalidArgument, expected + ", got " + std::to_string(list.size()));
  }
  std::vector<uint64_t> keys;
  keys.reserve(list.size());
  for (const json& k : list) {
    if (k.is_number_unsigned()) {
      keys.push_back(k.get<uint64_t>());
      continue;
    }
    if (!k.is_string()) return Fail(Code::kInvalidArgument, "keys: each key is a decimal string");
    auto key = ParseSeqKey(k.get_ref<const std::string&>());
    if (!key) return std::unexpected(key.error());
    keys.push_back(*key);
  }
  return keys;
}

}  // namespace detail
}  // namespace kleaf::gateway
