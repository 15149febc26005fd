#include "allocator/offset_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace kleaf::allocator {
namespace {

TEST(OffsetTableTest, AnOffsetNeverSetReadsZeroAndAnEmptyTableHoldsNoMemory) {
  OffsetTable t(100000);
  EXPECT_EQ(t.Get(0), 0u);
  EXPECT_EQ(t.Get(99999), 0u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.MemoryBytes(), 0u);
}

TEST(OffsetTableTest, EveryDeltaSetIsReadBackThroughGrowthAndOverwrites) {
  OffsetTable t(OffsetTable::kFree);  // the largest section: offsets up to 2^32 - 2
  std::unordered_map<uint32_t, uint32_t> want;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t offset = i % 3 == 0 ? rng() % 1000 : rng() % (OffsetTable::kFree);
    const uint32_t delta = 1 + rng() % 0xFFFFFFFE;
    t.Set(offset, delta);
    want[offset] = delta;
  }
  t.Set(OffsetTable::kFree - 1, 0xFFFFFFFF);
  want[OffsetTable::kFree - 1] = 0xFFFFFFFF;
  EXPECT_EQ(t.size(), want.size());
  EXPECT_FALSE(t.direct());
  for (const auto& [offset, delta] : want) ASSERT_EQ(t.Get(offset), delta) << offset;
}

TEST(OffsetTableTest, AHashedTableStaysBetweenNineSixteenthsAndThreeQuartersFull) {
  OffsetTable t(0xF0000000);
  for (uint32_t i = 1; i <= 100000; ++i) {
    t.Set(i * 7919, i);
    const double slots = static_cast<double>(t.MemoryBytes()) / 8;
    ASSERT_LE(static_cast<double>(i), slots * 0.75) << i;
    if (i >= 16) {
      ASSERT_GE(static_cast<double>(i), slots * 0.55) << i;
    }
  }
}

TEST(OffsetTableTest, AFullSectionSwitchesToOneUint32PerOffsetAndKeepsEveryDelta) {
  OffsetTable t(1000);
  for (uint32_t i = 0; i < 1000; ++i) {
    t.Set(i, i + 1);
    // Never more than the hashed table it replaced: 14.3 bytes per entry at most.
    if (i >= 7) {
      ASSERT_LE(t.MemoryBytes(), (i + 1) * 143 / 10) << i;
    }
  }
  EXPECT_TRUE(t.direct());
  EXPECT_EQ(t.MemoryBytes(), 4000u);
  EXPECT_EQ(t.size(), 1000u);
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(t.Get(i), i + 1);
  t.Set(5, 77);
  EXPECT_EQ(t.Get(5), 77u);
  EXPECT_EQ(t.size(), 1000u);
}

TEST(OffsetTableTest, ASmallSectionIsDirectFromTheFirstKey) {
  OffsetTable t(10);
  t.Set(9, 3);
  EXPECT_TRUE(t.direct());
  EXPECT_EQ(t.Get(9), 3u);
  EXPECT_EQ(t.Get(0), 0u);
  EXPECT_EQ(t.MemoryBytes(), 40u);
}

TEST(OffsetTableTest, ClearForgetsEveryOffsetAndReleasesTheMemory) {
  OffsetTable t(1000);
  for (uint32_t i = 0; i < 1000; ++i) t.Set(i, 9);
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.MemoryBytes(), 0u);
  EXPECT_FALSE(t.direct());
  EXPECT_EQ(t.Get(3), 0u);
  t.Set(3, 1);
  EXPECT_EQ(t.Get(3), 1u);
}

}  // namespace
}  // namespace kleaf::allocator
