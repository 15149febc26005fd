// `kleaf standalone`: allocator and gateway in one process, state in local RocksDB.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "allocator/import.h"
#include "base/error.h"
#include "config/config.h"
#include "state/records.h"

namespace kleaf::app {

// Runs until SIGINT or SIGTERM; returns the process exit code. Startup failures are reported on
// stderr and give a non-zero code.
int RunStandalone(const config::Config& config);

// `kleaf state import --standalone`: sets `records` in the store at state.path through the
// standalone's allocator rules (allocator::ImportTags; errors of single tags go to `errors`).
// Fails (kFailedPrecondition) without touching anything while a process holds the store: a
// running standalone must be stopped first.
[[nodiscard]] Result<allocator::ImportCounts> ImportIntoStandalone(
    const config::Config& config, const std::vector<state::TagRecord>& records, int64_t bump,
    std::ostream& errors);

}  // namespace kleaf::app
