// GroupConsumer's way out of a partition that is assigned but never fetched, on librdkafka's
// mock cluster (a group coordinator is all these tests need). The state comes from a failed
// committed-offset fetch: librdkafka 2.8 then keeps the partition assigned, never starts its
// fetch, and refuses every seek, until the application assigns it again.
#include "kafka/group_consumer.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace kleaf::kafka {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int16_t kOffsetFetchApiKey = 9;  // Kafka protocol: OffsetFetch
constexpr char kTopic[] = "requests";
constexpr int kMessages = 10;

// A mock cluster of one broker (it lives as long as the producer handle that runs it), with one
// partition holding kMessages messages, offsets 0 to 9.
class MockCluster {
 public:
  MockCluster() {
    char err[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", err, sizeof err);
    rk_.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err));
    mock_ = rd_kafka_handle_mock_cluster(rk_.get());
    rd_kafka_mock_group_initial_rebalance_delay_ms(mock_, 0);
    rd_kafka_mock_topic_create(mock_, kTopic, 1, 1);
    for (int i = 0; i < kMessages; ++i) {
      const std::string value = "m" + std::to_string(i);
      rd_kafka_producev(rk_.get(), RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_PARTITION(0),
                        RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    }
    flushed_ = rd_kafka_flush(rk_.get(), 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  bool ready() const { return mock_ != nullptr && flushed_; }
  std::string bootstrap() const { return rd_kafka_mock_cluster_bootstraps(mock_); }
  // The next `count` committed-offset fetches fail with an error librdkafka does not retry.
  void FailOffsetFetches(int count) {
    for (int i = 0; i < count; ++i) {
      rd_kafka_mock_push_request_errors(mock_, kOffsetFetchApiKey, 1,
                                        RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED);
    }
  }

 private:
  struct Destroy {
    void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
  };
  std::unique_ptr<rd_kafka_t, Destroy> rk_;
  rd_kafka_mock_cluster_t* mock_ = nullptr;
  bool flushed_ = false;
};

std::unique_ptr<GroupConsumer> Join(const MockCluster& cluster, GroupConsumer::Start start) {
  auto consumer = GroupConsumer::Create(
      {{"bootstrap.servers", cluster.bootstrap()}, {"group.id", "g"}}, {kTopic}, nullptr, start);
  EXPECT_TRUE(consumer) << consumer.error().message;
  if (!consumer) return nullptr;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (SteadyClock::now() < deadline) {
    if ((*consumer)->Poll(milliseconds(100)).kind == GroupConsumer::Event::Kind::kAssigned) {
      return std::move(*consumer);
    }
  }
  ADD_FAILURE() << "no assignment within 30 s";
  return nullptr;
}

// Seeks partition 0 to `offset` until a seek succeeds or `bound` passes; the last seek's result.
Result<void> SeekWithin(GroupConsumer& consumer, int64_t offset, milliseconds bound) {
  const auto deadline = SteadyClock::now() + bound;
  for (;;) {
    auto r = consumer.Seek({kTopic, 0, offset}, milliseconds(5000));
    if (r || SteadyClock::now() >= deadline) return r;
    (void)consumer.Poll(milliseconds(100));  // serves librdkafka's queue while it starts
  }
}

// The offset of the next message Poll returns, or -1 when none comes within 10 s.
int64_t NextOffset(GroupConsumer& consumer) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (SteadyClock::now() < deadline) {
    auto e = consumer.Poll(milliseconds(100));
    if (e.kind == GroupConsumer::Event::Kind::kMessage) return e.message.offset;
  }
  return -1;
}

TEST(GroupConsumerTest, APartitionLeftUnfetchedByAFailedOffsetFetchIsFetchedAgainAfterRestart) {
  MockCluster cluster;
  ASSERT_TRUE(cluster.ready());
  cluster.FailOffsetFetches(1);
  auto consumer = Join(cluster, GroupConsumer::Start::kCommitted);
  ASSERT_TRUE(consumer);
  // Not a transient state: seeks keep failing as "not fetched" for seconds.
  auto stuck = SeekWithin(*consumer, 3, milliseconds(3000));
  ASSERT_FALSE(stuck) << "the partition was fetched despite its failed offset fetch";
  EXPECT_EQ(stuck.error().code, Code::kFailedPrecondition) << stuck.error().message;

  ASSERT_TRUE(consumer->Restart());
  auto sought = SeekWithin(*consumer, 3, milliseconds(10000));
  ASSERT_TRUE(sought) << sought.error().message;
  EXPECT_EQ(NextOffset(*consumer), 3);
}

TEST(GroupConsumerTest, APartitionStartedAtItsEndNeedsNoOffsetFetchToBeSought) {
  MockCluster cluster;
  ASSERT_TRUE(cluster.ready());
  cluster.FailOffsetFetches(5);
  auto consumer = Join(cluster, GroupConsumer::Start::kEnd);
  ASSERT_TRUE(consumer);
  auto sought = SeekWithin(*consumer, 3, milliseconds(10000));
  ASSERT_TRUE(sought) << sought.error().message;
  EXPECT_EQ(NextOffset(*consumer), 3);
}

}  // namespace
}  // namespace kleaf::kafka
