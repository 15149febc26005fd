// The file `kleaf state export` writes and `kleaf state import` reads: the live tag records of a
// cluster's state topic as one JSON document {"topic","exported_at","tags":[...]}, each tag in
// the record JSON of records.h.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::state {

// The document, pretty-printed (two spaces) and ending in a newline. `exported_at`: a UTC time
// (FormatUtcMs).
std::string EncodeExportFile(const std::string& topic, const std::string& exported_at,
                             const std::vector<TagRecord>& tags);
// The tag records of a document read from `in`. Errors (kInvalidArgument): a tag that is not a
// valid record (its DecodeTag message), or "not an export file: ..." for anything else.
[[nodiscard]] Result<std::vector<TagRecord>> DecodeExportFile(std::istream& in);

}  // namespace kleaf::state
