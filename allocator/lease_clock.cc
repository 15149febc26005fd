#include "allocator/lease_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <fstream>

namespace kleaf::allocator {
namespace {

constexpr int64_t kPpm = 1'000'000;
constexpr int64_t kNsPerMs = 1'000'000;
// The shortest lease another node may hold (sequence.lease_ms is 0, or 1000 to 60000).
constexpr int64_t kShortestLeaseMs = 1000;

// The kernel's clock behind each LeaseClockId, and its name, in the enum's order.
struct KernelClock {
  clockid_t id;
  const char* name;
};
constexpr KernelClock kKernelClocks[] = {{CLOCK_MONOTONIC, "CLOCK_MONOTONIC"},
                                         {CLOCK_BOOTTIME, "CLOCK_BOOTTIME"},
                                         {CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW"},
                                         {CLOCK_REALTIME, "CLOCK_REALTIME"}};
const KernelClock& KernelClockOf(LeaseClockId id) { return kKernelClocks[static_cast<int>(id)]; }

class KernelClocks final : public LeaseClockSource {
 public:
  KernelClocks() : suspend_fd_(open(kSuspendPath, O_RDONLY | O_CLOEXEC)) {}
  ~KernelClocks() override {
    if (suspend_fd_ >= 0) close(suspend_fd_);
  }
  KernelClocks(const KernelClocks&) = delete;
  KernelClocks& operator=(const KernelClocks&) = delete;

  std::optional<int64_t> Now(LeaseClockId id) override {
    timespec ts{};
    if (clock_gettime(KernelClockOf(id).id, &ts) != 0) return std::nullopt;
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  // sysfs gives the attribute anew to every read from offset 0, so one descriptor serves all
  // readings (pread: no shared file position between threads).
  std::optional<uint64_t> SuspendCount() override {
    if (suspend_fd_ < 0) return std::nullopt;
    char text[32];
    const ssize_t n = pread(suspend_fd_, text, sizeof(text), 0);
    if (n <= 0) return std::nullopt;
    uint64_t count = 0;
    const auto [end, ec] = std::from_chars(text, text + n, count);
    if (ec != std::errc() || end == text) return std::nullopt;
    return count;
  }

 private:
  static constexpr const char* kSuspendPath = "/sys/power/suspend_stats/success";
  const int suspend_fd_;
};

// a·b/c rounded down or up, for non-negative a, b and positive c, without overflow for the
// values here (nanoseconds of at most minutes times a million).
int64_t MulDivFloor(int64_t a, int64_t b, int64_t c) {
  return static_cast<int64_t>(static_cast<__int128>(a) * b / c);
}
int64_t MulDivCeil(int64_t a, int64_t b, int64_t c) {
  const __int128 p = static_cast<__int128>(a) * b;
  return static_cast<int64_t>((p + c - 1) / c);
}

}  // namespace

LeaseClockSource& KernelLeaseClocks() {
  static KernelClocks clocks;
  return clocks;
}

Result<LeaseReading> TakeReading(LeaseClockSource& clocks) {
  for (int attempt = 0; attempt < kReadingAttempts; ++attempt) {
    LeaseReading r;
    int64_t* const targets[] = {&r.monotonic_ns, &r.boottime_ns, &r.raw_ns, &r.realtime_ns};
    const LeaseClockId ids[] = {LeaseClockId::kMonotonic, LeaseClockId::kBoottime,
                                LeaseClockId::kMonotonicRaw, LeaseClockId::kRealtime};
    for (size_t i = 0; i < std::size(ids); ++i) {
      const std::optional<int64_t> v = clocks.Now(ids[i]);
      if (!v) {
        return Fail(Code::kUnavailable, std::string("cannot read ") + KernelClockOf(ids[i]).name);
      }
      *targets[i] = *v;
    }
    const std::optional<int64_t> last = clocks.Now(LeaseClockId::kMonotonic);
    if (!last) return Fail(Code::kUnavailable, "cannot read CLOCK_MONOTONIC");
    r.suspends = clocks.SuspendCount();
    if (*last - r.monotonic_ns <= kReadingSpreadNs) return r;
  }
  return Fail(Code::kUnavailable, "no reading of the lease clocks within " +
                                      std::to_string(kReadingSpreadNs / 1000) + " µs in " +
                                      std::to_string(kReadingAttempts) +
                                      " attempts (the thread was preempted every time)");
}

int64_t HoldElapsedNs(const LeaseReading& from, const LeaseReading& to) {
  return std::max<int64_t>(
      {to.boottime_ns - from.boottime_ns, to.raw_ns - from.raw_ns, int64_t{0}});
}

int64_t WaitElapsedNs(const LeaseReading& from, const LeaseReading& to) {
  return std::max<int64_t>(std::min(to.boottime_ns - from.boottime_ns, to.raw_ns - from.raw_ns), 0);
}

ClockEvents EventsBetween(const LeaseReading& anchor, const LeaseReading& now) {
  ClockEvents e;
  const int64_t wall =
      (now.realtime_ns - now.boottime_ns) - (anchor.realtime_ns - anchor.boottime_ns);
  e.wall_forward = wall > kWallStepNs;
  e.wall_back = wall < -kWallStepNs;
  const int64_t suspended =
      (now.boottime_ns - now.monotonic_ns) - (anchor.boottime_ns - anchor.monotonic_ns);
  e.suspend = suspended > kSuspendNs || now.suspends != anchor.suspends;
  return e;
}

int64_t HoldLimitNs(const LeaseTiming& own) {
  const int64_t limit =
      MulDivFloor(own.lease_ms * kNsPerMs, kPpm - own.drift_ppm, kPpm) - own.margin_ms * kNsPerMs;
  return std::max<int64_t>(limit, 0);
}

int64_t TakeoverWaitNs(int64_t lease_w_ms, const LeaseTiming& own) {
  const int64_t drift = own.wait_without_drift ? 0 : own.drift_ppm;
  return MulDivCeil(lease_w_ms * kNsPerMs, kPpm + drift, kPpm) + own.margin_ms * kNsPerMs;
}

int64_t LongestRealLeaseNs(const LeaseTiming& holder) {
  return MulDivCeil(HoldLimitNs(holder), kPpm, kPpm - holder.drift_ppm);
}

int64_t ShortestRealWaitNs(int64_t lease_w_ms, const LeaseTiming& waiter) {
  return MulDivFloor(TakeoverWaitNs(lease_w_ms, waiter), kPpm, kPpm + waiter.drift_ppm);
}

Result<void> CheckLeaseCovered(const LeaseTiming& own) {
  LeaseTiming t = own;
  if (t.lease_ms == 0) t.lease_ms = kShortestLeaseMs;
  if (t.lease_ms < 0 || t.drift_ppm < 0 || t.drift_ppm >= kPpm || t.margin_ms < 0) {
    return Fail(Code::kInvalidArgument,
                "sequence.lease_ms: the lease settings are out of range (lease " +
                    std::to_string(t.lease_ms) + " ms, drift " + std::to_string(t.drift_ppm) +
                    " ppm, margin " + std::to_string(t.margin_ms) + " ms)");
  }
  const int64_t lease = LongestRealLeaseNs(t);
  const int64_t wait = ShortestRealWaitNs(t.lease_ms, t);
  if (wait < lease) {
    return Fail(Code::kInvalidArgument,
                "sequence.lease_ms: a takeover wait of " + std::to_string(t.lease_ms) +
                    " ms can end after " + std::to_string(wait) +
                    " ns of real time, before a lease of the same length ends (up to " +
                    std::to_string(lease) +
                    " ns): the wait must cover the lease (sequence.clock_drift_ppm " +
                    std::to_string(t.drift_ppm) + ", sequence.lease_margin_ms " +
                    std::to_string(t.margin_ms) + ")");
  }
  return {};
}

Result<void> CheckLeaseClocksReadable(LeaseClockSource& clocks) {
  auto r = TakeReading(clocks);
  if (!r) {
    return Fail(Code::kFailedPrecondition,
                "sequence leases need the kernel's lease clocks: " + r.error().message);
  }
  return {};
}

std::string SuspendCountWarning(LeaseClockSource& clocks) {
  if (clocks.SuspendCount()) return "";
  return "cannot read the kernel's count of suspends (/sys/power/suspend_stats/success): a "
         "suspend that the kernel measured as nothing would not end a sequence lease on this "
         "node";
}

std::string ClocksourceWarning(std::string_view clocksource) {
  if (clocksource != "kvm-clock" && clocksource != "xen" &&
      clocksource != "hyperv_clocksource_tsc_page") {
    return "";
  }
  std::string w = "the clocksource is the hypervisor's (" + std::string(clocksource) +
                  "): a pause of this guest that its clocks do not count is not seen by sequence "
                  "leases unless the time daemon corrects it with a step (chrony's makestep, "
                  "ntpd's -g/step threshold); configure it to step (docs/architecture.md, A1)";
  if (clocksource == "kvm-clock") {
    w += "; on kvm-clock CLOCK_MONOTONIC_RAW follows the host's clock, so "
         "sequence.clock_drift_ppm must bound the host's oscillator too";
  }
  return w;
}

std::string CurrentClocksource() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string text;
  if (!in || !std::getline(in, text)) return "";
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace kleaf::allocator
