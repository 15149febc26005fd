// The JSON of the sequence routes (docs/architecture.md, "I5"): the keys of a fan-out request and
// the answer's list of values, read and written by hand on the common shapes because a fan-out of
// 1,000 keys is the hot path of standalone sequences (docs/benchmarks.md, "Sequences").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace kleaf::gateway {

// A key of a sequence space: an unsigned 64-bit integer in decimal, as a JSON string or a path
// segment ("0" to "18446744073709551615", no sign, no leading zero); kInvalidArgument otherwise.
[[nodiscard]] Result<uint64_t> ParseSeqKey(std::string_view text);

// The body of POST /api/v1/seq/{space}: {"keys":["1","2",...]}, 1 to allocator::kMaxSeqKeys keys,
// each a decimal string (or a JSON integer >= 0); kInvalidArgument saying what is expected.
[[nodiscard]] Result<std::vector<uint64_t>> ParseSeqKeys(std::string_view body);

// Appends {"space":"…","seqs":[{"key":"…","seq":"…"},…]} (keys and values as strings: they pass
// 2^53). `space` is a validated name (no character that JSON escapes); keys.size() ==
// values.size().
void AppendSeqList(std::string& out, std::string_view space, std::span<const uint64_t> keys,
                   std::span<const uint64_t> values);

namespace detail {
// The two readers ParseSeqKeys combines, for the test that holds them to the same answers:
// the hand-written one takes only the plain shape (no escapes, no other member, keys of digits
// only, 1 to kMaxSeqKeys of them) and gives nullopt for anything else; the general one
// (nlohmann's parser) takes every JSON text and decides, with the error, what the first does not.
std::optional<std::vector<uint64_t>> ParsePlainSeqKeys(std::string_view body);
[[nodiscard]] Result<std::vector<uint64_t>> ParseAnySeqKeys(std::string_view body);
}  // namespace detail

}  // namespace kleaf::gateway
