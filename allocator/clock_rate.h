// A1's check on the node (docs/architecture.md, the table of assumptions, "clock rate within ρ"):
// the kernel's frequency correction, read with adjtimex, against ρ/2 over ten-minute windows.
#pragma once

#include <cstdint>
#include <optional>

#include "base/error.h"

namespace kleaf::allocator {

// What adjtimex(2) says of the node's clock, read only.
struct KernelClockState {
  // The frequency correction the time daemon applies, in ppm: `freq` (2⁻¹⁶ ppm units) plus 100 ppm
  // for each microsecond that `tick` lies above 10,000. Under chrony it also holds any offset being
  // slewed; under ntpd's kernel PLL or adjtime() the slew is apart from it (`pending_s`).
  double correction_ppm = 0;
  bool synchronized = false;  // STA_UNSYNC clear
  // The offset still to be slewed, in seconds: the PLL's (`offset` with STA_PLL) and adjtime()'s
  // remainder (ADJ_OFFSET_SS_READ).
  double pending_s = 0;
};

class KernelClockRateSource {
 public:
  virtual ~KernelClockRateSource() = default;
  virtual Result<KernelClockState> Read() = 0;
};
// adjtimex(2) of this machine.
KernelClockRateSource& KernelClockRate();

// Decides from readings of the correction whether the node's clock is out of the setting: once the
// correction's size has stayed above ρ/2 for `window_ns`, it drifts (the node alerts, holds no
// lease, and waits with ρ replaced by twice the largest size seen), until the size has stayed at
// or below ρ/2 for `window_ns`. A reading of an unsynchronized clock says nothing of the rate: it
// restarts both runs. Not thread-safe.
class ClockDriftWatch {
 public:
  static constexpr int64_t kWindowNs = 600'000'000'000;  // 10 minutes
  explicit ClockDriftWatch(int64_t rho_ppm, int64_t window_ns = kWindowNs)
      : rho_ppm_(rho_ppm), window_ns_(window_ns) {}

  // A reading taken at `now_ns` (a monotonic clock).
  void Note(int64_t now_ns, const KernelClockState& state);
  bool Drifting() const { return drifting_; }
  // ρ for takeover waits, in ppm: the setting, or while drifting twice the largest size seen, when
  // that is more.
  int64_t WaitRhoPpm() const;

 private:
  const int64_t rho_ppm_;
  const int64_t window_ns_;
  bool drifting_ = false;
  std::optional<int64_t> above_since_;  // the run of readings above ρ/2
  std::optional<int64_t> below_since_;  // the run at or below ρ/2
  double largest_ppm_ = 0;              // the largest size in the run above, and while drifting
};

}  // namespace kleaf::allocator
