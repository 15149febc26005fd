// The lease clocks of a sequence owner (docs/architecture.md, "I5 with a lease": Clocks, R1, R4,
// R9 and the start-up check): how one reading of the kernel's clocks is taken, the elapsed times a
// lease holder and a takeover waiter count between two readings, the clock events that end a
// lease, and the arithmetic of the lease and of the wait. Pure apart from the kernel's clocks,
// which a test replaces through LeaseClockSource. No rule here compares two nodes' readings: each
// node only compares two readings of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace kleaf::allocator {

// The clocks one reading takes, in the order it takes them.
enum class LeaseClockId { kMonotonic, kBoottime, kMonotonicRaw, kRealtime };

// Where the readings come from: the kernel (KernelLeaseClocks) or a test's script.
class LeaseClockSource {
 public:
  virtual ~LeaseClockSource() = default;
  // Nanoseconds of `id`; nullopt when the kernel cannot read it.
  virtual std::optional<int64_t> Now(LeaseClockId id) = 0;
  // The kernel's count of completed suspends (/sys/power/suspend_stats/success), or nullopt when
  // it cannot be read (an older kernel, a container without /sys/power).
  virtual std::optional<uint64_t> SuspendCount() = 0;
};

// The kernel's clocks (clock_gettime) and its suspend count (the file kept open, read again at
// offset 0 for each reading). Thread-safe.
LeaseClockSource& KernelLeaseClocks();

// One reading: CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW and CLOCK_REALTIME read one
// after another, then CLOCK_MONOTONIC again and the suspend count.
struct LeaseReading {
  int64_t monotonic_ns = 0;  // the first CLOCK_MONOTONIC read
  int64_t boottime_ns = 0;
  int64_t raw_ns = 0;
  int64_t realtime_ns = 0;
  std::optional<uint64_t> suspends;
};

// A reading whose two CLOCK_MONOTONIC reads lie more than this apart (the thread was preempted
// between them) is taken again, so that the differences EventsBetween compares are exact to it.
inline constexpr int64_t kReadingSpreadNs = 1'000'000;
// How many times TakeReading tries before it gives up.
inline constexpr int kReadingAttempts = 100;

// A reading whose clocks were read within kReadingSpreadNs; kUnavailable, naming the clock, when
// one cannot be read, and when kReadingAttempts attempts were all preempted (the caller then
// refuses, which is the safe side).
[[nodiscard]] Result<LeaseReading> TakeReading(LeaseClockSource& clocks);

// Between two readings of one node, `from` taken first: the hold elapsed H, the larger of the
// advances of CLOCK_BOOTTIME and CLOCK_MONOTONIC_RAW, which a lease holder counts (so it stops at
// the earlier of the two ends), and the wait elapsed W, the smaller, which a takeover waiter
// counts (so it waits for the later one). An NTP slew then only shortens a lease or lengthens a
// wait. A clock that went back (it never should) counts as 0 for W and still counts for H only
// through the other clock.
int64_t HoldElapsedNs(const LeaseReading& from, const LeaseReading& to);
int64_t WaitElapsedNs(const LeaseReading& from, const LeaseReading& to);

// R9: what happened to the clocks between a lease's anchor reading and a later reading.
struct ClockEvents {
  // CLOCK_REALTIME − CLOCK_BOOTTIME grew by more than kWallStepNs: the wall clock stepped forward,
  // or the boot clock missed a pause the wall clock has since been corrected for.
  bool wall_forward = false;
  // It shrank by more than kWallStepNs (a leap second, a step back). Ends nothing.
  bool wall_back = false;
  // CLOCK_BOOTTIME − CLOCK_MONOTONIC grew by more than kSuspendNs (the kernel added suspended
  // time), or the suspend count changed (also a suspend the kernel measured as nothing), or it
  // stopped or started being readable (the safe side).
  bool suspend = false;

  // Whether a lease anchored before these events has ended.
  bool EndsLease() const { return wall_forward || suspend; }
  bool Any() const { return wall_forward || wall_back || suspend; }
};
inline constexpr int64_t kWallStepNs = 10'000'000;
inline constexpr int64_t kSuspendNs = 2'000'000;

ClockEvents EventsBetween(const LeaseReading& anchor, const LeaseReading& now);

// A node's lease settings: L (sequence.lease_ms), ρ (sequence.clock_drift_ppm · 10⁻⁶) and δ
// (sequence.lease_margin_ms).
struct LeaseTiming {
  int64_t lease_ms = 5000;
  int64_t drift_ppm = 1000;
  int64_t margin_ms = 100;
  // Test hook (KLEAF_ALLOCATOR_TEST_WAIT_WITHOUT_DRIFT, app/cluster.h): the takeover wait leaves
  // out its (1+ρ), as a build that forgot it would; the start-up check must refuse such a node.
  bool wait_without_drift = false;
};

// R1 (ii): a value may be computed while H since the anchor is below L·(1−ρ) − δ (rounded down
// to the nanosecond). Never negative: 0 when the margin eats the whole lease.
int64_t HoldLimitNs(const LeaseTiming& own);

// R4: a new owner answers no sequence operation until W since its fence reaches
// L_w·(1+ρ) + δ (rounded up), for the L_w that the newest lease record gives and its own ρ and δ.
int64_t TakeoverWaitNs(int64_t lease_w_ms, const LeaseTiming& own);

// The start-up check's two functions, in real nanoseconds: the longest real time a lease of
// `holder`'s settings can last, HoldLimit/(1−ρ) rounded up, and the shortest real time a wait for
// L_w can last under `waiter`'s settings, TakeoverWait/(1+ρ) rounded down.
int64_t LongestRealLeaseNs(const LeaseTiming& holder);
int64_t ShortestRealWaitNs(int64_t lease_w_ms, const LeaseTiming& waiter);

// The start-up check (docs/architecture.md, "Settings"): the settings' lease is covered by the
// wait they impose, "shortest real wait ≥ longest real lease", for a waiter and a holder with
// these settings and L_w = L. With L = 0 (no lease held) the check is made for L = 1000, the
// shortest lease another node may hold. kInvalidArgument naming sequence.lease_ms otherwise.
[[nodiscard]] Result<void> CheckLeaseCovered(const LeaseTiming& own);

// The start-up check of the clocks: a reading can be taken (every clock readable), else
// kFailedPrecondition naming the clock. A node that cannot read its suspend count only gets the
// warning SuspendCountWarning returns (empty when the count is readable): a suspend the kernel
// measured as nothing would go unseen there.
[[nodiscard]] Result<void> CheckLeaseClocksReadable(LeaseClockSource& clocks);
std::string SuspendCountWarning(LeaseClockSource& clocks);

// The warning of A1 (hold) for a node whose clocksource is a hypervisor's, given the text of
// /sys/devices/system/clocksource/clocksource0/current_clocksource ("kvm-clock", "xen",
// "hyperv_clocksource_tsc_page"; empty for any other, e.g. "tsc"): a pause of the guest that its
// clocks do not count must be corrected by a step, which the time daemon's policy decides and the
// process cannot read; on kvm-clock, CLOCK_MONOTONIC_RAW follows the host's clock, so ρ must bound
// the host's oscillator too.
std::string ClocksourceWarning(std::string_view clocksource);
// The text of that file on this machine (trimmed), or empty when it cannot be read.
std::string CurrentClocksource();

}  // namespace kleaf::allocator
