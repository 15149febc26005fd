// `kleaf standalone`: allocator and gateway in one process, state in local RocksDB.
#pragma once

#include "config/config.h"

namespace kleaf::app {

// Runs until SIGINT or SIGTERM; returns the process exit code. Startup failures are reported on
// stderr and give a non-zero code.
int RunStandalone(const config::Config& config);

}  // namespace kleaf::app
