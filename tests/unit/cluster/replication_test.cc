// The replication kleaf's uniqueness rests on (CheckReplication): on a cluster of three brokers or
// more, a state, requests or layout topic that cannot lose a broker is refused with the command
// that fixes it, as an operator who created the topics by hand, or left the brokers' defaults,
// would get them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/topics.h"

namespace kleaf::cluster {
namespace {

TopicReplication Topic(std::string name, int32_t rf, int32_t min_isr, int32_t partitions = 12) {
  return TopicReplication{std::move(name), partitions, rf, min_isr};
}

// The cluster's three guarded topics at RF 3 / min ISR 2, with `state` in place of kleaf.state's.
ReplicationFacts Facts(int32_t brokers, TopicReplication state = Topic("kleaf.state", 3, 2)) {
  return ReplicationFacts{
      brokers,
      {std::move(state), Topic("kleaf.requests", 3, 2), Topic("kleaf.layout", 3, 2, 1)},
      {Topic("kleaf.replies", 3, 2), Topic("__transaction_state", 3, 2, 50)}};
}

bool Says(const Result<std::vector<std::string>>& r, std::string_view text) {
  return !r && r.error().message.find(text) != std::string::npos;
}

bool Warns(const Result<std::vector<std::string>>& r, std::string_view text) {
  if (!r) return false;
  for (const auto& w : *r) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ReplicationTest, ThreeReplicasWithTwoInSyncAreFine) {
  for (int32_t brokers : {1, 2, 3, 5}) {
    auto r = CheckReplication(Facts(brokers), false);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->empty()) << brokers << " brokers: " << r->front();
  }
  // More replicas, more in sync, as long as one broker can go.
  auto five = CheckReplication(Facts(5, Topic("kleaf.state", 5, 3)), false);
  ASSERT_TRUE(five) << five.error().message;
  EXPECT_TRUE(five->empty());
}

// The default of an unset kafka.replication_factor on a broker whose default.replication.factor is
// still Kafka's 1: the loss of one disk loses committed max_id records.
TEST(ReplicationTest, AnUnreplicatedStateTopicOnThreeBrokersIsAConfigErrorSayingHowToFixIt) {
  auto r = CheckReplication(Facts(3, Topic("kleaf.state", 1, 1)), false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);  // exit 2: restarting does not help
  EXPECT_TRUE(Says(r,
                   "topic kleaf.state has replication factor 1 and min.insync.replicas 1 on a "
                   "cluster of 3 brokers"))
      << r.error().message;
  EXPECT_TRUE(Says(r,
                   "give each of its 12 partitions 3 replicas with kafka-reassign-partitions.sh "
                   "--bootstrap-server B --reassignment-json-file plan.json --execute"));
  EXPECT_TRUE(Says(r, "--entity-name kleaf.state --add-config min.insync.replicas=2"));
  EXPECT_TRUE(Says(r, "kafka.allow_unreplicated: true"));
  EXPECT_FALSE(Says(r, "kleaf.requests")) << "only the topic at fault is named";
}

// Three replicas, but the broker default min.insync.replicas=1 (Kafka's own default): a write is
// acknowledged by the leader alone, which can die with it.
TEST(ReplicationTest, OneInSyncReplicaIsRefusedWithTheKafkaConfigsCommand) {
  auto r = CheckReplication(Facts(3, Topic("kleaf.state", 3, 1)), false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(Says(r, "topic kleaf.state has replication factor 3 and min.insync.replicas 1"))
      << r.error().message;
  EXPECT_TRUE(Says(r,
                   "Fix: kafka-configs.sh --bootstrap-server B --alter --entity-type topics "
                   "--entity-name kleaf.state --add-config min.insync.replicas=2"));
  EXPECT_FALSE(Says(r, "kafka-reassign-partitions.sh")) << "the replicas are fine";
}

// min.insync.replicas equal to (or above) the replicas: the first broker down stops every write,
// and with it the cluster's allocations.
TEST(ReplicationTest, AllReplicasInSyncIsRefusedBecauseWritesStopWithOneBrokerDown) {
  auto all = CheckReplication(Facts(3, Topic("kleaf.state", 3, 3)), false);
  ASSERT_FALSE(all);
  EXPECT_TRUE(Says(all, "writes stop while any one of its brokers is down")) << all.error().message;
  EXPECT_TRUE(Says(all, "--add-config min.insync.replicas=2"));
  // More in sync than there are replicas (a broker default of 2 on a topic of 1): nothing is ever
  // acknowledged.
  auto more = CheckReplication(Facts(3, Topic("kleaf.state", 3, 4)), false);
  ASSERT_FALSE(more);
  EXPECT_TRUE(Says(more, "no write is ever acknowledged")) << more.error().message;
  EXPECT_TRUE(Says(more, "--add-config min.insync.replicas=2"));
  // Two replicas, both in sync: no reassignment makes 2 replicas lose one; 3 are needed.
  auto two = CheckReplication(Facts(3, Topic("kleaf.state", 2, 2)), false);
  ASSERT_FALSE(two);
  EXPECT_TRUE(Says(two, "kafka-reassign-partitions.sh")) << two.error().message;
  EXPECT_FALSE(Says(two, ", then kafka-configs.sh")) << "min.insync.replicas is 2 already";
}

TEST(ReplicationTest, EveryGuardedTopicAtFaultIsNamedInOneRefusal) {
  ReplicationFacts facts{
      3,
      {Topic("kleaf.state", 3, 1), Topic("kleaf.requests", 1, 1), Topic("kleaf.layout", 1, 1, 1)},
      {}};
  auto r = CheckReplication(facts, false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Says(r, "topic kleaf.state has replication factor 3")) << r.error().message;
  EXPECT_TRUE(Says(r, "topic kleaf.requests has replication factor 1"));
  EXPECT_TRUE(Says(r, "topic kleaf.layout has replication factor 1"));
  EXPECT_TRUE(Says(r, "give each of its 1 partitions 3 replicas"));
}

// Kafka's transaction log holds the fence of every allocator's transactional id (I1, I5: one
// producer of a partition may commit): described, it is guarded like the state topic.
TEST(ReplicationTest, AnUnsafeTransactionLogIsRefusedLikeTheStateTopic) {
  ReplicationFacts facts = Facts(3);
  facts.guarded.push_back(Topic("__transaction_state", 3, 1, 50));
  auto r = CheckReplication(facts, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(
      Says(r, "topic __transaction_state has replication factor 3 and min.insync.replicas 1"))
      << r.error().message;
  EXPECT_TRUE(Says(r, "--entity-name __transaction_state --add-config min.insync.replicas=2"));
  EXPECT_TRUE(Says(r, "the fence that lets one allocator at a time commit"));
  EXPECT_FALSE(Says(r, "topic kleaf.state has")) << "only the topic at fault is named";

  facts.guarded.back() = Topic("__transaction_state", 3, 2, 50);
  facts.guarded.back().unclean_leader_election = true;
  r = CheckReplication(facts, false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Says(r, "topic __transaction_state has unclean.leader.election.enable=true"))
      << r.error().message;
  EXPECT_TRUE(Says(r,
                   "Fix: kafka-configs.sh --bootstrap-server B --alter --entity-type topics "
                   "--entity-name __transaction_state --add-config "
                   "unclean.leader.election.enable=false"));

  auto allowed = CheckReplication(facts, true);
  ASSERT_TRUE(allowed) << allowed.error().message;
  EXPECT_TRUE(Warns(allowed, "__transaction_state has unclean.leader.election.enable=true"));

  facts.guarded.back().unclean_leader_election = false;
  auto fine = CheckReplication(facts, false);
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_TRUE(fine->empty());
}

// With a broker down the cluster reports two, but the replica lists of its topics still count
// three: an unreplicated topic is refused during maintenance as before it.
TEST(ReplicationTest, ABrokerThatIsDownStillCountsThroughTheReplicasOfTheTopics) {
  auto r = CheckReplication(Facts(2, Topic("kleaf.state", 1, 1)), false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Says(r, "on a cluster of 3 brokers")) << r.error().message;
}

TEST(ReplicationTest, OneBrokerHasNothingToCheck) {
  ReplicationFacts facts{1, {Topic("kleaf.state", 1, 1)}, {Topic("__consumer_offsets", 1, 1, 1)}};
  auto r = CheckReplication(facts, false);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->empty());
}

TEST(ReplicationTest, TwoBrokersAreWarnedAboutNotRefused) {
  ReplicationFacts facts{2, {Topic("kleaf.state", 2, 1)}, {}};
  auto r = CheckReplication(facts, false);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE(Warns(r,
                    "topic kleaf.state has replication factor 2 and min.insync.replicas 1 on a "
                    "cluster of 2 brokers"))
      << r->front();
  EXPECT_TRUE(Warns(r, "a cluster of 3 brokers or more can lose one"));
}

// An operator who runs a smaller setup on purpose: every shortfall is still said, with its fix.
TEST(ReplicationTest, AllowUnreplicatedTurnsTheRefusalIntoAWarning) {
  ReplicationFacts facts{3, {Topic("kleaf.state", 1, 1), Topic("kleaf.requests", 3, 1)}, {}};
  auto r = CheckReplication(facts, true);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE(Warns(r, "topic kleaf.state has replication factor 1"));
  EXPECT_TRUE(Warns(r, "kafka.allow_unreplicated is set"));
  EXPECT_TRUE(Warns(r, "--entity-name kleaf.requests --add-config min.insync.replicas=2"));
}

// Kafka's own transaction and offsets topics, and kleaf's replies and ids topics, hold nothing a
// refusal could protect: they are warned about, once, at start.
TEST(ReplicationTest, TheOtherTopicsAreOnlyWarnedAbout) {
  ReplicationFacts facts = Facts(3);
  facts.others = {Topic("__transaction_state", 1, 1, 50), Topic("__consumer_offsets", 3, 1, 50),
                  Topic("kleaf.replies", 3, 2)};
  auto r = CheckReplication(facts, false);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE(Warns(r, "topic __transaction_state has replication factor 1"));
  EXPECT_TRUE(
      Warns(r, "topic __consumer_offsets has replication factor 3 and min.insync.replicas 1"));
}

// A topic the brokers did not describe (0: unknown) is not judged on what is unknown.
TEST(ReplicationTest, UnknownValuesAreNotJudged) {
  auto unknown_isr = CheckReplication(Facts(3, Topic("kleaf.state", 3, 0)), false);
  ASSERT_TRUE(unknown_isr) << unknown_isr.error().message;
  EXPECT_TRUE(unknown_isr->empty());
  auto unknown_rf = CheckReplication(Facts(3, Topic("kleaf.state", 0, 0)), false);
  ASSERT_TRUE(unknown_rf) << unknown_rf.error().message;
  auto one_replica = CheckReplication(Facts(3, Topic("kleaf.state", 1, 0)), false);
  ASSERT_FALSE(one_replica);
  EXPECT_TRUE(Says(one_replica, "min.insync.replicas unknown")) << one_replica.error().message;
}

}  // namespace
}  // namespace kleaf::cluster
