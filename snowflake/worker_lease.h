// This node's snowflake worker id, leased from the registry the allocators keep in the state
// topic: claimed at startup, renewed in the background, released at shutdown.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "allocator/worker_registry.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "base/periodic_task.h"
#include "snowflake/snowflake.h"

namespace kleaf::snowflake {

// Owned by the process wiring; one renewal thread between Start and Stop.
//
// Guarantees: the generator issues IDs only while this node's lease is certainly valid: the
// deadline given to SnowflakeGenerator::SetLeaseDeadlineNs is the monotonic time the last
// successful renewal (or claim) was *sent*, plus the TTL, minus a safety margin covering clock
// skew. A node that cannot renew stops issuing (503) before its lease can expire and be granted
// to someone else. And whatever its wall clock does (a jump forward while the registry is
// unreachable), no ID carries a timestamp past the lease end the allocator granted
// (SnowflakeGenerator::SetLeaseEndMs), so a later holder of the id, which starts after that lease
// end, cannot repeat one. The lease is this process's (Options::holder), not its node id's.
class WorkerLease {
 public:
  struct Options {
    std::string node_id;
    std::string holder = {};  // this process's random token
    std::string previous_holder =
        {};  // the previous process's on this state directory (it is gone)
    int64_t lease_ttl_ms = 60000;
    int64_t renew_interval_ms = 3000;
    int64_t safety_margin_ms = 5000;
    int64_t claim_timeout_ms = 30000;
  };
  // The last lease this node held, kept in a local file (the gateway's store) so that a restart
  // while Kafka is unreachable can go on with the same id as long as that lease is still valid.
  struct Cached {
    int64_t worker_id;
    int64_t lease_until_ms;
  };
  using LoadCache = std::function<std::optional<Cached>()>;
  using SaveCache = std::function<Result<void>(const Cached&)>;

  struct Grant {
    int64_t worker_id;
    int64_t not_before_ms;  // issue no timestamp at or before this
    bool from_cache;        // Kafka was unreachable: reusing the cached, still valid lease
  };

  WorkerLease(allocator::WorkerRegistry& registry, Clock& clock, Options options, LoadCache load,
              SaveCache save);
  ~WorkerLease();

  // Claims a worker id (retrying until claim_timeout_ms), or falls back to the cached lease when
  // no allocator answers and that lease has not expired. Errors from the registry (all ids
  // leased, clock too far off) are returned as they are.
  [[nodiscard]] Result<Grant> Acquire();
  // Starts renewing for `generator` (which must use the acquired id).
  void Start(SnowflakeGenerator& generator);
  // Stops renewing and releases the lease with the generator's last timestamp.
  void Stop();

  struct Status {
    int64_t worker_id = -1;
    int64_t valid_for_ms = 0;  // until this node stops issuing, by its monotonic clock
    std::string last_error;    // of the last renewal; empty when it succeeded
    // The allocator's clock minus ours, estimated like NTP's clock filter: of the last few
    // claim/renew replies, the one with the shortest round trip, its allocator time against the
    // midpoint of our send and receive times; off by at most half that round trip
    // (clock_offset_error_ms). Absent until a reply carried the allocator's time.
    std::optional<int64_t> clock_offset_ms;
    int64_t clock_offset_error_ms = 0;
  };
  Status status() const;

 private:
  allocator::Claimant claimant() const {
    return {options_.node_id, options_.holder, options_.previous_holder};
  }
  void ExtendTo(int64_t sent_mono_ns, int64_t lease_until_ms);
  void RecordOffset(int64_t sent_ms, const allocator::WorkerLeaseInfo& lease);
  // save_, a failure logged and counted (kleaf_worker_cache_write_failures_total). False on one.
  bool SaveCached(const Cached& cached);

  allocator::WorkerRegistry& registry_;
  Clock& clock_;
  const Options options_;
  LoadCache load_;
  SaveCache save_;
  metrics::Counter& cache_write_failures_;
  SnowflakeGenerator* generator_ = nullptr;
  int64_t worker_id_ = -1;
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int64_t> lease_until_ms_{0};  // the allocator's lease end: no timestamp beyond it
  struct OffsetSample {
    int64_t offset_ms;
    int64_t round_trip_ms;
  };
  static constexpr size_t kOffsetSamples = 8;
  mutable Mutex mu_;
  std::deque<OffsetSample> offsets_ KLEAF_GUARDED_BY(mu_);  // newest last
  std::string last_error_ KLEAF_GUARDED_BY(mu_);
  PeriodicTask renewal_;
};

}  // namespace kleaf::snowflake
