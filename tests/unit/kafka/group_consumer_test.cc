// Where GroupConsumer starts and moves its fetches, on librdkafka's mock cluster (a group
// coordinator is all these tests need), around two traps of librdkafka 2.8: a failed
// committed-offset fetch leaves a partition assigned but never fetched (every seek refused)
// until the application assigns it again; and a seek made while the partition's start is being
// looked up is undone once that lookup is answered.
#include "kafka/group_consumer.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kleaf::kafka {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int16_t kListOffsetsApiKey = 2;  // Kafka protocol: ListOffsets
constexpr int16_t kOffsetFetchApiKey = 9;  // Kafka protocol: OffsetFetch
constexpr char kTopic[] = "requests";
constexpr int kMessages = 10;

// A mock cluster of one broker (it lives as long as the producer handle that runs it), with
// `partitions` partitions each holding kMessages messages, offsets 0 to 9.
class MockCluster {
 public:
  explicit MockCluster(int partitions = 1) {
    char err[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", err, sizeof err);
    rk_.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err));
    mock_ = rd_kafka_handle_mock_cluster(rk_.get());
    rd_kafka_mock_group_initial_rebalance_delay_ms(mock_, 0);
    rd_kafka_mock_topic_create(mock_, kTopic, partitions, 1);
    for (int p = 0; p < partitions; ++p) {
      for (int i = 0; i < kMessages; ++i) {
        const std::string value = "m" + std::to_string(i);
        rd_kafka_producev(rk_.get(), RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_PARTITION(p),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      }
    }
    flushed_ = rd_kafka_flush(rk_.get(), 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  bool ready() const { return mock_ != nullptr && flushed_; }
  std::string bootstrap() const { return rd_kafka_mock_cluster_bootstraps(mock_); }
  // The next `count` offset lookups (ListOffsets) are answered `delay` late.
  void DelayOffsetLookups(int count, milliseconds delay) {
    for (int i = 0; i < count; ++i) {
      rd_kafka_mock_broker_push_request_error_rtts(mock_, 1, kListOffsetsApiKey, 1,
                                                   RD_KAFKA_RESP_ERR_NO_ERROR,
                                                   static_cast<int>(delay.count()));
    }
  }
  // Counts the requests the cluster receives from now on.
  void TrackRequests() { rd_kafka_mock_start_request_tracking(mock_); }
  // The requests with `api_key` received since TrackRequests.
  int Requests(int16_t api_key) {
    size_t n = 0;
    rd_kafka_mock_request_t** requests = rd_kafka_mock_get_requests(mock_, &n);
    int matching = 0;
    for (size_t i = 0; i < n; ++i) {
      if (rd_kafka_mock_request_api_key(requests[i]) == api_key) ++matching;
    }
    rd_kafka_mock_request_destroy_array(requests, n);
    return matching;
  }
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

// The offset of the next message Poll returns, or -1 when none comes within `bound`.
int64_t NextOffset(GroupConsumer& consumer, milliseconds bound = milliseconds(10000)) {
  const auto deadline = SteadyClock::now() + bound;
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
  // Fetched again, from the group's committed offset (none: auto.offset.reset, the beginning).
  // Only now that the lookup of that beginning has been answered can a seek not be undone by it.
  EXPECT_EQ(NextOffset(*consumer), 0);
  auto sought = SeekWithin(*consumer, 3, milliseconds(10000));
  ASSERT_TRUE(sought) << sought.error().message;
  EXPECT_EQ(NextOffset(*consumer), 3);
}

TEST(GroupConsumerTest, ASoughtPartitionNeedsNoOffsetFetchToBeSought) {
  MockCluster cluster;
  ASSERT_TRUE(cluster.ready());
  cluster.FailOffsetFetches(5);
  auto consumer = Join(cluster, GroupConsumer::Start::kSought);
  ASSERT_TRUE(consumer);
  auto sought = consumer->Seek({kTopic, 0, 3}, milliseconds(5000));
  ASSERT_TRUE(sought) << sought.error().message;
  EXPECT_EQ(NextOffset(*consumer), 3);
}

TEST(GroupConsumerTest, ASoughtPartitionIsNotFetchedBeforeItsSeek) {
  MockCluster cluster;
  ASSERT_TRUE(cluster.ready());
  auto consumer = Join(cluster, GroupConsumer::Start::kSought);
  ASSERT_TRUE(consumer);
  EXPECT_EQ(consumer->Assignment().size(), 1u);
  EXPECT_EQ(NextOffset(*consumer, milliseconds(2000)), -1);
  ASSERT_TRUE(consumer->Seek({kTopic, 0, 7}, milliseconds(5000)));
  EXPECT_EQ(NextOffset(*consumer), 7);
}

TEST(GroupConsumerTest, SeekingOnePartitionKeepsTheOthersWhereTheirLastMessageLeftThem) {
  MockCluster cluster(2);
  ASSERT_TRUE(cluster.ready());
  auto consumer = Join(cluster, GroupConsumer::Start::kSought);
  ASSERT_TRUE(consumer);
  ASSERT_TRUE(consumer->Seek({kTopic, 0, 2}, milliseconds(5000)));
  EXPECT_EQ(NextOffset(*consumer), 2);
  EXPECT_EQ(NextOffset(*consumer), 3);
  // Partition 1's start moves partition 0 back into librdkafka's assignment: from offset 4 on.
  ASSERT_TRUE(consumer->Seek({kTopic, 1, 5}, milliseconds(5000)));
  std::map<int32_t, std::vector<int64_t>> seen;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while ((seen[0].size() < 6 || seen[1].size() < 5) && SteadyClock::now() < deadline) {
    auto e = consumer->Poll(milliseconds(100));
    if (e.kind == GroupConsumer::Event::Kind::kMessage)
      seen[e.message.partition].push_back(e.message.offset);
  }
  EXPECT_EQ(seen[0], (std::vector<int64_t>{4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(seen[1], (std::vector<int64_t>{5, 6, 7, 8, 9}));
  const auto unassigned = consumer->Seek({kTopic, 2, 0}, milliseconds(5000));
  ASSERT_FALSE(unassigned);
  EXPECT_EQ(unassigned.error().code, Code::kFailedPrecondition) << unassigned.error().message;
}

// librdkafka 2.8 answers an offset lookup that a seek (or a new assignment) overtook by looking
// the same logical offset up again 500 ms later and fetching from there: a seek made while the
// lookup of a partition's end was in flight is undone, and everything between the sought offset
// and the end is skipped (librdkafka issue 2256, still so in 2.8's rd_kafka_toppar_handle_Offset
// and unchanged in 2.14.2's: the function is the same line for line, so Start::kSought stays).
TEST(GroupConsumerTest, ASeekIsNotUndoneByAnEndLookupStillInFlight) {
  MockCluster cluster;
  ASSERT_TRUE(cluster.ready());
  cluster.DelayOffsetLookups(1, milliseconds(1500));
  cluster.TrackRequests();
  auto consumer = Join(cluster, GroupConsumer::Start::kSought);
  ASSERT_TRUE(consumer);
  // Paused, the partition fetches nothing before the lookups have said their last.
  ASSERT_TRUE(consumer->Pause({{kTopic, 0, 0}}));
  auto sought = SeekWithin(*consumer, 3, milliseconds(10000));
  ASSERT_TRUE(sought) << sought.error().message;
  // An overtaken lookup is followed by a second one, which decides where the fetch goes once
  // resumed: wait for it, or long enough that the first one was answered and none followed.
  int64_t first = -1;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(4);
  while (cluster.Requests(kListOffsetsApiKey) < 2 && SteadyClock::now() < deadline) {
    auto e = consumer->Poll(milliseconds(100));
    if (e.kind == GroupConsumer::Event::Kind::kMessage && first < 0) first = e.message.offset;
  }
  ASSERT_TRUE(consumer->Resume({{kTopic, 0, 0}}));
  if (first < 0) first = NextOffset(*consumer);
  EXPECT_EQ(first, 3);
}

}  // namespace
}  // namespace kleaf::kafka
