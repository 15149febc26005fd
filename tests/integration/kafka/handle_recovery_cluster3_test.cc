// Long-lived Kafka handles recover by themselves on a cluster of three brokers, where leaders move:
// a reader whose cached metadata says a partition has no leader (its only replica's broker went
// down) answers again once that broker is back, without a new handle. librdkafka 2.8 takes a
// cached leaderless partition for a permanent error and asks no broker about it until its periodic
// refresh (minutes away); kafka::PartitionReader asks for the topic's metadata before each retry,
// and counts the recovery in kleaf_kafka_handle_recoveries_total.
#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>
#include <string>

#include "base/metrics.h"
#include "kafka/client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class HandleRecoveryTest : public Kafka3Test {
 protected:
  kafka::Properties props() const { return {{"bootstrap.servers", kafka_.bootstrap}}; }
};

uint64_t Recoveries(const std::string& handle) {
  return metrics::Registry::Default()
      .GetCounter("kleaf_kafka_handle_recoveries_total", "",
                  {{"handle", handle}, {"how", "metadata_refresh"}})
      .value();
}

TEST_F(HandleRecoveryTest, AReaderThatCachedALeaderlessPartitionAnswersOnceItsBrokerIsBack) {
  const std::string topic = "kleaf-it-leaderless-" + std::to_string(::getpid()) + "-" +
                            std::to_string(SteadyClock::now().time_since_epoch().count());
  // One replica: while its broker is down the partition has no leader at all.
  ASSERT_TRUE(
      kafka::EnsureTopics(props(), {{topic, 1, 1, {{"min.insync.replicas", "1"}}}}, seconds(30)));
  std::expected<int, std::string> leader = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        leader = kafka_.LeaderOf(topic, 0);
        return leader && *leader > 0;
      },
      seconds(30)))
      << (leader ? "no leader" : leader.error());

  ClusterRestartGuard guard(kafka_);
  ASSERT_TRUE(kafka_.Stop(*leader));
  // A reader that first asks while the partition has no leader caches "leader -1" (as a
  // long-lived one does when its query meets a broker that froze or restarted), and no
  // assignment of it makes librdkafka look again.
  auto reader = kafka::PartitionReader::Create(props(), "test_reader");
  ASSERT_TRUE(reader) << reader.error().message;
  std::string why;
  const bool leaderless = WaitUntil(
      [&] {
        auto marks = (*reader)->Watermarks(topic, 0, milliseconds(500));
        if (marks) return false;
        why = marks.error().message;
        return why.find("Unknown partition") != std::string::npos ||
               why.find("eader not available") != std::string::npos;
      },
      seconds(60));
  ASSERT_TRUE(leaderless) << "the reader never saw the partition without a leader: " << why;
  std::cout << "leaderless: with broker " << *leader << " down: " << why << std::endl;

  ASSERT_TRUE(kafka_.Start(*leader));
  const uint64_t before = Recoveries("test_reader");
  const auto back = SteadyClock::now();
  std::string last;
  const bool answered = WaitUntil(
      [&] {
        auto marks = (*reader)->Watermarks(topic, 0, seconds(2));
        if (!marks) last = marks.error().message;
        return marks.has_value();
      },
      seconds(45));
  std::cout << "leaderless: the same reader answered " << SecondsSince(back) << " s after broker "
            << *leader << " was back" << std::endl;
  ASSERT_TRUE(answered) << "the reader still fails 45 s after its broker came back: " << last;
  EXPECT_GT(Recoveries("test_reader"), before) << "the recovery was not counted";
}

}  // namespace
}  // namespace kleaf::integration
