#include "kleaf/batch.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "snowflake/id128.h"
#include "snowflake/snowflake.h"

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

// A batch names the consumer group its producer publishes it for; batches without one (older
// producers) decode with an empty group, and a group that is not a non-empty string is malformed.
TEST(BatchTest, TheGroupABatchIsPublishedForRoundTrips) {
  IdBatch b{"order", IdBatch::Mode::kSegment, 1, 3, {}};
  b.group = "kleaf.ids.consumers";
  const std::string json = EncodeBatch(b);
  EXPECT_EQ(
      json,
      R"({"end":"3","group":"kleaf.ids.consumers","mode":"segment","start":"1","tag":"order"})");
  auto d = DecodeBatch(json);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->group, "kleaf.ids.consumers");
  auto without = DecodeBatch(R"({"tag":"t","mode":"segment","start":"1","end":"9"})");
  ASSERT_TRUE(without) << without.error();
  EXPECT_EQ(without->group, "");
  for (const char* bad : {R"({"tag":"t","mode":"segment","start":"1","end":"9","group":""})",
                          R"({"tag":"t","mode":"segment","start":"1","end":"9","group":7})"}) {
    auto r = DecodeBatch(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("group"), std::string::npos) << r.error();
  }
}

// More than one datacenter: a segment batch lists its IDs (one residue class, not consecutive),
// and has no start/end, so that a consumer that knows only ranges skips it as malformed.
TEST(BatchTest, AListedSegmentBatchRoundTripsAndCannotBeReadAsARange) {
  IdBatch b{"order", IdBatch::Mode::kSegment, 0, 0, {3, 5, 7}};
  const std::string json = EncodeBatch(b);
  EXPECT_EQ(json, R"({"ids":["3","5","7"],"mode":"segment","tag":"order"})");
  auto d = DecodeBatch(json);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->at(0), 3);
  EXPECT_EQ(d->at(2), 7);
  EXPECT_FALSE(DecodeBatch(R"({"tag":"t","mode":"segment","start":"1","end":"9","ids":["3"]})"));
  EXPECT_FALSE(DecodeBatch(R"({"tag":"t","mode":"segment","ids":[]})"));
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

// RFC 9562's example UUIDv7 (appendix A.6) and the ULID specification's example.
constexpr char kRfcUuid7[] = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
constexpr char kSpecUlid[] = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

TEST(BatchTest, Uuid7AndUlidRoundTripAsCanonicalText) {
  IdBatch u{"order", IdBatch::Mode::kUuid7,
            0,       0,
            {},      {kRfcUuid7, "0190a1b2-c3d4-7e5f-a012-3456789abcde"}};
  std::string json = EncodeBatch(u);
  EXPECT_EQ(json, R"({"ids":["017f22e2-79b0-7cc3-98c4-dc0c0c07398f",)"
                  R"("0190a1b2-c3d4-7e5f-a012-3456789abcde"],"mode":"uuid7","tag":"order"})");
  auto d = DecodeBatch(json);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->mode, IdBatch::Mode::kUuid7);
  EXPECT_EQ(d->texts, u.texts);
  EXPECT_TRUE(d->ids.empty());
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->text_at(1), "0190a1b2-c3d4-7e5f-a012-3456789abcde");

  IdBatch l{"order", IdBatch::Mode::kUlid, 0, 0, {}, {kSpecUlid}};
  auto dl = DecodeBatch(EncodeBatch(l));
  ASSERT_TRUE(dl) << dl.error();
  EXPECT_EQ(dl->mode, IdBatch::Mode::kUlid);
  EXPECT_EQ(dl->texts, l.texts);
  EXPECT_EQ(dl->size(), 1);
  // 64-bit batches as text: decimal.
  IdBatch s{"t", IdBatch::Mode::kSegment, 7, 9, {}, {}};
  EXPECT_EQ(s.text_at(1), "8");
}

TEST(BatchTest, ModesHaveOneNameEach) {
  for (auto m : {IdBatch::Mode::kSegment, IdBatch::Mode::kSnowflake, IdBatch::Mode::kUuid7,
                 IdBatch::Mode::kUlid}) {
    IdBatch::Mode back = IdBatch::Mode::kSegment;
    ASSERT_TRUE(ParseMode(ModeName(m), back)) << ModeName(m);
    EXPECT_EQ(back, m);
  }
  IdBatch::Mode m = IdBatch::Mode::kSegment;
  EXPECT_FALSE(ParseMode("UUID7", m));
  EXPECT_FALSE(ParseMode("uuid", m));
  EXPECT_TRUE(Is128Bit(IdBatch::Mode::kUuid7));
  EXPECT_TRUE(Is128Bit(IdBatch::Mode::kUlid));
  EXPECT_FALSE(Is128Bit(IdBatch::Mode::kSegment));
  EXPECT_FALSE(Is128Bit(IdBatch::Mode::kSnowflake));
}

// A consumer hands the text out as it is, so only one spelling of each ID passes: anything else
// (another case, another version or variant, a number) makes the record malformed.
TEST(BatchTest, NonCanonical128BitIdsAreMalformed) {
  auto decode = [](const std::string& mode, const std::string& id) {
    return DecodeBatch(R"({"tag":"t","mode":")" + mode + R"(","ids":[)" + id + "]}");
  };
  ASSERT_TRUE(decode("uuid7", std::string("\"") + kRfcUuid7 + "\""));
  ASSERT_TRUE(decode("ulid", std::string("\"") + kSpecUlid + "\""));
  for (const char* bad : {
           R"("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")",  // uppercase
           R"("017f22e2-79b0-4cc3-98c4-dc0c0c07398f")",  // version 4
           R"("017f22e2-79b0-7cc3-c8c4-dc0c0c07398f")",  // variant 110
           R"("017f22e2-79b0-7cc3-78c4-dc0c0c07398f")",  // variant 0
           R"("017f22e279b07cc398c4dc0c0c07398f")",      // no dashes
           R"("017f22e2-79b0-7cc3-98c4-dc0c0c07398")",   // short
           R"("017f22e2-79b0-7cc3-98c4_dc0c0c07398f")",  // not a dash
           R"("017f22e2-79b0-7cc3-98c4-dc0c0c07398g")",  // not hex
           R"(12345)",                                   // a number
           R"("01ARZ3NDEKTSV4RRFFQ69G5FAV")",            // a ULID
       }) {
    auto d = decode("uuid7", bad);
    ASSERT_FALSE(d) << bad;
    EXPECT_EQ(d.error().rfind("ids", 0), 0u) << d.error();
  }
  for (const char* bad : {
           R"("01arz3ndektsv4rrffq69g5fav")",   // lowercase
           R"("01ARZ3NDEKTSV4RRFFQ69G5FA")",    // 25 characters
           R"("01ARZ3NDEKTSV4RRFFQ69G5FAVX")",  // 27
           R"("81ARZ3NDEKTSV4RRFFQ69G5FAV")",   // beyond 128 bits
           R"("01ARZ3NDEKTSV4RRFFQ69G5FAU")",   // U is not Crockford
           R"("01ARZ3NDEKTSV4RRFFQ69G5FAI")",   // I is an alias, not canonical
           R"("017f22e2-79b0-7cc3-98c4-dc0c0c07398f")",
           R"(null)",
       }) {
    auto d = decode("ulid", bad);
    ASSERT_FALSE(d) << bad;
    EXPECT_EQ(d.error().rfind("ids", 0), 0u) << d.error();
  }
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"uuid7","ids":[]})").error().rfind("ids", 0), 0u);
  EXPECT_EQ(DecodeBatch(R"({"tag":"t","mode":"ulid"})").error().rfind("ids", 0), 0u);
  // A 128-bit ID in a snowflake batch is not a 64-bit ID.
  EXPECT_FALSE(decode("snowflake", std::string("\"") + kSpecUlid + "\""));
}

// What the producer writes (snowflake::Id128Layout::Format of draws, as the HTTP routes) is what
// the client's decoder takes, at the edges of every field.
TEST(BatchTest, TheProducersFormatIsCanonical) {
  const auto sf = snowflake::SnowflakeLayout::Default();
  for (auto [kind, mode] : {std::pair{snowflake::Id128Kind::kUuid7, IdBatch::Mode::kUuid7},
                            std::pair{snowflake::Id128Kind::kUlid, IdBatch::Mode::kUlid}}) {
    const snowflake::Id128Layout layout(kind, sf);
    IdBatch b;
    b.tag = "t";
    b.mode = mode;
    for (int64_t ticks : {int64_t{0}, int64_t{1} << 40, sf.max_ticks()}) {
      for (int64_t worker : {int64_t{0}, sf.max_worker_id()}) {
        for (int64_t seq : {int64_t{0}, sf.max_sequence()}) {
          for (snowflake::Id128 random : {snowflake::Id128{0, 0}, snowflake::Id128{~0ULL, ~0ULL}}) {
            auto id = layout.FromSnowflake(sf.Compose(ticks, worker, seq), random);
            ASSERT_TRUE(id) << id.error().message;
            std::string text = layout.Format(*id);
            EXPECT_TRUE(IsCanonical128(mode, text)) << text;
            b.texts.push_back(text);
          }
        }
      }
    }
    auto d = DecodeBatch(EncodeBatch(b));
    ASSERT_TRUE(d) << d.error();
    EXPECT_EQ(d->texts, b.texts);
  }
}

TEST(StreamTopicTest, NamesTheModeAndTheTagAndNeverSharesATopic) {
  EXPECT_EQ(StreamTopic("kleaf.ids", "order", IdBatch::Mode::kSegment), "kleaf.ids.segment.order");
  EXPECT_EQ(StreamTopic("kleaf.ids", "order", IdBatch::Mode::kSnowflake),
            "kleaf.ids.snowflake.order");
  EXPECT_EQ(StreamTopic("kleaf.ids", "order", IdBatch::Mode::kUuid7), "kleaf.ids.uuid7.order");
  EXPECT_EQ(StreamTopic("kleaf.ids", "shop:cart", IdBatch::Mode::kUlid),
            "kleaf.ids.ulid.shop_ccart");
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
