// BatchBuffer: IDs handed out in batch order per key, never twice; the prefetch and eviction
// policy of BatchConsumer's fetch thread.
#include "client/batch_buffer.h"

#include <gtest/gtest.h>

#include <set>

namespace kleaf::client {
namespace {

IdBatch Segment(const std::string& tag, int64_t start, int64_t end) {
  IdBatch b;
  b.tag = tag;
  b.start = start;
  b.end = end;
  return b;
}

IdBatch Snowflake(const std::string& tag, std::vector<int64_t> ids) {
  IdBatch b;
  b.tag = tag;
  b.mode = IdBatch::Mode::kSnowflake;
  b.ids = std::move(ids);
  return b;
}

IdBatch Texts(const std::string& tag, IdBatch::Mode mode, std::vector<std::string> texts) {
  IdBatch b;
  b.tag = tag;
  b.mode = mode;
  b.texts = std::move(texts);
  return b;
}

const BatchKey kA{"a", IdBatch::Mode::kSegment};
const BatchKey kB{"b", IdBatch::Mode::kSegment};

TEST(BatchBufferTest, HandsOutEachIdOnceInBatchOrder) {
  BatchBuffer buffer({.max_batches = 4, .prefetch_batches = 1});
  buffer.Add(Segment("a", 10, 13));
  buffer.Add(Segment("b", 100, 102));
  buffer.Add(Segment("a", 20, 22));
  std::vector<int64_t> got;
  while (auto id = buffer.Next(kA)) got.push_back(*id);
  EXPECT_EQ(got, (std::vector<int64_t>{10, 11, 12, 20, 21}));
  EXPECT_EQ(buffer.total_batches(), 1);
  EXPECT_EQ(buffer.buffered_ids(kB), 2);
  EXPECT_FALSE(buffer.Next({"a", IdBatch::Mode::kSnowflake}));  // the mode is part of the key
}

TEST(BatchBufferTest, TakeSpansBatchesAndStopsWhenEmpty) {
  BatchBuffer buffer({.max_batches = 4, .prefetch_batches = 1});
  buffer.Add(Segment("a", 0, 3));
  buffer.Add(Segment("a", 50, 52));
  std::vector<int64_t> out;
  EXPECT_EQ(buffer.Take(kA, 4, out), 4);
  EXPECT_EQ(out, (std::vector<int64_t>{0, 1, 2, 50}));
  EXPECT_EQ(buffer.Take(kA, 10, out), 1);
  EXPECT_EQ(out.back(), 51);
  EXPECT_EQ(buffer.total_batches(), 0);
}

TEST(BatchBufferTest, TakeBatchGivesTheUnusedRestOfTheOldest) {
  BatchBuffer buffer({.max_batches = 4, .prefetch_batches = 1});
  buffer.Add(Snowflake("s", {5, 6, 7}));
  buffer.Add(Segment("a", 0, 10));
  ASSERT_EQ(buffer.Next({"s", IdBatch::Mode::kSnowflake}), 5);
  ASSERT_EQ(buffer.Next(kA), 0);
  auto first = buffer.TakeBatch();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->ids, (std::vector<int64_t>{6, 7}));
  auto second = buffer.TakeBatch();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->start, 1);
  EXPECT_EQ(second->end, 10);
  EXPECT_FALSE(buffer.TakeBatch());
}

TEST(BatchBufferTest, PrefetchesActiveKeysUpToTheDepthAndTheBound) {
  BatchBuffer buffer({.max_batches = 3, .prefetch_batches = 1});
  EXPECT_FALSE(buffer.WantsMore());  // nobody asked for anything yet
  EXPECT_FALSE(buffer.Next(kA));     // now a is in use
  EXPECT_TRUE(buffer.WantsMore());
  buffer.Add(Segment("a", 0, 2));
  EXPECT_TRUE(buffer.WantsMore());  // the current batch, and one ahead wanted
  buffer.Add(Segment("a", 2, 4));
  EXPECT_FALSE(buffer.WantsMore());
  ASSERT_EQ(buffer.Next(kA), 0);
  ASSERT_EQ(buffer.Next(kA), 1);  // first batch used up: claim the next one ahead
  EXPECT_TRUE(buffer.WantsMore());
  buffer.Add(Segment("b", 0, 1));
  buffer.Add(Segment("b", 1, 2));
  EXPECT_TRUE(buffer.Full());
  EXPECT_FALSE(buffer.WantsMore());  // full: stop claiming
}

TEST(BatchBufferTest, RoomIsWhatTheShortestKeyInUseLacksWithinTheBound) {
  BatchBuffer buffer({.max_batches = 5, .prefetch_batches = 2});
  EXPECT_EQ(buffer.Room(), 0);  // nothing in use
  EXPECT_FALSE(buffer.Next(kA));
  EXPECT_EQ(buffer.Room(), 3);  // current + 2 ahead
  buffer.Add(Segment("a", 0, 1));
  EXPECT_EQ(buffer.Room(), 2);
  buffer.Add(Segment("b", 0, 1));
  buffer.Add(Segment("b", 1, 2));
  buffer.Add(Segment("b", 2, 3));
  EXPECT_EQ(buffer.Room(), 1);  // a lacks 2, the bound leaves 1
}

// A waiter registers only once its key has nothing buffered (BatchConsumer's Take drains the key
// first). While it has nothing, it wants more even when the buffer is full, and makes room by
// evicting the newest batch of a key nobody waits for; once a batch of its key is in, it is served
// when it wakes and evicts nothing more: every eviction throws away a claimed batch, and a waiter
// slow to wake on a loaded machine made the fetch thread evict another stream's batches one after
// another (DatacenterTest.ProducersOfBothDatacentersPublishOnlyTheirOwnIds lost 23 of its 24).
TEST(BatchBufferTest, AWaiterWithNothingBufferedEvictsTheNewestBatchOfAnUnwantedKeyOnly) {
  BatchBuffer full({.max_batches = 3, .prefetch_batches = 1});
  full.Add(Segment("b", 0, 5));
  full.Add(Segment("b", 5, 10));
  full.Add(Segment("b", 10, 15));
  full.AddWaiter(kA, 1);
  EXPECT_TRUE(full.WantsMore());  // a waiter with nothing buffered wants more, even when full
  ASSERT_TRUE(full.EvictForWaiter());
  EXPECT_EQ(full.dropped_batches(), 1);
  EXPECT_EQ(full.buffered_ids(kB), 10);  // b's newest batch went, the others stay
  EXPECT_EQ(full.Next(kB), 0);
  full.Add(Segment("a", 0, 5));  // claimed for the waiter, which has not woken yet
  EXPECT_FALSE(full.WantsMore()) << "a waiter with a batch buffered is served when it wakes";
  EXPECT_FALSE(full.EvictForWaiter());
  EXPECT_EQ(full.dropped_batches(), 1);
  EXPECT_EQ(full.buffered_ids(kA), 5);
  full.AddWaiter(kA, -1);
  std::vector<int64_t> taken;
  EXPECT_EQ(full.Take(kA, 5, taken), 5);
  // The waiter left with its batch; b's two batches stay and there is room for a's next one.
  EXPECT_EQ(full.buffered_ids(kB), 9);
  EXPECT_TRUE(full.WantsMore());
  // Only a waiting key is never evicted: with b's batches all waited for, nothing can go.
  BatchBuffer waited({.max_batches = 1, .prefetch_batches = 0});
  waited.Add(Segment("b", 0, 5));
  waited.AddWaiter(kB, 1);
  waited.AddWaiter(kA, 1);
  EXPECT_TRUE(waited.WantsMore());
  EXPECT_FALSE(waited.EvictForWaiter());
}

TEST(BatchBufferTest, TextIdsAreHandedOutOnceInBatchOrderAndTheRestKeepsItsPlace) {
  BatchBuffer buffer({.max_batches = 4, .prefetch_batches = 1});
  const BatchKey u{"a", IdBatch::Mode::kUuid7};
  buffer.Add(Texts("a", IdBatch::Mode::kUuid7, {"u1", "u2", "u3"}));
  buffer.Add(Texts("a", IdBatch::Mode::kUlid, {"L1"}));
  buffer.Add(Texts("a", IdBatch::Mode::kUuid7, {"u4"}));
  std::vector<std::string> out;
  EXPECT_EQ(buffer.TakeText(u, 2, out), 2);
  EXPECT_EQ(buffer.buffered_ids(u), 2);
  // The rest of the oldest batch, then the ULID batch: the mode is part of the key.
  auto rest = buffer.TakeBatch();
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->texts, (std::vector<std::string>{"u3"}));
  EXPECT_EQ(buffer.TakeText({"a", IdBatch::Mode::kUlid}, 5, out), 1);
  EXPECT_EQ(buffer.TakeText(u, 5, out), 1);
  EXPECT_EQ(out, (std::vector<std::string>{"u1", "u2", "L1", "u4"}));
  EXPECT_EQ(buffer.total_batches(), 0);
  // 64-bit IDs as text: decimal.
  buffer.Add(Segment("a", 9, 11));
  EXPECT_EQ(buffer.TakeText(kA, 5, out), 2);
  EXPECT_EQ(out.back(), "10");
}

}  // namespace
}  // namespace kleaf::client
