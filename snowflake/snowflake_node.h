// A node's snowflake issuing: the leased (or configured) worker id, the generator, and the
// timestamp guard that keeps its timestamps above every earlier run. Shared by gateways,
// standalone and producer nodes.
#pragma once

#include <memory>
#include <optional>

#include "allocator/datacenter.h"
#include "allocator/worker_registry.h"
#include "base/clock.h"
#include "snowflake/snowflake.h"
#include "snowflake/timestamp_guard.h"
#include "snowflake/worker_lease.h"
#include "state/store.h"

namespace kleaf::snowflake {

// The bit layout as configured (config's snowflake.* keys of the same names).
struct LayoutOptions {
  int timestamp_bits = 41;
  int worker_bits = 10;
  int sequence_bits = 12;
  int64_t epoch_ms = 1288834974657;
  int64_t time_unit_ms = 1;
};

// Owned by the process wiring; the lease renews on its own thread, the guard persists the
// timestamp mark on its own. The store and allocator must outlive it. Guarantees (I3): IDs only
// while the lease is valid, timestamps after the previous holder's not_before and above this
// node's durable mark.
class SnowflakeNode {
 public:
  struct Options {
    LayoutOptions layout;
    SnowflakeGenerator::Options generator;  // its worker_id is used only without a lease
    TimestampGuard::Options guard;
    // Set: lease the worker id from `registry` (cluster) instead of taking generator.worker_id
    // (standalone). The lease's ids must fall in `datacenter`'s slice.
    std::optional<WorkerLease::Options> lease;
    allocator::Datacenter datacenter = {};
  };
  // Returns once the generator may issue.
  [[nodiscard]] static Result<std::unique_ptr<SnowflakeNode>> Start(
      const Options& options, state::Store& store, allocator::WorkerRegistry& registry,
      Clock& clock);
  ~SnowflakeNode();

  SnowflakeGenerator& generator() { return *generator_; }
  // nullptr in standalone.
  WorkerLease* lease() { return lease_ ? &*lease_ : nullptr; }
  int64_t worker_id() const { return generator_->worker_id(); }
  // Stops renewing, releases the lease, lowers the durable mark to the last issued timestamp.
  void Stop();

 private:
  SnowflakeNode() = default;
  std::optional<WorkerLease> lease_;
  std::unique_ptr<SnowflakeGenerator> generator_;
  std::unique_ptr<TimestampGuard> guard_;
  bool stopped_ = false;
};

// What only the clock can tell about the snowflake keys: a layout that is invalid now (epoch in
// the future, timestamp bits used up). A node would fail to start on it; checked before anything
// is created in state.path, a failure is a config error (kInvalidArgument) like a bad key.
[[nodiscard]] Result<void> CheckLayoutAt(const LayoutOptions& s, int64_t now_ms);

}  // namespace kleaf::snowflake
