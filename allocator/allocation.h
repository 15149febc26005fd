// The pure allocation rules of segment mode: what a tag's max_id becomes, which step a segment
// gets, and how an admin update changes a record. No I/O; every rule is tested on its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "allocator/id_format.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// IDs stay below this so that a buffer's overshooting fetch_add can never wrap int64.
inline constexpr int64_t kMaxSegmentId = int64_t{1} << 62;
// The longest description of a tag or a space, in bytes.
inline constexpr size_t kMaxDescriptionBytes = 1024;
// Sets `description` to an update's, if it has one and it is at most kMaxDescriptionBytes long
// (kInvalidArgument naming the field otherwise): the one rule of tags' and spaces' descriptions.
[[nodiscard]] Result<void> ApplyDescription(const std::optional<std::string>& update,
                                            std::string& description);

// A range [start, end) of a tag, handed to exactly one buffer (docs/architecture.md, "I1: a range
// is handed to at most one buffer").
struct Segment {
  std::string tag;
  int64_t start = 0;
  int64_t end = 0;
  int64_t min_step = 0;  // the tag's configured step, the floor of the dynamic step
  // How the counters [start, end) become IDs when handed out; null: as they are (plain). The
  // tag's format when the segment was reserved, so a mode change never reinterprets a segment.
  std::shared_ptr<const IdFormat> format = {};
  int64_t size() const { return end - start; }
};

// Reserves the next segment of `record` in place: step_used = clamp(requested_step,
// record.step, max_step) (0 asks for the tag's step); segment = [max_id, max_id + step_used).
// Fails with kResourceExhausted rather than pass kMaxSegmentId (or, for kObfuscatedTime, the
// format's counter_limit), and kNotFound for a deleted tag.
[[nodiscard]] Result<Segment> ReserveSegment(state::TagRecord& record, int64_t requested_step,
                                             int64_t max_step, int64_t now_ms);

// The segment as a gateway or producer of datacenter `dc` hands it out: unchanged in a single
// datacenter; a plain segment gets the datacenter's format (IdFormat::PlainIn). A tag with an
// obfuscated id_mode is refused (kFailedPrecondition) with more than one datacenter: each
// cluster's permutation key is its own, so two datacenters' permuted IDs could be equal.
[[nodiscard]] Result<void> ApplyDatacenter(Segment& segment, const Datacenter& dc);

// Leaf's dynamic step: the previous segment lasted less than 15 minutes -> double (capped at
// max_step); 15 to 30 minutes -> keep; longer -> halve, never below min_step.
int64_t NextStep(int64_t current_step, int64_t min_step, int64_t max_step,
                 std::chrono::milliseconds previous_lasted);

// What PUT /api/v1/tags/{tag} asks for.
struct TagUpdate {
  std::optional<int64_t> step;
  std::optional<int64_t> max_id;
  std::optional<std::string> description;
  // Leaves kPlain for an obfuscated mode (a new key, id_base = the max_id after this update);
  // naming the tag's current mode changes nothing. Any other change is kFailedPrecondition.
  std::optional<state::IdMode> id_mode = {};
  // `kleaf state import` only (never from HTTP): the exported mode, key and id_base, kept as
  // they are so that a restored tag maps counters as before. Given together; id_key non-empty.
  std::optional<state::TagRecord> restore_id_format = {};
};

// What tag creation and mode changes need besides the update itself.
struct TagRules {
  int64_t default_step = 1000;
  int64_t max_step = 1000000;
  state::IdMode default_id_mode = state::IdMode::kPlain;  // of tags created without id_mode
  std::function<std::string()> new_id_key = NewIdKey;
  // datacenter.count: with more than one, a tag cannot leave kPlain (ApplyDatacenter).
  int64_t datacenter_count = 1;
};

// Applies an admin update to an existing record (or creates one). max_id may only grow: lowering
// it would hand out IDs again (kFailedPrecondition). The ID mode only leaves kPlain, once, and
// never changes again, not even across delete (see TagUpdate::id_mode): no permuted ID can then
// repeat a plain one (plain IDs < id_base < permuted IDs) nor one of another key.
[[nodiscard]] Result<state::TagRecord> ApplyTagUpdate(
    const std::optional<state::TagRecord>& existing, std::string_view tag, const TagUpdate& update,
    const TagRules& rules, int64_t now_ms);
[[nodiscard]] inline Result<state::TagRecord> ApplyTagUpdate(
    const std::optional<state::TagRecord>& existing, std::string_view tag, const TagUpdate& update,
    int64_t default_step, int64_t max_step, int64_t now_ms) {
  return ApplyTagUpdate(existing, tag, update, TagRules{default_step, max_step}, now_ms);
}

}  // namespace kleaf::allocator
