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
struct StateImportOptions {
  std::string file;
  // `file` is a dump of Leaf's leaf_alloc table (state/leaf_dump.h), else a `state export` file.
  bool from_leaf = false;
  // Into the local store at state.path (of a stopped `kleaf standalone`), else through the
  // cluster's allocators.
  bool standalone = false;
  int64_t bump = 0;  // added to every max_id
};
// Reads and checks the whole file, then sets each of its tags (existing tags are only raised,
// never lowered: allocator::ImportTags).
int RunStateImport(const config::Config& c, const StateImportOptions& options);

}  // namespace kleaf::app
