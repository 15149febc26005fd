#include "snowflake/timestamp_guard.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kleaf::snowflake {
namespace {
constexpr int64_t kYearMs = 365LL * 24 * 3600 * 1000;
}

TimestampGuard::TimestampGuard(SnowflakeGenerator& generator, Clock& clock, Load load, Save save,
                               Options options)
    : generator_(generator),
      clock_(clock),
      load_(std::move(load)),
      save_(std::move(save)),
      options_(options) {}

TimestampGuard::~TimestampGuard() { Stop(); }

Result<void> TimestampGuard::Start() {
  if (clock_.NowMs() > generator_.layout().last_ms()) {
    return Fail(Code::kResourceExhausted,
                "the snowflake layout's timestamp bits ran out at " +
                    FormatUtcMs(generator_.layout().last_ms()) +
                    "; configure a later snowflake.epoch_ms or more timestamp_bits");
  }
  auto stored = load_();
  if (!stored) return std::unexpected(stored.error());
  if (external_floor_ms_ > 0 && (!*stored || **stored < external_floor_ms_)) {
    *stored = external_floor_ms_;
  }
  if (*stored) {
    const int64_t mark = **stored;
    const int64_t behind = mark - clock_.NowMs();
    if (behind >= 0) {
      if (behind > options_.max_startup_wait_ms) {
        return Fail(Code::kFailedPrecondition,
                    "the clock is " + std::to_string(behind) +
                        " ms behind the last snowflake timestamp this node persisted (" +
                        FormatUtcMs(mark) +
                        "); refusing to start, since IDs could repeat. Fix the clock, or wait.");
      }
      spdlog::warn("[snowflake] clock is {} ms behind the persisted timestamp; waiting", behind);
      clock_.SleepFor(std::chrono::milliseconds(behind + 1));
      if (clock_.NowMs() <= mark) {
        return Fail(Code::kFailedPrecondition,
                    "the clock did not pass the last persisted snowflake timestamp; refusing to start");
      }
    }
    generator_.SetFloorMs(mark);
    durable_ms_ = mark;
  }
  if (auto r = Renew(); !r) return r;
  renewal_.Start(std::chrono::milliseconds(options_.persist_interval_ms),
                 PeriodicTask::FirstRun::kAfterInterval, [this] {
                   if (auto r = Renew(); !r) {
                     // The generator stays limited to the old mark and refuses once the clock
                     // passes it.
                     spdlog::error("[snowflake] cannot persist the timestamp mark: {}",
                                   r.error().message);
                   }
                 });
  return {};
}

Result<void> TimestampGuard::Renew() {
  const int64_t now = clock_.NowMs();
  // Never lower the durable mark while running, even if the clock moved back.
  const int64_t mark = std::max(durable_ms_, now + options_.reserve_ms);
  if (auto r = save_(mark); !r) return r;
  durable_ms_ = mark;
  generator_.SetLimitMs(mark);
  const int64_t left = generator_.layout().last_ms() - now;
  if (left < kYearMs && now - last_warning_ms_ > 3600 * 1000) {
    last_warning_ms_ = now;
    spdlog::warn("[snowflake] timestamp bits run out in {} days ({}); plan a new epoch or layout",
                 left / (24 * 3600 * 1000), FormatUtcMs(generator_.layout().last_ms()));
  }
  return {};
}

void TimestampGuard::Stop() {
  if (!renewal_.Stop()) return;  // never started, or stopped already
  // Issuing has stopped (the caller stops serving first): record what was really issued.
  generator_.SetLimitMs(0);
  int64_t last = generator_.last_ms();
  if (last == 0) last = std::min(durable_ms_, clock_.NowMs());  // nothing issued this run
  if (last < durable_ms_) {
    if (auto r = save_(last); !r) {
      spdlog::warn("[snowflake] could not record the last timestamp at shutdown: {}", r.error().message);
    }
  }
}

}  // namespace kleaf::snowflake
