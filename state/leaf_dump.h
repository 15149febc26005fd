// The file `kleaf state import --from-leaf` reads: Meituan Leaf's leaf_alloc table as the MySQL or
// MariaDB client writes it in batch mode,
//   mysql -B -e 'SELECT biz_tag,max_id,step,description FROM leaf_alloc' leaf > leaf_alloc.tsv
// one header line, then one tab-separated line per row; the client escapes NUL, tab, newline and
// backslash in values as \0 \t \n \\ and writes SQL NULL as the bare string NULL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::state {

// The header line a dump must start with (the columns, tab-separated, in this order).
inline constexpr std::string_view kLeafDumpHeader = "biz_tag\tmax_id\tstep\tdescription";

// What the importing cluster accepts; rows beyond it are refused before anything is imported.
struct LeafDumpLimits {
  int64_t max_id = INT64_MAX;  // the highest max_id (kleaf's ID space, less the import's bump)
  int64_t max_step = INT64_MAX;
  size_t max_description_bytes = SIZE_MAX;
};

// The rows of a whole dump as tag records (max_id, step and description as Leaf had them; a NULL
// description is empty), in file order. Leaf hands out the IDs of a segment below its max_id, and
// a kleaf tag's next segment starts at its max_id, so the records carry max_id unchanged.
// The whole input is checked before anything is returned: any bad line fails the whole dump
// (kInvalidArgument, "line N: ...": a missing or different header, a wrong column count, a tag
// against kleaf's tag rules or repeated, max_id not a non-negative integer within `limits`, step
// not an integer from 1 to limits.max_step, a description that is not UTF-8 or too long).
[[nodiscard]] Result<std::vector<TagRecord>> DecodeLeafDump(std::istream& in,
                                                            const LeafDumpLimits& limits);

}  // namespace kleaf::state
