// The cluster subcommands: `kleaf allocator`, `kleaf gateway`, `kleaf state replay|export|import`.
#pragma once

#include <cstdint>
#include <string>

#include "allocator/lease_clock.h"
#include "base/error.h"
#include "config/config.h"

namespace kleaf::app {

// The allocator's lease settings (config sequence.*). Test hook: KLEAF_ALLOCATOR_TEST_WAIT_WITHOUT_
// DRIFT=1 makes the takeover wait leave out its (1+ρ) (allocator::LeaseTiming), for the test that
// the start-up check refuses a wait that does not cover the lease.
allocator::LeaseTiming LeaseTimingOf(const config::Config& c);
// The start-up check of "I5 with a lease" (docs/architecture.md, "Settings"): the wait these
// settings impose covers the lease they allow (kInvalidArgument naming sequence.lease_ms); run by
// `kleaf allocator` and `kleaf config check --role allocator` before they touch Kafka.
Result<void> CheckAllocatorLease(const config::Config& c);

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
