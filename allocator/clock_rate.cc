#include "allocator/clock_rate.h"

#include <sys/timex.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

namespace kleaf::allocator {
namespace {

class Adjtimex final : public KernelClockRateSource {
 public:
  Result<KernelClockState> Read() override {
    struct timex tx {};
    tx.modes = 0;  // read only: no right needed
    if (adjtimex(&tx) < 0) {
      return Fail(Code::kUnavailable, std::string("adjtimex: ") + std::strerror(errno));
    }
    KernelClockState s;
    s.correction_ppm =
        static_cast<double>(tx.freq) / 65536.0 + static_cast<double>(tx.tick - 10000) * 100.0;
    s.synchronized = (tx.status & STA_UNSYNC) == 0;
    if ((tx.status & STA_PLL) != 0) {
      s.pending_s = static_cast<double>(tx.offset) / ((tx.status & STA_NANO) != 0 ? 1e9 : 1e6);
    }
    struct timex ss {};
    ss.modes = ADJ_OFFSET_SS_READ;
    if (adjtimex(&ss) >= 0) s.pending_s += static_cast<double>(ss.offset) / 1e6;
    return s;
  }
};

}  // namespace

KernelClockRateSource& KernelClockRate() {
  static Adjtimex source;
  return source;
}

void ClockDriftWatch::Note(int64_t now_ns, const KernelClockState& state) {
  if (!state.synchronized) {
    above_since_.reset();
    below_since_.reset();
    return;
  }
  const double size = std::abs(state.correction_ppm);
  if (size > static_cast<double>(rho_ppm_) / 2) {
    below_since_.reset();
    if (!above_since_) {
      above_since_ = now_ns;
      if (!drifting_) largest_ppm_ = 0;
    }
    largest_ppm_ = std::max(largest_ppm_, size);
    if (!drifting_ && now_ns - *above_since_ >= window_ns_) drifting_ = true;
  } else {
    above_since_.reset();
    if (!below_since_) below_since_ = now_ns;
    if (drifting_ && now_ns - *below_since_ >= window_ns_) {
      drifting_ = false;
      largest_ppm_ = 0;
    }
  }
}

int64_t ClockDriftWatch::WaitRhoPpm() const {
  if (!drifting_) return rho_ppm_;
  return std::max(rho_ppm_, static_cast<int64_t>(std::ceil(2 * largest_ppm_)));
}

}  // namespace kleaf::allocator
