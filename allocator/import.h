// What `kleaf state import` does in either shape: tag records (an export, or a Leaf dump)
// republished through an Allocator with their max_id raised, and an export's sequence spaces and
// section maxima restored (docs/operations.md, "Disaster recovery").
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "allocator/allocator.h"
#include "state/export_file.h"
#include "state/records.h"

namespace kleaf::allocator {

struct ImportCounts {
  int64_t raised = 0;  // max_id set to the record's plus the bump
  int64_t kept = 0;    // the live max_id was as high or higher already: kept
  int failed = 0;      // reported on `errors`, one line each
};
// Sets each record's step, description and max_id + `bump` through `allocator` (PutTag), one tag
// at a time, then deletes the tags the records mark deleted. Blocks until each call is answered.
ImportCounts ImportTags(Allocator& allocator, const std::vector<state::TagRecord>& records,
                        int64_t bump, std::ostream& errors);

struct SequenceImportCounts {
  int64_t spaces = 0;           // spaces created or updated with the exported section_size
  int64_t sections_raised = 0;  // section maxima set to the exported one plus the bump
  int64_t sections_kept = 0;    // the live maximum was higher already: kept
  int failed = 0;               // reported on `errors`, one line each
};
// Restores the spaces and section maxima of an export through `allocator`: each space is created
// (or updated: step and description) with its exported section_size (a space that exists, live or
// deleted, with another section_size is an error naming it, and none of its sections is touched);
// each section's maximum is raised (RaiseSection: never lowered) to its exported max_seq +
// `bump`, so every key of it continues above that; spaces the export marks deleted are deleted
// again after their sections. Blocks until each call is answered (a few sections in flight at a
// time). `bump` >= 0.
SequenceImportCounts ImportSequences(Allocator& allocator,
                                     const std::vector<state::SpaceRecord>& spaces,
                                     const std::vector<state::SectionRecord>& sections,
                                     int64_t bump, std::ostream& errors);

struct StateImportCounts {
  ImportCounts tags;
  SequenceImportCounts sequences;
  int failed() const { return tags.failed + sequences.failed; }
};
// ImportTags of the contents' tags, then ImportSequences of its spaces and sections.
StateImportCounts ImportState(Allocator& allocator, const state::ExportContents& contents,
                              int64_t bump, std::ostream& errors);

}  // namespace kleaf::allocator
