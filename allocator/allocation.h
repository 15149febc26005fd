// The pure allocation rules of segment mode: what a tag's max_id becomes, which step a segment
// gets, and how an admin update changes a record. No I/O; every rule is tested on its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// IDs stay below this so that a buffer's overshooting fetch_add can never wrap int64.
inline constexpr int64_t kMaxSegmentId = int64_t{1} << 62;
// The longest description of a tag, in bytes.
inline constexpr size_t kMaxDescriptionBytes = 1024;

// A range [start, end) of a tag, handed to exactly one buffer (DESIGN.md I1).
struct Segment {
  std::string tag;
  int64_t start = 0;
  int64_t end = 0;
  int64_t min_step = 0;  // the tag's configured step, the floor of the dynamic step
  int64_t size() const { return end - start; }
};

// Reserves the next segment of `record` in place: step_used = clamp(requested_step,
// record.step, max_step) (0 asks for the tag's step); segment = [max_id, max_id + step_used).
// Fails with kResourceExhausted rather than pass kMaxSegmentId, and kNotFound for a deleted tag.
Result<Segment> ReserveSegment(state::TagRecord& record, int64_t requested_step, int64_t max_step,
                               int64_t now_ms);

// Leaf's dynamic step: the previous segment lasted less than 15 minutes -> double (capped at
// max_step); 15 to 30 minutes -> keep; longer -> halve, never below min_step.
int64_t NextStep(int64_t current_step, int64_t min_step, int64_t max_step,
                 std::chrono::milliseconds previous_lasted);

// What PUT /api/v1/tags/{tag} asks for.
struct TagUpdate {
  std::optional<int64_t> step;
  std::optional<int64_t> max_id;
  std::optional<std::string> description;
};

// Applies an admin update to an existing record (or creates one). max_id may only grow: lowering
// it would hand out IDs again (kFailedPrecondition).
Result<state::TagRecord> ApplyTagUpdate(const std::optional<state::TagRecord>& existing,
                                        std::string_view tag, const TagUpdate& update,
                                        int64_t default_step, int64_t max_step, int64_t now_ms);

}  // namespace kleaf::allocator
