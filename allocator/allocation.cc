#include "allocator/allocation.h"

#include <algorithm>

namespace kleaf::allocator {

Result<void> ApplyDescription(const std::optional<std::string>& update, std::string& description) {
  if (!update) return {};
  if (update->size() > kMaxDescriptionBytes) {
    return Fail(Code::kInvalidArgument,
                "description: at most " + std::to_string(kMaxDescriptionBytes) + " bytes");
  }
  description = *update;
  return {};
}

using std::chrono::minutes;

Result<Segment> ReserveSegment(state::TagRecord& record, int64_t requested_step, int64_t max_step,
                               int64_t now_ms) {
  if (record.deleted) return Fail(Code::kNotFound, "unknown tag '" + record.tag + "'");
  auto format = IdFormat::Of(record);
  if (!format) return std::unexpected(format.error());
  // kObfuscatedTime permutes a 43-bit counter: past it, refuse (never wrap into a repeat).
  const int64_t limit =
      *format ? std::min((*format)->counter_limit(), kMaxSegmentId) : kMaxSegmentId;
  int64_t floor = std::min(record.step, max_step);
  int64_t step = std::clamp(requested_step <= 0 ? record.step : requested_step, floor, max_step);
  if (record.max_id >= 0 && record.max_id < limit && record.max_id > limit - step) {
    step = limit - record.max_id;  // the last IDs of the space: a shorter segment
  }
  if (record.max_id < 0 || record.max_id >= limit) {
    return Fail(Code::kResourceExhausted,
                "tag '" + record.tag + "' has used up its " + state::IdModeName(record.id_mode) +
                    " ID space (max_id " + std::to_string(record.max_id) + "); use a new tag");
  }
  Segment s{record.tag, record.max_id, record.max_id + step, record.step, *format};
  record.max_id += step;
  record.update_time_ms = now_ms;
  return s;
}

Result<void> ApplyDatacenter(Segment& segment, const Datacenter& dc) {
  if (dc.single()) return {};
  if (segment.format) {
    return Fail(Code::kFailedPrecondition,
                "tag '" + segment.tag + "' is " + state::IdModeName(segment.format->mode()) +
                    ", which is refused with more than one datacenter (this node is " +
                    dc.Describe() +
                    "): each cluster's permutation key is its own, so two datacenters' IDs could "
                    "be equal; issue the tag's IDs from a plain tag");
  }
  segment.format = IdFormat::PlainIn(dc);
  return {};
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

namespace {

// Restores the ID mode of an exported record (`from`) onto r, where no ID of r could meet the
// restored ones. `plain_below`: the max_id before this update (0 for a new tag).
[[nodiscard]] Result<void> RestoreIdMode(state::TagRecord& r, const state::TagRecord& from,
                                         int64_t plain_below) {
  const bool same =
      r.id_mode == from.id_mode && r.id_key == from.id_key && r.id_base == from.id_base;
  if (same || from.id_mode == state::IdMode::kPlain) return {};
  if (r.id_mode != state::IdMode::kPlain || plain_below > from.id_base) {
    // Plain IDs at or above the exported id_base, or another key, could meet the restored ones.
    return Fail(Code::kAlreadyExists,
                "tag '" + r.tag + "': its id_mode cannot be restored: the live tag is " +
                    state::IdModeName(r.id_mode) + " with max_id " + std::to_string(r.max_id) +
                    ", the export " + state::IdModeName(from.id_mode) + " from id_base " +
                    std::to_string(from.id_base));
  }
  r.id_mode = from.id_mode;
  r.id_key = from.id_key;
  r.id_base = from.id_base;
  if (auto format = IdFormat::Of(r); !format) {
    return Fail(Code::kInvalidArgument, format.error().message);
  }
  return {};
}

// Switches plain r to `wanted` with a new key; every plain ID of the tag is below its max_id.
[[nodiscard]] Result<void> LeavePlain(state::TagRecord& r, state::IdMode wanted,
                                      const TagRules& rules, int64_t now_ms) {
  const std::string what = "tag '" + r.tag + "': ";
  if (r.id_mode != state::IdMode::kPlain) {
    return Fail(Code::kFailedPrecondition,
                what + "id_mode is " + state::IdModeName(r.id_mode) + " and cannot change to " +
                    state::IdModeName(wanted) +
                    " (IDs of the two could be equal); issue the new kind from a new tag");
  }
  if (wanted == state::IdMode::kObfuscatedTime) {
    const int64_t hour = (now_ms - kTimePrefixEpochMs) / kTimePrefixPeriodMs;
    if (hour < 1 || r.max_id >= (hour << kTimeCounterBits)) {
      return Fail(Code::kFailedPrecondition,
                  what + "max_id " + std::to_string(r.max_id) +
                      " is too high for obfuscated_time: its IDs would not all be above the plain "
                      "ones; use obfuscated or a new tag");
    }
  }
  r.id_mode = wanted;
  r.id_key = rules.new_id_key();
  r.id_base = r.max_id;
  return {};
}

// Sets r's ID mode as `update` asks (r has its other fields updated already). `plain_below`:
// the max_id before this update (0 for a new tag): every plain ID of the tag is below it.
[[nodiscard]] Result<void> ApplyIdMode(state::TagRecord& r, const TagUpdate& update,
                                       const TagRules& rules, bool created, int64_t plain_below,
                                       int64_t now_ms) {
  const bool leaves_plain = update.restore_id_format
                                ? update.restore_id_format->id_mode != state::IdMode::kPlain
                                : update.id_mode && *update.id_mode != state::IdMode::kPlain;
  if (leaves_plain && rules.datacenter_count > 1 && r.id_mode == state::IdMode::kPlain) {
    return Fail(Code::kFailedPrecondition,
                "tag '" + r.tag +
                    "': id_mode obfuscated and obfuscated_time are refused with more than one "
                    "datacenter (datacenter.count " +
                    std::to_string(rules.datacenter_count) +
                    "): each cluster's permutation key is its own, so two datacenters' IDs could "
                    "be equal (docs/architecture.md, \"More than one datacenter\")");
  }
  if (update.restore_id_format) return RestoreIdMode(r, *update.restore_id_format, plain_below);
  // A re-created tag keeps a mode it had (its IDs of that mode are out there).
  const bool fresh = created && r.id_mode == state::IdMode::kPlain;
  const state::IdMode wanted =
      update.id_mode ? *update.id_mode : (fresh ? rules.default_id_mode : r.id_mode);
  if (wanted == r.id_mode) return {};
  return LeavePlain(r, wanted, rules, now_ms);
}

}  // namespace

namespace {

// The fields of `update` other than the ID mode, checked and set on r. `existing`: the record
// before the update, if any.
[[nodiscard]] Result<void> ApplyTagFields(state::TagRecord& r,
                                          const std::optional<state::TagRecord>& existing,
                                          const TagUpdate& update, int64_t max_step) {
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
  return ApplyDescription(update.description, r.description);
}

}  // namespace

Result<state::TagRecord> ApplyTagUpdate(const std::optional<state::TagRecord>& existing,
                                        std::string_view tag, const TagUpdate& update,
                                        const TagRules& rules, int64_t now_ms) {
  state::TagRecord r;
  if (existing) {
    r = *existing;
  } else {
    r.tag = std::string(tag);
    r.step = rules.default_step;
    r.max_id = 1;
  }
  bool was_deleted = existing && existing->deleted;
  r.deleted = false;
  if (was_deleted) {
    // A re-created tag continues above everything its earlier life handed out.
    r.step = rules.default_step;
    r.description.clear();
  }
  if (auto fields = ApplyTagFields(r, existing, update, rules.max_step); !fields) {
    return std::unexpected(fields.error());
  }
  if (auto mode = ApplyIdMode(r, update, rules, !existing || was_deleted,
                              existing ? existing->max_id : 0, now_ms);
      !mode) {
    return std::unexpected(mode.error());
  }
  r.update_time_ms = now_ms;
  return r;
}

}  // namespace kleaf::allocator
