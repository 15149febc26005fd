#include "allocator/lease_clock.h"

#include <gtest/gtest.h>

#include <deque>

namespace kleaf::allocator {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000 * kMs;

// Clocks a test moves by hand. Each reading reads CLOCK_MONOTONIC twice; the second read returns
// the first plus the next of `spreads` (0 when none is left), as a thread preempted between them
// would see.
class ScriptedClocks final : public LeaseClockSource {
 public:
  int64_t monotonic = 100 * kS;
  int64_t boottime = 100 * kS;
  int64_t raw = 90 * kS;
  int64_t realtime = 1'800'000'000 * kS;
  std::optional<uint64_t> suspends = 0;
  std::deque<int64_t> spreads;
  bool boottime_readable = true;
  int readings = 0;

  std::optional<int64_t> Now(LeaseClockId id) override {
    switch (id) {
      case LeaseClockId::kMonotonic:
        if (second_read_) {
          second_read_ = false;
          ++readings;
          const int64_t spread = spreads.empty() ? 0 : spreads.front();
          if (!spreads.empty()) spreads.pop_front();
          return monotonic + spread;
        }
        second_read_ = true;
        return monotonic;
      case LeaseClockId::kBoottime:
        if (!boottime_readable) return std::nullopt;
        return boottime;
      case LeaseClockId::kMonotonicRaw:
        return raw;
      case LeaseClockId::kRealtime:
        return realtime;
    }
    return std::nullopt;
  }
  std::optional<uint64_t> SuspendCount() override { return suspends; }

  // Real time passes while the process runs or is stopped: every clock advances.
  void Pass(int64_t ns) {
    monotonic += ns;
    boottime += ns;
    raw += ns;
    realtime += ns;
  }

 private:
  bool second_read_ = false;
};

LeaseReading Read(ScriptedClocks& c) {
  auto r = TakeReading(c);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return r.value_or(LeaseReading{});
}

TEST(LeaseClockTest, AStoppedProcessCountsTheTimeOnBothClocksAndNothingEndsTheLease) {
  ScriptedClocks c;
  const LeaseReading anchor = Read(c);
  c.Pass(10 * kS);  // SIGSTOP and SIGCONT: every clock ran
  const LeaseReading now = Read(c);
  EXPECT_EQ(HoldElapsedNs(anchor, now), 10 * kS);
  EXPECT_EQ(WaitElapsedNs(anchor, now), 10 * kS);
  EXPECT_FALSE(EventsBetween(anchor, now).Any());
}

TEST(LeaseClockTest, AnNtpSlewShortensTheHoldAndLengthensTheWait) {
  ScriptedClocks c;
  const LeaseReading anchor = Read(c);
  // The daemon slews: CLOCK_BOOTTIME (and the wall clock with it) runs 5 % fast, RAW does not.
  c.monotonic += 10'500 * kMs;
  c.boottime += 10'500 * kMs;
  c.realtime += 10'500 * kMs;
  c.raw += 10 * kS;
  LeaseReading now = Read(c);
  EXPECT_EQ(HoldElapsedNs(anchor, now), 10'500 * kMs);
  EXPECT_EQ(WaitElapsedNs(anchor, now), 10 * kS);
  EXPECT_FALSE(EventsBetween(anchor, now).Any()) << "a slew is no step";

  // And slow: the holder still counts the faster clock, the waiter the slower.
  c.monotonic += 9'500 * kMs;
  c.boottime += 9'500 * kMs;
  c.realtime += 9'500 * kMs;
  c.raw += 10 * kS;
  const LeaseReading later = Read(c);
  EXPECT_EQ(HoldElapsedNs(now, later), 10 * kS);
  EXPECT_EQ(WaitElapsedNs(now, later), 9'500 * kMs);
}

TEST(LeaseClockTest, AForwardStepOfTheWallClockEndsTheLeaseAndABackwardOneDoesNot) {
  ScriptedClocks c;
  const LeaseReading anchor = Read(c);
  c.Pass(kS);
  c.realtime += kWallStepNs;  // exactly the tolerance: the reading's spread, not a step
  EXPECT_FALSE(EventsBetween(anchor, Read(c)).Any());
  c.realtime += 1;
  ClockEvents e = EventsBetween(anchor, Read(c));
  EXPECT_TRUE(e.wall_forward);
  EXPECT_TRUE(e.EndsLease());
  EXPECT_EQ(HoldElapsedNs(anchor, Read(c)), kS) << "the wall clock measures nothing";

  ScriptedClocks b;
  const LeaseReading before = Read(b);
  b.Pass(kS);
  b.realtime -= 3 * kS;  // a step back
  e = EventsBetween(before, Read(b));
  EXPECT_TRUE(e.wall_back);
  EXPECT_FALSE(e.EndsLease());
  EXPECT_EQ(WaitElapsedNs(before, Read(b)), kS);
}

TEST(LeaseClockTest, ASuspendEndsTheLeaseWhetherTheKernelMeasuredItOrCountedIt) {
  // Measured: the kernel adds the suspended time to CLOCK_BOOTTIME (and the wall clock), not to
  // CLOCK_MONOTONIC or RAW.
  ScriptedClocks c;
  LeaseReading anchor = Read(c);
  c.Pass(kS);
  c.boottime += kSuspendNs;  // exactly the tolerance
  c.realtime += kSuspendNs;
  EXPECT_FALSE(EventsBetween(anchor, Read(c)).Any());
  c.boottime += 60 * kS;
  c.realtime += 60 * kS;
  ClockEvents e = EventsBetween(anchor, Read(c));
  EXPECT_TRUE(e.suspend);
  EXPECT_FALSE(e.wall_forward) << "the wall clock got the same time: no step";
  EXPECT_TRUE(e.EndsLease());
  EXPECT_EQ(WaitElapsedNs(anchor, Read(c)), kS) << "a waiter does not count a suspend";

  // Measured as nothing (the persistent clock's second), only counted.
  ScriptedClocks d;
  anchor = Read(d);
  d.Pass(kS);
  d.suspends = 1;
  e = EventsBetween(anchor, Read(d));
  EXPECT_TRUE(e.suspend);
  EXPECT_TRUE(e.EndsLease());

  // The count becoming unreadable, or readable, ends the lease too: it may hide a suspend.
  d.suspends.reset();
  EXPECT_FALSE(EventsBetween(Read(d), Read(d)).Any()) << "unreadable both times";
  EXPECT_TRUE(EventsBetween(anchor, Read(d)).suspend);
}

TEST(LeaseClockTest, APreemptedReadingIsTakenAgainAndGivesUpAfterItsAttempts) {
  ScriptedClocks c;
  c.spreads = {2 * kMs, kReadingSpreadNs + 1};
  auto r = TakeReading(c);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(c.readings, 3);
  EXPECT_EQ(r->monotonic_ns, c.monotonic);

  c.spreads = {kReadingSpreadNs};  // exactly the bound is good enough
  c.readings = 0;
  ASSERT_TRUE(TakeReading(c).has_value());
  EXPECT_EQ(c.readings, 1);

  c.spreads.assign(kReadingAttempts, 5 * kMs);
  c.readings = 0;
  auto refused = TakeReading(c);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
  EXPECT_EQ(c.readings, kReadingAttempts);
}

TEST(LeaseClockTest, AClockThatCannotBeReadRefusesTheStart) {
  ScriptedClocks c;
  c.boottime_readable = false;
  auto r = CheckLeaseClocksReadable(c);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("CLOCK_BOOTTIME"), std::string::npos) << r.error().message;

  c.boottime_readable = true;
  EXPECT_TRUE(CheckLeaseClocksReadable(c).has_value());
  EXPECT_EQ(SuspendCountWarning(c), "");
  c.suspends.reset();
  EXPECT_NE(SuspendCountWarning(c).find("/sys/power/suspend_stats/success"), std::string::npos);
}

// A1 (hold): a hypervisor's clocksource gets the warning that its pauses need a step; on kvm-clock
// also that RAW follows the host's clock. Any other clocksource, or none read, gets none.
TEST(LeaseClockTest, AHypervisorsClocksourceIsWarnedAbout) {
  for (const char* guest : {"kvm-clock", "xen", "hyperv_clocksource_tsc_page"}) {
    const std::string w = ClocksourceWarning(guest);
    EXPECT_NE(w.find(std::string("(") + guest + ")"), std::string::npos) << w;
    EXPECT_NE(w.find("step"), std::string::npos) << w;
    EXPECT_EQ(w.find("host's oscillator") != std::string::npos, std::string(guest) == "kvm-clock")
        << w;
  }
  for (const char* other : {"tsc", "hpet", "acpi_pm", "", "kvm"}) {
    EXPECT_EQ(ClocksourceWarning(other), "") << other;
  }
}

TEST(LeaseClockTest, TheDefaultsGiveTheDocumentedLeaseAndWait) {
  const LeaseTiming defaults;  // L 5000 ms, ρ 1000 ppm, δ 100 ms
  EXPECT_EQ(HoldLimitNs(defaults), 4'895 * kMs);
  EXPECT_EQ(TakeoverWaitNs(5000, defaults), 5'105 * kMs);
  EXPECT_EQ(TakeoverWaitNs(0, defaults), 100 * kMs) << "a released lease: the margin only";
  // The real times: a lease lasts at most 4,895 ms / 0.999, a wait at least 5,105 ms / 1.001.
  EXPECT_EQ(LongestRealLeaseNs(defaults), 4'899'899'900);
  EXPECT_EQ(ShortestRealWaitNs(5000, defaults), 5'099'900'099);
  EXPECT_EQ(HoldLimitNs(LeaseTiming{1000, 1000, 1000}), 0) << "never negative";
}

TEST(LeaseClockTest, EveryAllowedSettingHasAWaitThatCoversItsLease) {
  // The ranges of sequence.lease_ms (0, 1000-60000), clock_drift_ppm (1-100000) and
  // lease_margin_ms (0 to L/10; up to 1000 with L 0), at their ends and between.
  for (int64_t lease : {0, 1000, 1001, 4999, 5000, 17321, 59999, 60000}) {
    for (int64_t ppm : {1, 2, 999, 1000, 1001, 33333, 99999, 100000}) {
      const int64_t max_margin = lease == 0 ? 1000 : lease / 10;
      for (int64_t margin : {int64_t{0}, int64_t{1}, max_margin / 2, max_margin}) {
        const LeaseTiming t{lease, ppm, margin};
        EXPECT_TRUE(CheckLeaseCovered(t).has_value()) << lease << " " << ppm << " " << margin;
        const int64_t l = lease == 0 ? 1000 : lease;
        EXPECT_LE(LongestRealLeaseNs(t), l * kMs) << lease << " " << ppm << " " << margin;
        EXPECT_GE(ShortestRealWaitNs(l, t), l * kMs) << lease << " " << ppm << " " << margin;
        // A longer lease recorded by another owner is waited out in full too.
        EXPECT_GE(ShortestRealWaitNs(60000, t), 60000 * kMs);
      }
    }
  }
}

TEST(LeaseClockTest, SettingsOutsideTheirRangesAreRefusedNamingTheKey) {
  auto r = CheckLeaseCovered(LeaseTiming{5000, 1'000'000, 100});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_EQ(r.error().message.rfind("sequence.lease_ms: ", 0), 0u) << r.error().message;
  EXPECT_FALSE(CheckLeaseCovered(LeaseTiming{-1, 1000, 100}).has_value());
  EXPECT_FALSE(CheckLeaseCovered(LeaseTiming{5000, 1000, -1}).has_value());
}

TEST(LeaseClockTest, TheKernelsClocksGiveReadingsThatOnlyGoForward) {
  LeaseClockSource& kernel = KernelLeaseClocks();
  ASSERT_TRUE(CheckLeaseClocksReadable(kernel).has_value());
  auto first = TakeReading(kernel);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  timespec pause{0, 5'000'000};
  nanosleep(&pause, nullptr);
  auto second = TakeReading(kernel);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_GE(WaitElapsedNs(*first, *second), 5 * kMs);
  EXPECT_GE(HoldElapsedNs(*first, *second), WaitElapsedNs(*first, *second));
  EXPECT_GE(second->monotonic_ns, first->monotonic_ns);
  // No suspend between two readings 5 ms apart, and the count reads the same twice.
  EXPECT_FALSE(EventsBetween(*first, *second).suspend);
}

}  // namespace
}  // namespace kleaf::allocator
