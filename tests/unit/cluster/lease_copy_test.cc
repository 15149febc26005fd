// The store's copy of a partition's newest committed lease record (docs/architecture.md, "I5 with
// a lease", R3): its encoding, and what a write that moves the applied offset keeps of it.
#include <gtest/gtest.h>

#include "cluster/restore.h"
#include "state/lease_record.h"

namespace kleaf::cluster {
namespace {

allocator::FoundLease Found(uint64_t generation, int64_t offset, int64_t lease_ms,
                            state::LeaseState st = state::LeaseState::kHeld) {
  state::LeaseRecord r{generation, "h-" + std::to_string(generation), "node", lease_ms, true, st};
  return allocator::FoundLease{r, offset, lease_ms};
}

TEST(LeaseCopyTest, EveryFieldSurvivesEncodeAndDecode) {
  allocator::FoundLease f = Found(9, 1234, 7000, state::LeaseState::kReleased);
  f.generation_lease_ms = 9000;
  auto back = DecodeLeaseCopy(EncodeLeaseCopy(f));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->record.generation, 9u);
  EXPECT_EQ(back->record.holder, "h-9");
  EXPECT_EQ(back->record.lease_ms, 7000);
  EXPECT_EQ(back->record.state, state::LeaseState::kReleased);
  EXPECT_EQ(back->offset, 1234);
  EXPECT_EQ(back->generation_lease_ms, 9000);
  auto corrupt = DecodeLeaseCopy("{\"offset\":1}");
  ASSERT_FALSE(corrupt);
  EXPECT_EQ(corrupt.error().code, Code::kInternal);
  EXPECT_NE(corrupt.error().message.find("lease copy"), std::string::npos);
}

// The copy keeps the newer record in R3's order with the largest lease_ms of its generation, and
// every such write records the completeness point, with a record or without one.
TEST(LeaseCopyTest, AWriteKeepsTheNewestRecordAndRecordsTheCompletenessPoint) {
  state::Store::Batch batch;
  KeepLeaseCopy(batch, 2, Found(3, 10, 8000), Found(3, 20, 2000), 21);
  ASSERT_EQ(batch.texts.size(), 1u);
  EXPECT_EQ(batch.texts[0].first, LeaseCopyKey(2));
  auto kept = DecodeLeaseCopy(batch.texts[0].second);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->offset, 20);
  EXPECT_EQ(kept->generation_lease_ms, 8000) << "the generation's largest lease_ms is carried";
  ASSERT_EQ(batch.values.size(), 1u);
  EXPECT_EQ(batch.values[0], std::make_pair(LeaseCompleteKey(2), int64_t{21}));

  // An older generation at a later offset (a fenced owner's append) does not replace the copy.
  state::Store::Batch older;
  KeepLeaseCopy(older, 2, Found(5, 10, 1000), Found(4, 30, 9000), 31);
  auto still = DecodeLeaseCopy(older.texts.at(0).second);
  ASSERT_TRUE(still);
  EXPECT_EQ(still->record.generation, 5u);

  // No record: only the point moves (the copy stays as it was).
  state::Store::Batch none;
  KeepLeaseCopy(none, 2, std::nullopt, std::nullopt, 40);
  EXPECT_TRUE(none.texts.empty());
  ASSERT_EQ(none.values.size(), 1u);
  EXPECT_EQ(none.values[0].second, 40);
}

}  // namespace
}  // namespace kleaf::cluster
