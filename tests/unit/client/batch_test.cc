#include "kleaf/batch.h"

#include <gtest/gtest.h>

#include <cctype>

namespace kleaf {
namespace {

TEST(BatchTest, SegmentRoundTripsWithIdsAsStrings) {
  IdBatch b{"order", IdBatch::Mode::kSegment, 1000, 2000, {}};
  std::string json = EncodeBatch(b);
  EXPECT_EQ(json, R"({"end":"2000","mode":"segment","start":"1000","tag":"order"})");
  auto d = DecodeBatch(json);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->tag, "order");
  EXPECT_EQ(d->mode, IdBatch::Mode::kSegment);
  EXPECT_EQ(d->size(), 1000);
  EXPECT_EQ(d->at(0), 1000);
  EXPECT_EQ(d->at(999), 1999);
}

TEST(BatchTest, SnowflakeRoundTripsAndNumbersAreAccepted) {
  IdBatch b{"msg", IdBatch::Mode::kSnowflake, 0, 0, {1256557484213448722, 1256557484213448723}};
  auto d = DecodeBatch(EncodeBatch(b));
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->ids, b.ids);
  auto n = DecodeBatch(R"({"tag":"t","mode":"snowflake","ids":[5,6]})");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->at(1), 6);
}

TEST(BatchTest, MalformedBatchesNameTheField) {
  EXPECT_EQ(DecodeBatch("nope").error(), "not a JSON object");
  EXPECT_EQ(DecodeBatch(R"({"mode":"segment","start":"1","end":"2"})").error().rfind("tag", 0), 0u);
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"x"})").error().rfind("mode", 0), 0u);
  EXPECT_NE(DecodeBatch(R"({"tag":"t","mode":"segment","start":"5","end":"5"})").error().find("end"),
            std::string::npos);
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"segment","start":"-5","end":"5"})").error().rfind("start", 0), 0u);
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"segment","start":"1x","end":"5"})").error().rfind("start", 0), 0u);
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"snowflake","ids":[]})").error().rfind("ids", 0), 0u);
}

TEST(StreamTopicTest, NamesTheModeAndTheTagAndNeverSharesATopic) {
  EXPECT_EQ(StreamTopic("kleaf.ids", "order", IdBatch::Mode::kSegment), "kleaf.ids.segment.order");
  EXPECT_EQ(StreamTopic("kleaf.ids", "order", IdBatch::Mode::kSnowflake),
            "kleaf.ids.snowflake.order");
  // ':' is not allowed in a topic name; '_' is the escape, so it is doubled.
  EXPECT_EQ(StreamTopic("a.ids", "x:y_z", IdBatch::Mode::kSegment), "a.ids.segment.x_cy__z");
  EXPECT_NE(StreamTopic("a.ids", "x:y", IdBatch::Mode::kSegment),
            StreamTopic("a.ids", "x_cy", IdBatch::Mode::kSegment));
  EXPECT_NE(StreamTopic("a.ids", "x_", IdBatch::Mode::kSegment),
            StreamTopic("a.ids", "x:", IdBatch::Mode::kSegment));
  for (char c : StreamTopic("a.ids", "A-z.0:9_", IdBatch::Mode::kSegment)) {
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')
        << c;
  }
}

}  // namespace
}  // namespace kleaf
