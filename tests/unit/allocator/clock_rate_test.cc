// A1's check on the node (allocator/clock_rate.h): the kernel's frequency correction against ρ/2,
// drift only after it stayed above for the whole window, and back only after it stayed below as
// long; the waits' ρ raised to twice the largest size seen meanwhile.
#include "allocator/clock_rate.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kleaf::allocator {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kRho = 1000;  // ppm: ρ/2 is 500

KernelClockState Synced(double ppm) { return {ppm, true, 0}; }

// Notes one reading a second of `ppm` over [from_s, to_s).
void Feed(ClockDriftWatch& w, int64_t from_s, int64_t to_s, double ppm, bool synced = true) {
  for (int64_t t = from_s; t < to_s; ++t) w.Note(t * kS, {ppm, synced, 0});
}

TEST(ClockDriftWatchTest, DriftOnlyAfterTheCorrectionStayedAboveHalfRhoForTheWindow) {
  ClockDriftWatch w(kRho, 600 * kS);
  Feed(w, 0, 600, 800);
  EXPECT_FALSE(w.Drifting()) << "599 s above is short of the window";
  EXPECT_EQ(w.WaitRhoPpm(), kRho);
  w.Note(600 * kS, Synced(-900));  // the size counts, whichever the sign
  EXPECT_TRUE(w.Drifting());
  EXPECT_EQ(w.WaitRhoPpm(), 1800) << "twice the largest size seen";
}

TEST(ClockDriftWatchTest, OneReadingAtOrBelowHalfRhoStartsTheRunAgain) {
  ClockDriftWatch w(kRho, 600 * kS);
  Feed(w, 0, 500, 800);
  w.Note(500 * kS, Synced(500));  // exactly ρ/2 is within
  Feed(w, 501, 1100, 800);
  EXPECT_FALSE(w.Drifting());
  w.Note(1101 * kS, Synced(800));
  EXPECT_TRUE(w.Drifting());
}

TEST(ClockDriftWatchTest, DriftEndsOnlyAfterTheCorrectionStayedWithinForTheWindow) {
  ClockDriftWatch w(kRho, 600 * kS);
  Feed(w, 0, 601, 3000);
  ASSERT_TRUE(w.Drifting());
  EXPECT_EQ(w.WaitRhoPpm(), 6000);
  Feed(w, 601, 1000, 100);
  w.Note(1000 * kS, Synced(700));  // a reading above restarts the run below
  Feed(w, 1001, 1600, 100);
  EXPECT_TRUE(w.Drifting());
  EXPECT_EQ(w.WaitRhoPpm(), 6000) << "the largest size of the drift, not the last";
  w.Note(1601 * kS, Synced(100));
  EXPECT_FALSE(w.Drifting());
  EXPECT_EQ(w.WaitRhoPpm(), kRho);
}

TEST(ClockDriftWatchTest, AnUnsynchronizedClockSaysNothingOfTheRate) {
  ClockDriftWatch w(kRho, 600 * kS);
  Feed(w, 0, 400, 900);
  Feed(w, 400, 401, 900, /*synced=*/false);
  Feed(w, 401, 1000, 900);
  EXPECT_FALSE(w.Drifting()) << "the run restarted at the unsynchronized reading (599 s since)";
  w.Note(1001 * kS, Synced(900));
  EXPECT_TRUE(w.Drifting());
}

TEST(ClockDriftWatchTest, ASmallRhoIsNeverLoweredForTheWait) {
  ClockDriftWatch w(5000, 10 * kS);
  Feed(w, 0, 11, 2600);
  ASSERT_TRUE(w.Drifting());
  EXPECT_EQ(w.WaitRhoPpm(), 5200);
  ClockDriftWatch wide(100'000, 10 * kS);
  Feed(wide, 0, 11, 60'000);
  ASSERT_TRUE(wide.Drifting());
  EXPECT_EQ(wide.WaitRhoPpm(), 120'000);
}

// The kernel's answer on this machine: readable without any right, and a correction within
// adjtimex's range (±500 ppm of freq, ±10 % of tick).
TEST(KernelClockRateTest, AdjtimexIsReadableWithoutRights) {
  auto s = KernelClockRate().Read();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_LT(std::abs(s->correction_ppm), 100'500.0);
}

}  // namespace
}  // namespace kleaf::allocator
