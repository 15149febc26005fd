#include "allocator/allocation.h"

#include <algorithm>

namespace kleaf::allocator {

using std::chrono::minutes;

Result<Segment> ReserveSegment(state::TagRecord& record, int64_t requested_step, int64_t max_step,
                               int64_t now_ms) {
  if (record.deleted) return Fail(Code::kNotFound, "unknown tag '" + record.tag + "'");
  int64_t floor = std::min(record.step, max_step);
  int64_t step = std::clamp(requested_step <= 0 ? record.step : requested_step, floor, max_step);
  if (record.max_id >= 0 && record.max_id < kMaxSegmentId && record.max_id > kMaxSegmentId - step) {
    step = kMaxSegmentId - record.max_id;  // the last IDs of the space: a shorter segment
  }
  if (record.max_id < 0 || record.max_id >= kMaxSegmentId) {
    return Fail(Code::kResourceExhausted,
                "tag '" + record.tag + "' has used up its ID space (max_id " +
                    std::to_string(record.max_id) + ")");
  }
  Segment s{record.tag, record.max_id, record.max_id + step, record.step};
  record.max_id += step;
  record.update_time_ms = now_ms;
  return s;
}

int64_t NextStep(int64_t current_step, int64_t min_step, int64_t max_step,
                 std::chrono::milliseconds previous_lasted) {
  int64_t step = std::max(current_step, min_step);
  if (previous_lasted < minutes(15)) {
    step = step > max_step / 2 ? max_step : step * 2;
  } else if (previous_lasted >= minutes(30)) {
    step = std::max(step / 2, min_step);
  }
  return std::clamp(step, std::min(min_step, max_step), max_step);
}

Result<state::TagRecord> ApplyTagUpdate(const std::optional<state::TagRecord>& existing,
                                        std::string_view tag, const TagUpdate& update,
                                        int64_t default_step, int64_t max_step, int64_t now_ms) {
  state::TagRecord r;
  if (existing) {
    r = *existing;
  } else {
    r.tag = std::string(tag);
    r.step = default_step;
    r.max_id = 1;
  }
  bool was_deleted = existing && existing->deleted;
  r.deleted = false;
  if (was_deleted) {
    // A re-created tag continues above everything its earlier life handed out.
    r.step = default_step;
    r.description.clear();
  }
  if (update.step) {
    if (*update.step < 1 || *update.step > max_step) {
      return Fail(Code::kInvalidArgument,
                  "step: must be between 1 and " + std::to_string(max_step));
    }
    r.step = *update.step;
  }
  if (update.max_id) {
    if (*update.max_id < 0 || *update.max_id > kMaxSegmentId) {
      return Fail(Code::kInvalidArgument,
                  "max_id: must be between 0 and " + std::to_string(kMaxSegmentId));
    }
    if (existing && *update.max_id < existing->max_id) {
      return Fail(Code::kFailedPrecondition,
                  "max_id: cannot be lowered from " + std::to_string(existing->max_id) +
                      " (IDs below it may have been handed out)");
    }
    r.max_id = *update.max_id;
  }
  if (update.description) {
    if (update.description->size() > kMaxDescriptionBytes) {
      return Fail(Code::kInvalidArgument,
                  "description: at most " + std::to_string(kMaxDescriptionBytes) + " bytes");
    }
    r.description = *update.description;
  }
  r.update_time_ms = now_ms;
  return r;
}

}  // namespace kleaf::allocator
