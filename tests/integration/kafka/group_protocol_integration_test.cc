// GroupConsumer under the consumer group protocol (KIP-848) on the real broker: partitions are
// handed over incrementally (a member joining takes some of another member's partitions, the
// rest are fetched on), and never held by two members at once; group.protocol "auto" runs the
// consumer protocol on Kafka 4.x and falls back to the classic one on a broker without it (3.9,
// through on_kafka_compat.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kafka/client.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Event = kafka::GroupConsumer::Event;

constexpr int kPartitions = 6;
constexpr int kPerPartition = 20;

std::string Unique(const std::string& name) {
  return "kleaf-it-" + name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(SteadyClock::now().time_since_epoch().count());
}

// Kafka 3.x brokers (the compatibility lane) offer no consumer protocol by default.
bool BrokerOffersConsumerProtocol() {
  const char* version = std::getenv("KLEAF_KAFKA_VERSION");
  return version == nullptr || std::string(version).rfind("3.", 0) != 0;
}

class GroupProtocolIntegrationTest : public KafkaTest {
 protected:
  kafka::Properties props(const std::string& group, const std::string& protocol) const {
    return {{"bootstrap.servers", broker_.bootstrap},
            {"group.id", group},
            {"group.protocol", protocol},
            {"session.timeout.ms", "6000"},
            {"heartbeat.interval.ms", "500"}};
  }
  // A topic of kPartitions partitions, kPerPartition messages in each.
  void Fill(const std::string& topic) {
    ASSERT_TRUE(kafka::EnsureTopics({{"bootstrap.servers", broker_.bootstrap}},
                                    {{topic, kPartitions, 1, {}}}, seconds(30)));
    auto producer = kafka::Producer::Create({{"bootstrap.servers", broker_.bootstrap}});
    ASSERT_TRUE(producer);
    for (int p = 0; p < kPartitions; ++p) {
      for (int i = 0; i < kPerPartition; ++i) {
        ASSERT_TRUE((*producer)->Send(topic, p, "k", std::to_string(i), {}));
      }
    }
    ASSERT_TRUE((*producer)->Flush(seconds(10)));
  }
};

// One member of a group as the test sees it: what it holds by its own events, what it read.
struct Member {
  explicit Member(std::string n) : name(std::move(n)) {}
  std::string name;
  std::unique_ptr<kafka::GroupConsumer> consumer;
  bool sought = false;
  std::set<int32_t> held;
  std::map<int32_t, int> read;  // messages read per partition
  int revocations = 0;
  size_t largest_revocation_share = 0;  // partitions revoked at once, of those held then
  std::vector<std::string> errors;
};

// Polls `m` once and applies its event; a message of a partition it does not hold is an error.
void PollOnce(Member& m, milliseconds timeout) {
  Event e = m.consumer->Poll(timeout);
  switch (e.kind) {
    case Event::Kind::kAssigned:
      for (const auto& tp : e.partitions) {
        m.held.insert(tp.partition);
        if (m.sought) {
          auto s = m.consumer->Seek({tp.topic, tp.partition, 0}, seconds(5));
          if (!s) m.errors.push_back(m.name + " seek: " + s.error().message);
        }
      }
      break;
    case Event::Kind::kRevoked:
      ++m.revocations;
      if (e.partitions.size() == m.held.size())
        m.largest_revocation_share = std::max(m.largest_revocation_share, e.partitions.size());
      for (const auto& tp : e.partitions) m.held.erase(tp.partition);
      break;
    case Event::Kind::kMessage:
      if (!m.held.contains(e.message.partition)) {
        m.errors.push_back(m.name + " read partition " + std::to_string(e.message.partition) +
                           " offset " + std::to_string(e.message.offset) + " without holding it");
      }
      ++m.read[e.message.partition];
      break;
    case Event::Kind::kError:
    case Event::Kind::kNone:
      break;
  }
}

// Both members polled in turn until `done` or the deadline; after every poll no partition may be
// held by both (the broker gives a revoked partition to its next member only after the old one
// acknowledged the revocation, which it does from inside its Poll).
void PollBoth(Member& a, Member& b, const std::function<bool()>& done, seconds limit,
              std::vector<std::string>& overlaps) {
  const auto deadline = SteadyClock::now() + limit;
  while (!done() && SteadyClock::now() < deadline) {
    for (Member* m : {&a, &b}) {
      PollOnce(*m, milliseconds(50));
      for (int32_t p : a.held) {
        if (b.held.contains(p)) overlaps.push_back("partition " + std::to_string(p));
      }
    }
  }
}

void IncrementalHandOver(const std::string& bootstrap, bool sought, const std::string& topic,
                         const kafka::Properties& props) {
  const auto start =
      sought ? kafka::GroupConsumer::Start::kSought : kafka::GroupConsumer::Start::kCommitted;
  Member a("a"), b("b");
  a.sought = b.sought = sought;
  auto ca = kafka::GroupConsumer::Create(props, {topic}, nullptr, start);
  ASSERT_TRUE(ca) << ca.error().message;
  a.consumer = std::move(*ca);
  EXPECT_EQ(a.consumer->Protocol(), "consumer");
  const auto deadline = SteadyClock::now() + seconds(60);
  auto read_all = [](const Member& m) {
    int n = 0;
    for (const auto& [p, count] : m.read) n += count;
    return n;
  };
  while (read_all(a) < kPartitions * kPerPartition && SteadyClock::now() < deadline) {
    PollOnce(a, milliseconds(100));
  }
  ASSERT_EQ(a.held.size(), static_cast<size_t>(kPartitions));
  ASSERT_EQ(read_all(a), kPartitions * kPerPartition);
  ASSERT_TRUE(a.errors.empty()) << a.errors.front();

  auto cb = kafka::GroupConsumer::Create(props, {topic}, nullptr, start);
  ASSERT_TRUE(cb) << cb.error().message;
  b.consumer = std::move(*cb);
  std::vector<std::string> overlaps;
  PollBoth(
      a, b,
      [&] {
        return !a.held.empty() && !b.held.empty() && b.held.size() + a.held.size() == kPartitions &&
               read_all(b) >= static_cast<int>(b.held.size()) * kPerPartition;
      },
      seconds(60), overlaps);
  EXPECT_TRUE(overlaps.empty()) << overlaps.size() << " overlaps, first: " << overlaps.front();
  EXPECT_EQ(a.held.size() + b.held.size(), static_cast<size_t>(kPartitions));
  EXPECT_FALSE(b.held.empty());
  // Incremental: the join took some of a's partitions and left it the others; an eager
  // rebalance would have revoked all six first.
  EXPECT_GE(a.revocations, 1);
  EXPECT_EQ(a.largest_revocation_share, 0u) << "a gave up everything it held at once";
  EXPECT_FALSE(a.held.empty());

  // What is written now is read by the member holding its partition, and only by it, while the
  // partitions a kept were fetched on without a new start.
  auto producer = kafka::Producer::Create({{"bootstrap.servers", bootstrap}});
  ASSERT_TRUE(producer);
  for (int p = 0; p < kPartitions; ++p) {
    ASSERT_TRUE((*producer)->Send(topic, p, "k", "late", {}));
  }
  ASSERT_TRUE((*producer)->Flush(seconds(10)));
  const int a_before = read_all(a);
  const int b_before = read_all(b);
  const auto a_kept = a.held;
  const auto b_kept = b.held;
  PollBoth(
      a, b,
      [&] {
        return read_all(a) - a_before == static_cast<int>(a_kept.size()) &&
               read_all(b) - b_before == static_cast<int>(b_kept.size());
      },
      seconds(30), overlaps);
  EXPECT_EQ(read_all(a) - a_before, static_cast<int>(a_kept.size()));
  EXPECT_EQ(read_all(b) - b_before, static_cast<int>(b_kept.size()));
  EXPECT_TRUE(overlaps.empty());
  for (const auto* m : {&a, &b}) EXPECT_TRUE(m->errors.empty()) << m->errors.front();
  a.consumer->Close();
  b.consumer->Close();
}

TEST_F(GroupProtocolIntegrationTest,
       TheConsumerProtocolHandsPartitionsOverIncrementallyToOneMember) {
  if (!BrokerOffersConsumerProtocol()) GTEST_SKIP() << "Kafka 3.x: no consumer protocol";
  const std::string topic = Unique("kip848");
  ASSERT_NO_FATAL_FAILURE(Fill(topic));
  IncrementalHandOver(broker_.bootstrap, /*sought=*/false, topic, props(Unique("g"), "consumer"));
}

// The allocators' way: nothing fetched until sought, and a partition kept through another
// member's join is fetched on from where it was, not started again.
TEST_F(GroupProtocolIntegrationTest, SoughtMembersOfTheConsumerProtocolKeepWhatTheyHold) {
  if (!BrokerOffersConsumerProtocol()) GTEST_SKIP() << "Kafka 3.x: no consumer protocol";
  const std::string topic = Unique("kip848-sought");
  ASSERT_NO_FATAL_FAILURE(Fill(topic));
  IncrementalHandOver(broker_.bootstrap, /*sought=*/true, topic, props(Unique("g"), "consumer"));
}

// A member that does not poll has not seen the revocation the broker sent it, so it must not
// acknowledge it: seeking the partitions it fetches (as an allocator rewinds after an aborted
// batch) must leave them its own, and the member that joined gets none of them until the first
// member polls. (An unassign and assign for a seek would be taken by librdkafka for the answer
// to the queued revocation.)
TEST_F(GroupProtocolIntegrationTest, SeeksOfASoughtMemberNeverAcknowledgeARevocationItHasNotSeen) {
  if (!BrokerOffersConsumerProtocol()) GTEST_SKIP() << "Kafka 3.x: no consumer protocol";
  const std::string topic = Unique("kip848-early");
  ASSERT_NO_FATAL_FAILURE(Fill(topic));
  const auto props = this->props(Unique("g"), "consumer");
  Member a("a"), b("b");
  a.sought = b.sought = true;
  auto ca =
      kafka::GroupConsumer::Create(props, {topic}, nullptr, kafka::GroupConsumer::Start::kSought);
  ASSERT_TRUE(ca) << ca.error().message;
  a.consumer = std::move(*ca);
  const auto deadline = SteadyClock::now() + seconds(60);
  while (a.read.size() < static_cast<size_t>(kPartitions) && SteadyClock::now() < deadline) {
    PollOnce(a, milliseconds(100));
  }
  ASSERT_EQ(a.held.size(), static_cast<size_t>(kPartitions));
  auto cb =
      kafka::GroupConsumer::Create(props, {topic}, nullptr, kafka::GroupConsumer::Start::kSought);
  ASSERT_TRUE(cb) << cb.error().message;
  b.consumer = std::move(*cb);
  // For 8 s a seeks its partitions again and again without polling; b polls.
  const auto quiet_until = SteadyClock::now() + seconds(8);
  int seeks = 0;
  while (SteadyClock::now() < quiet_until) {
    for (int32_t p : a.held) {
      if (a.consumer->Seek({topic, p, 0}, seconds(1))) ++seeks;
    }
    PollOnce(b, milliseconds(50));
    ASSERT_TRUE(b.held.empty()) << "b was given partition " << *b.held.begin()
                                << " while a had not seen its revocation";
  }
  EXPECT_GT(seeks, 0);
  // Once a polls, the hand-over happens.
  std::vector<std::string> overlaps;
  PollBoth(
      a, b, [&] { return !b.held.empty() && a.held.size() + b.held.size() == kPartitions; },
      seconds(60), overlaps);
  EXPECT_FALSE(b.held.empty());
  EXPECT_TRUE(overlaps.empty());
  a.consumer->Close();
  b.consumer->Close();
}

// "auto": the consumer protocol where every broker offers it, else (Kafka 3.9) the classic one;
// either way every message is read.
TEST_F(GroupProtocolIntegrationTest, AutoRunsTheProtocolTheBrokerOffers) {
  const std::string topic = Unique("auto");
  ASSERT_NO_FATAL_FAILURE(Fill(topic));
  auto c = kafka::GroupConsumer::Create(props(Unique("g"), "auto"), {topic});
  ASSERT_TRUE(c) << c.error().message;
  Member m("auto");
  m.consumer = std::move(*c);
  std::vector<std::string> errors;
  int read = 0;
  const auto deadline = SteadyClock::now() + seconds(60);
  while (read < kPartitions * kPerPartition && SteadyClock::now() < deadline) {
    Event e = m.consumer->Poll(milliseconds(100));
    if (e.kind == Event::Kind::kMessage) ++read;
    if (e.kind == Event::Kind::kError) errors.push_back(e.error);
  }
  EXPECT_EQ(read, kPartitions * kPerPartition);
  // The brokers answered which protocols they offer: nothing to complain of either way.
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(m.consumer->Protocol(), BrokerOffersConsumerProtocol() ? "consumer" : "classic");
  m.consumer->Close();
}

// A 4.x cluster whose group.version feature is not finalized (one upgraded from 3.9 before its
// features were): the brokers list the consumer protocol, the coordinator refuses it (a fatal
// error of the handle). "auto" opens the member again under the classic protocol, says so once,
// and reads everything.
TEST_F(GroupProtocolIntegrationTest, AutoFallsBackToClassicWhenTheCoordinatorRefusesTheProtocol) {
  if (!BrokerOffersConsumerProtocol()) GTEST_SKIP() << "Kafka 3.x: no consumer protocol";
  auto features = [&](const std::string& how, const std::string& level) {
    return RunScript({broker_.script, "tool", "features", "--bootstrap-server", broker_.bootstrap,
                      how, "--feature", "group.version=" + level},
                     seconds(60));
  };
  auto down = features("downgrade", "0");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  struct Restore {
    std::function<void()> run;
    ~Restore() { run(); }
  } restore{[&] {
    auto up = features("upgrade", "1");
    EXPECT_EQ(up.exit_code, 0) << up.output;
  }};
  const std::string topic = Unique("auto-refused");
  ASSERT_NO_FATAL_FAILURE(Fill(topic));
  auto c = kafka::GroupConsumer::Create(props(Unique("g"), "auto"), {topic});
  ASSERT_TRUE(c) << c.error().message;
  auto& consumer = **c;
  std::vector<std::string> errors;
  int read = 0;
  const auto deadline = SteadyClock::now() + seconds(60);
  while (read < kPartitions * kPerPartition && SteadyClock::now() < deadline) {
    Event e = consumer.Poll(milliseconds(100));
    if (e.kind == Event::Kind::kMessage) ++read;
    if (e.kind == Event::Kind::kError) errors.push_back(e.error);
  }
  EXPECT_EQ(read, kPartitions * kPerPartition);
  EXPECT_EQ(consumer.Protocol(), "classic");
  EXPECT_EQ(std::ranges::count_if(errors,
                                  [](const std::string& e) {
                                    return e.find("this member runs the classic protocol") !=
                                           std::string::npos;
                                  }),
            1)
      << errors.size() << " errors";
  consumer.Close();
}

TEST(GroupProtocolTest, AnUnknownProtocolIsRefusedByName) {
  auto c = kafka::GroupConsumer::Create(
      {{"bootstrap.servers", "127.0.0.1:1"}, {"group.id", "g"}, {"group.protocol", "eager"}},
      {"t"});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("group.protocol"), std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace kleaf::integration
