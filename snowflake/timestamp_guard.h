// Keeps the snowflake generator's timestamps above everything a previous run of this node issued,
// across restarts and kill -9, through a durable high-water mark.
#pragma once

#include <functional>
#include <optional>

#include "base/clock.h"
#include "base/error.h"
#include "base/periodic_task.h"
#include "snowflake/snowflake.h"

namespace kleaf::snowflake {

// Owned by the process wiring; runs one thread between Start and Stop.
//
// Invariant: every timestamp the generator issues is <= the durable mark. While running, the mark
// is a reservation `reserve_ms` ahead of the clock, renewed every `persist_interval_ms`; the
// generator is limited to it (SetLimitMs), so a crash can never have issued past the mark. At Stop
// the mark is lowered to the last timestamp actually issued, so a clean restart needs no wait.
// At Start, a clock behind the mark by at most `max_startup_wait_ms` is waited out; further
// behind, Start fails: the clock was set back and IDs could repeat.
class TimestampGuard {
 public:
  using Load = std::function<Result<std::optional<int64_t>>()>;
  using Save = std::function<Result<void>(int64_t)>;
  struct Options {
    int64_t persist_interval_ms = 1000;
    int64_t reserve_ms = 3000;
    int64_t max_startup_wait_ms = 5000;
  };

  TimestampGuard(SnowflakeGenerator& generator, Clock& clock, Load load, Save save, Options options);
  ~TimestampGuard();

  // A floor from elsewhere (a recycled worker id's not_before), treated like the stored mark at
  // Start. Call before Start.
  void SetExternalFloorMs(int64_t ms) { external_floor_ms_ = ms; }
  [[nodiscard]] Result<void> Start();
  void Stop();
  // One renewal of the reservation (the thread calls it; tests call it directly).
  [[nodiscard]] Result<void> Renew();

 private:
  SnowflakeGenerator& generator_;
  Clock& clock_;
  Load load_;
  Save save_;
  const Options options_;
  int64_t durable_ms_ = 0;  // the mark as last written; only the guard's thread touches it after Start
  int64_t last_warning_ms_ = 0;
  int64_t external_floor_ms_ = 0;
  PeriodicTask renewal_;
};

}  // namespace kleaf::snowflake
