// The producer section of the config: defaults, the streams list, and errors naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace kleaf::config {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void ExpectKeyError(const std::string& yaml, const std::string& key) {
  SCOPED_TRACE(yaml);
  auto r = ParseConfig(yaml);
  ASSERT_FALSE(r.has_value()) << "expected an error";
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_THAT(r.error().message, StartsWith(key + ":"));
}

TEST(ProducerConfigTest, DefaultsDeriveTopicAndGroupFromThePrefix) {
  auto c = ParseConfig("");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->producer.batches_ahead, 4);
  EXPECT_EQ(c->producer.check_interval_ms, 200);
  EXPECT_TRUE(c->producer.streams.empty());
  EXPECT_EQ(c->producer.TopicFor("kleaf"), "kleaf.ids");
  EXPECT_EQ(c->producer.GroupFor("kleaf"), "kleaf.ids.consumers");
  auto named = ParseConfig("producer:\n  topic: my.ids\n");
  ASSERT_TRUE(named.has_value()) << named.error().message;
  EXPECT_EQ(named->producer.TopicFor("kleaf"), "my.ids");
  EXPECT_EQ(named->producer.GroupFor("kleaf"), "my.ids.consumers");
}

TEST(ProducerConfigTest, EveryKeyParses) {
  auto c = ParseConfig(R"(
producer:
  topic: t.ids
  group: g1
  batches_ahead: 3
  check_interval_ms: 50
  streams:
    - {tag: order, mode: segment, batch_size: 1000}
    - tag: order
      mode: snowflake
      batch_size: 7
    - {tag: "user:x"}
    - {tag: order, mode: uuid7, batch_size: 20000}
    - {tag: order, mode: ulid}
    - {tag: "user:x", mode: snowflake}
)");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const auto& p = c->producer;
  EXPECT_EQ(p.topic, "t.ids");
  EXPECT_EQ(p.group, "g1");
  EXPECT_EQ(p.batches_ahead, 3);
  EXPECT_EQ(p.check_interval_ms, 50);
  ASSERT_EQ(p.streams.size(), 6u);
  EXPECT_EQ(p.streams[0].tag, "order");
  EXPECT_EQ(p.streams[0].mode, ProducerStream::Mode::kSegment);
  EXPECT_EQ(p.streams[0].batch_size, 1000);
  EXPECT_EQ(p.streams[1].mode, ProducerStream::Mode::kSnowflake);
  EXPECT_EQ(p.streams[1].batch_size, 7);
  EXPECT_EQ(p.streams[2].tag, "user:x");
  EXPECT_EQ(p.streams[2].mode, ProducerStream::Mode::kSegment);  // default
  EXPECT_EQ(p.streams[2].batch_size, 10000);                     // default for segments
  EXPECT_EQ(p.streams[3].mode, ProducerStream::Mode::kUuid7);
  EXPECT_EQ(p.streams[3].batch_size, kMaxId128BatchSize);
  EXPECT_EQ(p.streams[4].mode, ProducerStream::Mode::kUlid);
  EXPECT_EQ(p.streams[4].batch_size, 1000);  // default for listed IDs
  EXPECT_EQ(p.streams[5].mode, ProducerStream::Mode::kSnowflake);
  EXPECT_EQ(p.streams[5].batch_size, 1000);  // default for listed IDs
}

TEST(ProducerConfigTest, ErrorsNameTheKey) {
  ExpectKeyError("producer:\n  batches_ahead: 0\n", "producer.batches_ahead");
  ExpectKeyError("producer:\n  check_interval_ms: x\n", "producer.check_interval_ms");
  ExpectKeyError("producer:\n  topic: 'a b'\n", "producer.topic");
  ExpectKeyError("producer:\n  group: 'a/b'\n", "producer.group");
  ExpectKeyError("producer:\n  colour: red\n", "producer.colour");
  ExpectKeyError("producer:\n  streams: order\n", "producer.streams");
  ExpectKeyError("producer:\n  streams: [order]\n", "producer.streams[0]");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a}\n    - {tag: b, mode: sequence}\n",
                 "producer.streams[1].mode");
  {
    auto r = ParseConfig("producer:\n  streams:\n    - {tag: a, mode: uuid}\n");
    ASSERT_FALSE(r.has_value());
    EXPECT_THAT(r.error().message, HasSubstr("segment, snowflake, uuid7 or ulid"));
  }
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, mode: UUID7}\n",
                 "producer.streams[0].mode");
  // A uuid7/ulid batch must fit one Kafka record, whichever key comes first.
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, mode: uuid7, batch_size: 20001}\n",
                 "producer.streams[0].batch_size");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, batch_size: 50000, mode: ulid}\n",
                 "producer.streams[0].batch_size");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, batch_size: 0}\n",
                 "producer.streams[0].batch_size");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, batch_size: ten}\n",
                 "producer.streams[0].batch_size");
  ExpectKeyError("producer:\n  streams:\n    - {tag: 'bad tag'}\n", "producer.streams[0].tag");
  ExpectKeyError("producer:\n  streams:\n    - {mode: segment}\n", "producer.streams[0].tag");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, size: 3}\n", "producer.streams[0].size");
  ExpectKeyError("producer:\n  streams:\n    - {tag: a, mode: [x]}\n", "producer.streams[0].mode");
}

TEST(ProducerConfigTest, RepeatedStreamIsRejectedButModesMayShareATag) {
  auto r = ParseConfig(
      "producer:\n  streams:\n    - {tag: a, mode: snowflake}\n    - {tag: a, mode: snowflake}\n");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, StartsWith("producer.streams[1]:"));
  EXPECT_THAT(r.error().message, HasSubstr("producer.streams[0]"));
  EXPECT_TRUE(ParseConfig("producer:\n  streams:\n    - {tag: a, mode: snowflake}\n"
                          "    - {tag: a, mode: segment}\n")
                  .has_value());
}

}  // namespace
}  // namespace kleaf::config
