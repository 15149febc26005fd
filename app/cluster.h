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
// Writes every tag, space and section record of the state topic (or, `standalone`, of the store at
// state.path of a stopped standalone) to `file` as JSON (state/export_file.h).
int RunStateExport(const config::Config& c, const std::string& file, bool standalone);
struct StateImportOptions {
  std::string file;
  // `file` is a dump of Leaf's leaf_alloc table (state/leaf_dump.h), else a `state export` file.
  bool from_leaf = false;
  // Into the local store at state.path (of a stopped `kleaf standalone`), else through the
  // cluster's allocators.
  bool standalone = false;
  int64_t bump = 0;  // added to every max_id and every section's max_seq
};
// Reads and checks the whole file, then sets each of its tags, spaces and section maxima
// (existing tags and sections are only raised, never lowered: allocator::ImportState).
int RunStateImport(const config::Config& c, const StateImportOptions& options);

}  // namespace kleaf::app
