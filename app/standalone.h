// `kleaf standalone`: allocator and gateway in one process, state in local RocksDB.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "allocator/import.h"
#include "base/error.h"
#include "config/config.h"
#include "state/export_file.h"
#include "state/records.h"
#include "state/store.h"

namespace kleaf::app {

// Runs until SIGINT or SIGTERM; returns the process exit code. Startup failures are reported on
// stderr and give a non-zero code.
int RunStandalone(const config::Config& config);

// What POST /api/v1/backup of a running standalone does (`kleaf state backup DIR`): a RocksDB
// checkpoint of `store` in `dir`, an absolute path on the node's host that does not exist or is an
// empty directory (kInvalidArgument, kFailedPrecondition otherwise: nothing is written). The copy
// is consistent (every synced write before the call, none half) and opens as a state.path of its
// own.
[[nodiscard]] Result<void> BackUpStore(state::Store& store, const std::string& dir);

// `kleaf state import --standalone`: sets the tags, spaces and section maxima of `contents` in the
// store at state.path through the standalone's allocator rules (allocator::ImportState; errors of
// single records go to `errors`). Fails (kFailedPrecondition) without touching anything while a
// process holds the store: a running standalone must be stopped first.
[[nodiscard]] Result<allocator::StateImportCounts> ImportIntoStandalone(
    const config::Config& config, const state::ExportContents& contents, int64_t bump,
    std::ostream& errors);

// `kleaf state export --standalone`: every tag, space and section record of the store at
// state.path (deleted ones included). Fails (kFailedPrecondition) while a process holds the store:
// export a backup of a running standalone instead (`kleaf state backup`, docs/operations.md).
[[nodiscard]] Result<state::ExportContents> ExportStandalone(const config::Config& config);

}  // namespace kleaf::app
