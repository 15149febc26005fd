#include "allocator/import.h"

#include <optional>
#include <utility>

#include "allocator/allocation.h"
#include "base/await.h"

namespace kleaf::allocator {

ImportCounts ImportTags(Allocator& allocator, const std::vector<state::TagRecord>& records,
                        int64_t bump, std::ostream& errors) {
  ImportCounts counts;
  for (const auto& r : records) {
    if (r.max_id > kMaxSegmentId - bump) {
      errors << "kleaf: tag " << r.tag << ": max_id + bump exceeds the ID space\n";
      ++counts.failed;
      continue;
    }
    TagUpdate update{r.step, r.max_id + bump, r.description};
    // An obfuscated tag keeps its key and id_base, or its restored IDs would be new ones.
    if (r.id_mode != state::IdMode::kPlain) update.restore_id_format = r;
    // No deadline of its own: every Allocator answers each call by its own. A live max_id as high
    // as the dump's (a re-import) is not raised, though PutTag takes an equal max_id.
    auto live = Await<state::TagRecord>(
        kNoDeadline, "", [&](auto done) { allocator.GetTag(r.tag, std::move(done)); });
    const bool as_high = live && live->max_id >= update.max_id;
    auto result = Await<state::TagRecord>(
        kNoDeadline, "", [&](auto done) { allocator.PutTag(r.tag, update, std::move(done)); });
    if (!result && result.error().code == Code::kFailedPrecondition && update.restore_id_format) {
      // The live max_id is higher: keep it, but the mode must still be the exported one.
      TagUpdate mode_only;
      mode_only.restore_id_format = r;
      auto kept = Await<state::TagRecord>(
          kNoDeadline, "", [&](auto done) { allocator.PutTag(r.tag, mode_only, std::move(done)); });
      if (!kept) result = std::unexpected(kept.error());
    }
    if (!result && result.error().code == Code::kFailedPrecondition) {
      ++counts.kept;  // the live max_id is higher already: keep it
    } else if (!result) {
      errors << "kleaf: tag " << r.tag << ": " << result.error().message << "\n";
      ++counts.failed;
      continue;
    } else {
      ++(as_high ? counts.kept : counts.raised);
    }
    if (r.deleted) {
      auto d = Await<state::TagRecord>(
          kNoDeadline, "", [&](auto done) { allocator.DeleteTag(r.tag, std::move(done)); });
      if (!d && d.error().code != Code::kNotFound) {
        errors << "kleaf: tag " << r.tag << ": " << d.error().message << "\n";
        ++counts.failed;
      }
    }
  }
  return counts;
}

}  // namespace kleaf::allocator
