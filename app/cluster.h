// The cluster subcommands: `kleaf allocator`, `kleaf gateway`, `kleaf state replay|export|import`.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace kleaf::app {

int RunAllocator(const config::Config& c);
int RunGateway(const config::Config& c);
// Rebuilds the store at state.path from the state topic (stop the allocator using it first).
int RunStateReplay(const config::Config& c);
// Writes every live record of the state topic to `file` as JSON.
int RunStateExport(const config::Config& c, const std::string& file);
// Republishes the records of `file` through the allocators, raising each max_id by `bump`.
int RunStateImport(const config::Config& c, const std::string& file, int64_t bump);

}  // namespace kleaf::app
