// ClaimableRun: which fetched records one offset commit of BatchConsumer may claim (I4).
#include "client/claim.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>

namespace kleaf::client {
namespace {

struct Record {
  std::string topic;
  int32_t partition;
  int64_t offset;
};

std::deque<Record> Held(std::initializer_list<std::pair<int32_t, int64_t>> records) {
  std::deque<Record> held;
  for (auto [partition, offset] : records) held.push_back({"ids", partition, offset});
  return held;
}

TEST(ClaimableRunTest, TakesConsecutiveRecordsOfThePartitionUpToTheRoom) {
  EXPECT_EQ(ClaimableRun(Held({{0, 1}, {0, 2}, {0, 3}}), 2), 2u);
  EXPECT_EQ(ClaimableRun(Held({{0, 1}, {0, 2}, {0, 3}}), 8), 3u);
  // Offsets may jump (transaction markers sit between batches).
  EXPECT_EQ(ClaimableRun(Held({{0, 1}, {0, 3}, {0, 9}}), 8), 3u);
}

TEST(ClaimableRunTest, StopsAtAnotherPartitionOrTopic) {
  EXPECT_EQ(ClaimableRun(Held({{0, 1}, {1, 2}, {0, 3}}), 8), 1u);
  std::deque<Record> held = {{"ids", 0, 1}, {"other", 0, 2}};
  EXPECT_EQ(ClaimableRun(held, 8), 1u);
}

// A re-fetch from a stale position puts lower offsets behind higher ones: committing the last of
// [40, 20] (offset 21) would claim batch 20 a second time and move the group's offset back.
TEST(ClaimableRunTest, StopsWhereAnOffsetGoesBack) {
  EXPECT_EQ(ClaimableRun(Held({{0, 40}, {0, 20}, {0, 21}}), 2), 1u);
  EXPECT_EQ(ClaimableRun(Held({{0, 40}, {0, 41}, {0, 41}}), 8), 2u);
}

TEST(ClaimableRunTest, NothingToClaimOrNoRoom) {
  EXPECT_EQ(ClaimableRun(std::deque<Record>{}, 8), 0u);
  EXPECT_EQ(ClaimableRun(Held({{0, 1}}), 0), 0u);
}

}  // namespace
}  // namespace kleaf::client
