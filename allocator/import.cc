#include "allocator/import.h"

#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <string>
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
        kNoDeadline, "", [&](auto done) { allocator.Run(op::GetTag{r.tag}, std::move(done)); });
    const bool as_high = live && live->max_id >= update.max_id;
    auto result = Await<state::TagRecord>(kNoDeadline, "", [&](auto done) {
      allocator.Run(op::PutTag{r.tag, update}, std::move(done));
    });
    if (!result && result.error().code == Code::kFailedPrecondition && update.restore_id_format) {
      // The live max_id is higher: keep it, but the mode must still be the exported one.
      TagUpdate mode_only;
      mode_only.restore_id_format = r;
      auto kept = Await<state::TagRecord>(kNoDeadline, "", [&](auto done) {
        allocator.Run(op::PutTag{r.tag, mode_only}, std::move(done));
      });
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
      auto d = Await<state::TagRecord>(kNoDeadline, "", [&](auto done) {
        allocator.Run(op::DeleteTag{r.tag}, std::move(done));
      });
      if (!d && d.error().code != Code::kNotFound) {
        errors << "kleaf: tag " << r.tag << ": " << d.error().message << "\n";
        ++counts.failed;
      }
    }
  }
  return counts;
}

namespace {

// RaiseSection calls in flight at once: in the cluster, those of one partition travel in one
// transaction instead of one round trip each.
constexpr size_t kSectionsInFlight = 64;

// Creates or updates `r` live with its exported section_size; false (said on `errors`) if it
// cannot be.
bool RestoreSpace(Allocator& allocator, const state::SpaceRecord& r, std::ostream& errors) {
  SpaceUpdate update{r.section_size, r.step, r.description};
  auto put = Await<state::SpaceRecord>(kNoDeadline, "", [&](auto done) {
    allocator.Run(op::PutSpace{r.space, update}, std::move(done));
  });
  if (!put) {
    errors << "kleaf: space " << r.space << ": " << put.error().message << "\n";
    return false;
  }
  return true;
}

}  // namespace

SequenceImportCounts ImportSequences(Allocator& allocator,
                                     const std::vector<state::SpaceRecord>& spaces,
                                     const std::vector<state::SectionRecord>& sections,
                                     int64_t bump, std::ostream& errors) {
  SequenceImportCounts counts;
  std::set<std::string, std::less<>> refused;  // spaces whose sections are left alone
  for (const auto& r : spaces) {
    if (RestoreSpace(allocator, r, errors)) {
      ++counts.spaces;
    } else {
      refused.insert(r.space);
      ++counts.failed;
    }
  }
  const auto added = static_cast<uint64_t>(bump);
  struct InFlight {
    const state::SectionRecord* record;
    uint64_t target;
    PendingCall<uint64_t> call;
  };
  std::deque<InFlight> in_flight;
  auto settle = [&](InFlight& f) {
    auto raised = f.call.Wait(kNoDeadline, "");
    if (!raised) {
      errors << "kleaf: space " << f.record->space << " section " << f.record->section << ": "
             << raised.error().message << "\n";
      ++counts.failed;
    } else {
      ++(*raised > f.target ? counts.sections_kept : counts.sections_raised);
    }
  };
  for (const auto& r : sections) {
    if (refused.contains(r.space)) continue;
    if (r.max_seq > std::numeric_limits<uint64_t>::max() - added) {
      errors << "kleaf: space " << r.space << " section " << r.section
             << ": max_seq + bump exceeds the largest sequence value\n";
      ++counts.failed;
      continue;
    }
    if (in_flight.size() == kSectionsInFlight) {
      settle(in_flight.front());
      in_flight.pop_front();
    }
    InFlight& f = in_flight.emplace_back(InFlight{&r, r.max_seq + added, {}});
    allocator.Run(op::RaiseSection{r.space, r.section, r.section_size, f.target},
                  f.call.Callback());
  }
  for (auto& f : in_flight) settle(f);
  for (const auto& r : spaces) {
    if (!r.deleted || refused.contains(r.space)) continue;
    auto d = Await<state::SpaceRecord>(kNoDeadline, "", [&](auto done) {
      allocator.Run(op::DeleteSpace{r.space}, std::move(done));
    });
    if (!d && d.error().code != Code::kNotFound) {
      errors << "kleaf: space " << r.space << ": " << d.error().message << "\n";
      ++counts.failed;
    }
  }
  return counts;
}

StateImportCounts ImportState(Allocator& allocator, const state::ExportContents& contents,
                              int64_t bump, std::ostream& errors) {
  StateImportCounts counts;
  counts.tags = ImportTags(allocator, contents.tags, bump, errors);
  counts.sequences = ImportSequences(allocator, contents.spaces, contents.sections, bump, errors);
  return counts;
}

}  // namespace kleaf::allocator
