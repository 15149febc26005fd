#include "state/store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "state/records.h"
#include "tests/unit/testing/temp_dir.h"

namespace kleaf::state {
namespace {

TagRecord Record(std::string tag, int64_t max_id, int64_t step = 1000) {
  TagRecord r;
  r.tag = std::move(tag);
  r.max_id = max_id;
  r.step = step;
  return r;
}

void ExpectSameRecord(const TagRecord& a, const TagRecord& b) {
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.max_id, b.max_id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.update_time_ms, b.update_time_ms);
  EXPECT_EQ(a.deleted, b.deleted);
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    auto s = Store::Open(path_);
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.Sub("state");
  std::unique_ptr<Store> store_;
};

// One batch holds every kind of record (Records), named values and named text, written at once
// and each readable back by its own getter.
TEST_F(StoreTest, ABatchWritesEveryKindOfRecordAndTheNamedValuesAndText) {
  Records records;
  TagRecord tag_record;
  tag_record.tag = "order";
  tag_record.max_id = 42;
  records.tags.push_back(tag_record);
  WorkerRecord w;
  w.worker_id = 7;
  w.holder = "h";
  records.workers.push_back(w);
  SpaceRecord space;
  space.space = "inbox";
  space.section_size = 100;
  space.step = 10;
  records.spaces.push_back(space);
  records.sections.push_back(SectionRecord{"inbox", 3, 100, 990});
  Store::Batch batch;
  batch.Append(records);
  batch.values.emplace_back("n", 5);
  batch.texts.emplace_back("t", "text");
  ASSERT_TRUE(store_->Write(batch, /*sync=*/true));
  Reopen();
  auto tag = store_->GetTag("order");
  ASSERT_TRUE(tag && *tag);
  EXPECT_EQ((*tag)->max_id, 42);
  auto worker = store_->GetWorker(7);
  ASSERT_TRUE(worker && *worker);
  EXPECT_EQ((*worker)->holder, "h");
  auto got_space = store_->GetSpace("inbox");
  ASSERT_TRUE(got_space && *got_space);
  EXPECT_EQ((*got_space)->section_size, 100);
  auto section = store_->GetSection("inbox", 3);
  ASSERT_TRUE(section && *section);
  EXPECT_EQ((*section)->max_seq, 990u);
  EXPECT_EQ(store_->GetValue("n").value_or(std::nullopt), std::optional<int64_t>(5));
  EXPECT_EQ(store_->GetText("t").value_or(std::nullopt), std::optional<std::string>("text"));
}

// Records::Append keeps each kind's order, and ForEachRecord visits kind by kind and stops at the
// first error.
TEST(RecordsTest, AppendKeepsTheOrderAndForEachRecordStopsAtTheFirstError) {
  Records a, b;
  TagRecord t1, t2;
  t1.tag = "t1";
  t2.tag = "t2";
  a.tags.push_back(t1);
  a.sections.push_back(SectionRecord{"s", 1, 10, 10});
  b.tags.push_back(t2);
  b.sections.push_back(SectionRecord{"s", 2, 10, 20});
  a.Append(std::move(b));
  std::vector<std::string> keys;
  auto all = ForEachRecord(a, [&](const auto& r) -> Result<void> {
    keys.push_back(KeyOf(r));
    return {};
  });
  ASSERT_TRUE(all);
  EXPECT_EQ(keys, (std::vector<std::string>{"seg/t1", "seg/t2", "sec/s/1", "sec/s/2"}));
  keys.clear();
  auto stopped = ForEachRecord(a, [&](const auto& r) -> Result<void> {
    keys.push_back(KeyOf(r));
    if (keys.size() == 2) return Fail(Code::kUnavailable, "full");
    return {};
  });
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().message, "full");
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(Records{}.empty());
}

TEST_F(StoreTest, MissingTagIsEmptyNotAnError) {
  auto r = store_->GetTag("order");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->has_value());
}

TEST_F(StoreTest, PutThenGetReturnsEveryField) {
  TagRecord in = Record("order", 4242, 17);
  in.description = "orders, \"quoted\" and ünïcode\n";
  in.update_time_ms = 1'700'000'000'123;
  in.deleted = true;
  ASSERT_TRUE(store_->PutTag(in));
  auto out = store_->GetTag("order");
  ASSERT_TRUE(out);
  ASSERT_TRUE(out->has_value());
  ExpectSameRecord(**out, in);
}

TEST_F(StoreTest, PutOverwrites) {
  ASSERT_TRUE(store_->PutTag(Record("order", 1)));
  ASSERT_TRUE(store_->PutTag(Record("order", 1001)));
  auto out = store_->GetTag("order");
  ASSERT_TRUE(out && out->has_value());
  EXPECT_EQ((*out)->max_id, 1001);
}

TEST_F(StoreTest, ExtremeValuesRoundTrip) {
  TagRecord in = Record(std::string(128, 't'), int64_t{1} << 62, 1'000'000'000);
  ASSERT_TRUE(store_->PutTag(in));
  auto out = store_->GetTag(in.tag);
  ASSERT_TRUE(out && out->has_value());
  ExpectSameRecord(**out, in);
}

TEST_F(StoreTest, ListIsOrderedByTagAndIncludesDeletedOnes) {
  ASSERT_TRUE(store_->PutTag(Record("b", 2)));
  TagRecord gone = Record("a.deleted", 3);
  gone.deleted = true;
  ASSERT_TRUE(store_->PutTag(gone));
  ASSERT_TRUE(store_->PutTag(Record("a", 1)));
  ASSERT_TRUE(store_->PutTag(Record("Z", 26)));
  ASSERT_TRUE(store_->PutValue("snowflake.last_ms", 99));  // a value is not a tag

  auto list = store_->ListTags();
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0].tag, "Z");
  EXPECT_EQ((*list)[1].tag, "a");
  EXPECT_EQ((*list)[2].tag, "a.deleted");
  EXPECT_TRUE((*list)[2].deleted);
  EXPECT_EQ((*list)[3].tag, "b");
  EXPECT_EQ((*list)[3].max_id, 2);
}

TEST_F(StoreTest, EmptyStoreListsNothing) {
  auto list = store_->ListTags();
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());
}

TEST_F(StoreTest, ValuesRoundTrip) {
  auto missing = store_->GetValue("nothing");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());

  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1'700'000'000'000},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(v);
    ASSERT_TRUE(store_->PutValue("v", v));
    auto out = store_->GetValue("v");
    ASSERT_TRUE(out && out->has_value());
    EXPECT_EQ(**out, v);
  }
}

TEST_F(StoreTest, ValuesAndTagsDoNotShareKeys) {
  ASSERT_TRUE(store_->PutValue("order", 5));
  auto tag = store_->GetTag("order");
  ASSERT_TRUE(tag);
  EXPECT_FALSE(tag->has_value());
  ASSERT_TRUE(store_->PutTag(Record("x", 7)));
  auto value = store_->GetValue("x");
  ASSERT_TRUE(value);
  EXPECT_FALSE(value->has_value());
}

TEST_F(StoreTest, EverythingSurvivesReopen) {
  TagRecord a = Record("order", 123456, 50);
  a.description = "durable";
  a.update_time_ms = 42;
  TagRecord b = Record("user", 9);
  b.deleted = true;
  ASSERT_TRUE(store_->PutTag(a));
  ASSERT_TRUE(store_->PutTag(b));
  ASSERT_TRUE(store_->PutValue("snowflake.last_ms", 1'700'000'000'999));

  Reopen();

  auto got = store_->GetTag("order");
  ASSERT_TRUE(got && got->has_value());
  ExpectSameRecord(**got, a);
  auto list = store_->ListTags();
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  ExpectSameRecord((*list)[1], b);
  auto v = store_->GetValue("snowflake.last_ms");
  ASSERT_TRUE(v && v->has_value());
  EXPECT_EQ(**v, 1'700'000'000'999);
}

TEST_F(StoreTest, OpeningTheSamePathTwiceFailsWithAClearMessage) {
  auto second = Store::Open(path_);
  ASSERT_FALSE(second) << "a second store opened the same RocksDB directory";
  EXPECT_EQ(second.error().code, Code::kFailedPrecondition);
  EXPECT_NE(second.error().message.find(path_), std::string::npos) << second.error().message;
  EXPECT_NE(second.error().message.find("another kleaf process"), std::string::npos)
      << second.error().message;
  // The first store is unharmed.
  EXPECT_TRUE(store_->PutValue("still", 1));
}

TEST_F(StoreTest, PathCanBeOpenedAgainOnceClosed) {
  ASSERT_TRUE(store_->PutValue("n", 1));
  store_.reset();
  auto again = Store::Open(path_);
  ASSERT_TRUE(again) << again.error().message;
  auto v = (*again)->GetValue("n");
  ASSERT_TRUE(v && v->has_value());
  EXPECT_EQ(**v, 1);
}

TEST(StoreOpenTest, CreatesAMissingDirectory) {
  testing::TempDir dir;
  const std::string path = dir.Sub("fresh");
  ASSERT_FALSE(std::filesystem::exists(path));
  auto s = Store::Open(path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST(StoreOpenTest, PathThatIsAFileFails) {
  testing::TempDir dir;
  const std::string file = dir.Sub("not-a-dir");
  std::ofstream(file) << "hello";
  auto s = Store::Open(file);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(file), std::string::npos) << s.error().message;
}

TEST(RecordsTest, EncodeDecodeRoundTrip) {
  TagRecord in = Record("a:b-c_d.e", 99, 3);
  in.description = "{\"json\": inside}";
  in.update_time_ms = 7;
  in.deleted = true;
  auto out = DecodeTag(EncodeTag(in));
  ASSERT_TRUE(out) << out.error().message;
  ExpectSameRecord(*out, in);
  EXPECT_EQ(TagKey("order"), "seg/order");
}

TEST(RecordsTest, CorruptRecordIsAnError) {
  for (const char* bad :
       {"", "{", "[]", "{\"tag\":\"a\"}", "{\"tag\":1,\"max_id\":1,\"step\":1}"}) {
    SCOPED_TRACE(bad);
    auto r = DecodeTag(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInternal);
  }
}


TEST_F(StoreTest, SegmentRestsAreTakenOnceAndSurviveAReopen) {
  ASSERT_TRUE(store_->PutSegmentRests({{"standalone", "order", 21, 101}, {"standalone", "order", 101, 201},
                                       {"cluster:kleaf", "user", 7, 9}}));
  Reopen();
  auto taken = store_->TakeSegmentRests();
  ASSERT_TRUE(taken) << taken.error().message;
  ASSERT_EQ(taken->size(), 3u);
  int64_t ids = 0;
  for (const auto& r : *taken) ids += r.end - r.start;
  EXPECT_EQ(ids, 80 + 100 + 2);
  Reopen();
  auto again = store_->TakeSegmentRests();
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty()) << "a rest is handed back at most once";
}

}  // namespace
}  // namespace kleaf::state
