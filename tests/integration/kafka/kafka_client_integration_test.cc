// kleaf's Kafka wrapper against the real broker: DescribeTopic's topic ids (a topic deleted and
// created again under the same name has a new one) and its deadline with the broker frozen.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <string>

#include "kafka/client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string UniqueTopic(const std::string& name) {
  return "kleaf-it-" + name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(SteadyClock::now().time_since_epoch().count());
}

// Deletes `topic` with librdkafka's admin API; "" or the error.
std::string DeleteTopic(const std::string& bootstrap, const std::string& topic) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), errstr, sizeof(errstr));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == nullptr) return errstr;
  rd_kafka_DeleteTopic_t* del = rd_kafka_DeleteTopic_new(topic.c_str());
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_DeleteTopics(rk, &del, 1, nullptr, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 30000);
  std::string error;
  if (event == nullptr) {
    error = "no answer in 30 s";
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = rd_kafka_event_error_string(event);
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(event), &n);
    if (n != 1) {
      error = std::to_string(n) + " results";
    } else if (rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = rd_kafka_err2str(rd_kafka_topic_result_error(results[0]));
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  rd_kafka_DeleteTopic_destroy(del);
  rd_kafka_destroy(rk);
  return error;
}

class KafkaClientIntegrationTest : public KafkaTest {
 protected:
  kafka::Properties props() const { return {{"bootstrap.servers", broker_.bootstrap}}; }
};

TEST_F(KafkaClientIntegrationTest, DescribeTopicOfAMissingTopicIsNotFound) {
  auto info = kafka::DescribeTopic(props(), UniqueTopic("missing"), seconds(10));
  ASSERT_FALSE(info) << "a topic never created was described: id " << info->id;
  EXPECT_EQ(info.error().code, Code::kNotFound) << info.error().message;
}

TEST_F(KafkaClientIntegrationTest, ARecreatedTopicHasANewIdAndItsOwnPartitionCount) {
  const std::string topic = UniqueTopic("recreated");
  ASSERT_TRUE(kafka::EnsureTopics(props(), {{topic, 3, 1, {}}}, seconds(30)));
  auto first = kafka::DescribeTopic(props(), topic, seconds(10));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->partitions, 3);
  // Kafka prints a topic id as 22 characters of URL-safe base64 (16 bytes, no padding).
  EXPECT_EQ(first->id.size(), 22u) << first->id;
  auto again = kafka::DescribeTopic(props(), topic, seconds(10));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->id, first->id) << "the id of one topic changed between two descriptions";

  ASSERT_EQ(DeleteTopic(broker_.bootstrap, topic), "");
  Result<kafka::TopicInfo> gone = first;
  ASSERT_TRUE(WaitUntil(
      [&] {
        gone = kafka::DescribeTopic(props(), topic, seconds(5));
        return !gone && gone.error().code == Code::kNotFound;
      },
      seconds(30)))
      << "the deleted topic is still described: "
      << (gone ? "id " + gone->id : gone.error().message);

  ASSERT_TRUE(kafka::EnsureTopics(props(), {{topic, 2, 1, {}}}, seconds(30)));
  Result<kafka::TopicInfo> second = Fail(Code::kUnavailable, "not asked");
  ASSERT_TRUE(WaitUntil(
      [&] {
        second = kafka::DescribeTopic(props(), topic, seconds(5));
        return second && second->partitions == 2;
      },
      seconds(30)))
      << (second ? "partitions " + std::to_string(second->partitions) : second.error().message);
  EXPECT_EQ(second->id.size(), 22u) << second->id;
  EXPECT_NE(second->id, first->id) << "a topic created again kept the id of the deleted one";
  EXPECT_EQ(DeleteTopic(broker_.bootstrap, topic), "");
}

TEST_F(KafkaClientIntegrationTest, DescribeTopicKeepsItsDeadlineWhileTheBrokerIsFrozen) {
  const std::string topic = UniqueTopic("frozen");
  ASSERT_TRUE(kafka::EnsureTopics(props(), {{topic, 1, 1, {}}}, seconds(30)));
  BrokerFreeze freeze(broker_);
  ASSERT_TRUE(freeze.found()) << "no pid file in " << broker_.dir;
  ASSERT_TRUE(freeze.Freeze());
  const auto start = SteadyClock::now();
  auto info = kafka::DescribeTopic(props(), topic, seconds(2));
  const double took = SecondsSince(start);
  EXPECT_FALSE(info) << "described by a frozen broker?";
  if (!info) {
    EXPECT_EQ(info.error().code, Code::kUnavailable) << info.error().message;
  }
  // The 2 s request timeout, the 1 s hand-over margin, and the handle's teardown.
  EXPECT_LT(took, 4.0) << "DescribeTopic(2 s) took " << took << " s with the broker frozen";
  freeze.Thaw();
  auto after = kafka::DescribeTopic(props(), topic, seconds(10));
  ASSERT_TRUE(after) << "not described after the thaw: " << after.error().message;
  EXPECT_EQ(after->partitions, 1);
  EXPECT_EQ(DeleteTopic(broker_.bootstrap, topic), "");
}

}  // namespace
}  // namespace kleaf::integration
