// The checks a cluster's uniqueness rests on besides its code (docs/architecture.md, "What I1 and
// I3 rest on, and the check that enforces each"): one partition count, one state topic, requests
// routed where their tag's state lives.
#include <gtest/gtest.h>

#include "allocator/operations.h"
#include "cluster/restore.h"
#include "cluster/topics.h"
#include "cluster/wire.h"
#include "kafka/client.h"

namespace kleaf::cluster {
namespace {

using wire::DecodeLayout;
using wire::EncodeLayout;

const ClusterTopics kNames = ClusterTopics::For("kleaf", 12, 12);

TopicFacts Facts(int32_t requests, int32_t state, std::string id = "id-A") {
  return TopicFacts{requests, state, std::move(id), "compact"};
}

bool Says(const Result<ClusterLayout>& r, std::string_view text) {
  return !r && r.error().message.find(text) != std::string::npos;
}

TEST(LayoutTest, AFirstNodeTakesTheTopicsCountAndIdentity) {
  auto l = CheckLayout(kNames, Facts(12, 12), 0, {});
  ASSERT_TRUE(l.has_value()) << l.error().message;
  EXPECT_EQ(l->partitions, 12);
  EXPECT_EQ(l->state_topic_id, "id-A");
}

// A state topic created by hand (or by a tool's defaults) with deletion: Kafka would drop tag
// records by age, and with them the max_id a restarted allocator restores.
TEST(LayoutTest, AStateTopicThatIsNotCompactedIsAConfigErrorSayingHowToFixIt) {
  for (const char* policy : {"delete", "compact,delete"}) {
    TopicFacts facts = Facts(12, 12);
    facts.state_cleanup_policy = policy;
    auto l = CheckLayout(kNames, facts, 0, {});
    ASSERT_FALSE(l) << policy;
    EXPECT_EQ(l.error().code, Code::kInvalidArgument);  // exit 2: restarting does not help
    EXPECT_TRUE(Says(l, std::string("topic kleaf.state has cleanup.policy=") + policy))
        << l.error().message;
    EXPECT_TRUE(Says(l, "--entity-name kleaf.state --add-config cleanup.policy=compact"));
  }
}

// A state topic (or a broker default) that allows unclean leader elections: a replica that fell
// behind could become leader and drop committed max_id records.
TEST(LayoutTest, AStateTopicWithUncleanElectionsIsAConfigErrorSayingHowToFixIt) {
  TopicFacts facts = Facts(12, 12);
  facts.state_cleanup_policy = "compact";
  facts.state_unclean_leader_election = "true";
  auto l = CheckLayout(kNames, facts, 0, {});
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, Code::kInvalidArgument);  // exit 2: restarting does not help
  EXPECT_TRUE(Says(l, "topic kleaf.state has unclean.leader.election.enable=true"))
      << l.error().message;
  EXPECT_TRUE(
      Says(l, "--entity-name kleaf.state --add-config unclean.leader.election.enable=false"));
  for (const char* fine : {"false", ""}) {
    facts.state_unclean_leader_election = fine;
    EXPECT_TRUE(CheckLayout(kNames, facts, 0, {})) << "unclean.leader.election.enable=" << fine;
  }
}

TEST(LayoutTest, AConfiguredCountThatDisagreesWithTheTopicsIsAConfigErrorNamingBoth) {
  auto l = CheckLayout(kNames, Facts(12, 12), 5, {});
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(Says(l, "kafka.partitions: 5 is configured, but topic kleaf.requests has 12"))
      << l.error().message;
  EXPECT_TRUE(CheckLayout(kNames, Facts(12, 12), 12, {}).has_value());
}

TEST(LayoutTest, RequestsAndStateWithDifferentCountsAreRefused) {
  auto l = CheckLayout(kNames, Facts(12, 16), 0, {});
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code, Code::kFailedPrecondition);
  EXPECT_TRUE(Says(l, "share a partition number")) << l.error().message;
}

TEST(LayoutTest, PartitionsAddedToALiveTopicAreRefusedSayingWhatToDo) {
  const ClusterLayout recorded{12, "id-A", "alloc-1", 1};
  EXPECT_TRUE(CheckLayout(kNames, Facts(12, 12), 0, {recorded}).has_value());
  auto grown = CheckLayout(kNames, Facts(16, 16), 0, {recorded});
  ASSERT_FALSE(grown.has_value());
  EXPECT_EQ(grown.error().code, Code::kFailedPrecondition);
  EXPECT_TRUE(Says(grown,
                   "partitions were added to a live topic: kleaf.requests has 16 "
                   "partitions, but this cluster's layout"))
      << grown.error().message;
  EXPECT_TRUE(Says(grown, "has 12")) << grown.error().message;
  EXPECT_TRUE(Says(grown, "new kafka.topic_prefix")) << grown.error().message;
  // A node configured with the new count is refused the same way.
  EXPECT_FALSE(CheckLayout(kNames, Facts(16, 16), 16, {recorded}).has_value());
}

TEST(LayoutTest, ARecreatedStateTopicIsRefused) {
  const ClusterLayout recorded{12, "id-A", "alloc-1", 1};
  auto l = CheckLayout(kNames, Facts(12, 12, "id-B"), 0, {recorded});
  ASSERT_FALSE(l.has_value());
  EXPECT_TRUE(Says(l, "kleaf.state was deleted and recreated")) << l.error().message;
  // A layout written by a client that could not tell topic ids takes the id now seen.
  auto adopted = CheckLayout(kNames, Facts(12, 12, "id-B"), 0, {{12, "", "old", 1}});
  ASSERT_TRUE(adopted.has_value());
  EXPECT_EQ(adopted->state_topic_id, "id-B");
}

TEST(LayoutTest, ConflictingLayoutRecordsAreRefused) {
  auto l = CheckLayout(kNames, Facts(12, 12), 0, {{12, "id-A", "a", 1}, {16, "id-A", "b", 2}});
  EXPECT_TRUE(Says(l, "conflicting layouts")) << (l ? "accepted" : l.error().message);
}

TEST(LayoutTest, LayoutRecordsRoundTrip) {
  auto l = DecodeLayout(EncodeLayout({12, "id-A", "alloc-1", 42}));
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->partitions, 12);
  EXPECT_EQ(l->state_topic_id, "id-A");
  EXPECT_EQ(l->written_by, "alloc-1");
  EXPECT_EQ(l->written_ms, 42);
  EXPECT_FALSE(DecodeLayout(R"({"partitions":0})").has_value());
  EXPECT_FALSE(DecodeLayout("not json").has_value());
}

TEST(LayoutTest, AStoreServesOnlyTheStateTopicItIsAViewOf) {
  EXPECT_TRUE(CheckStoreTopic(std::nullopt, "kleaf.state", "id-A", "/s").has_value());
  EXPECT_TRUE(CheckStoreTopic("kleaf.state id-A", "kleaf.state", "id-A", "/s").has_value());
  EXPECT_TRUE(CheckStoreTopic("kleaf.state ", "kleaf.state", "id-A", "/s").has_value())
      << "a store bound before ids were known";
  auto other = CheckStoreTopic("kleaf.state id-A", "other.state", "id-X", "/s");
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.error().message.find("state.path /s holds the state of topic kleaf.state, not "
                                       "other.state"),
            std::string::npos)
      << other.error().message;
  auto recreated = CheckStoreTopic("kleaf.state id-A", "kleaf.state", "id-B", "/s");
  ASSERT_FALSE(recreated.has_value());
  EXPECT_NE(recreated.error().message.find("deleted and recreated"), std::string::npos);
}

TEST(RouteTest, ARequestIsServedOnlyOnThePartitionItsTagMapsTo) {
  allocator::Request r = allocator::op::Allocate{"t1"};
  const int32_t owner = kafka::PartitionFor("t1", 12);
  EXPECT_TRUE(CheckRoute(r, 0, owner, 12).has_value());
  auto wrong = CheckRoute(r, 0, (owner + 1) % 12, 12);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.error().code, Code::kFailedPrecondition);
  EXPECT_NE(wrong.error().message.find("tag 't1' belongs to partition " + std::to_string(owner) +
                                       " of 12, but the request arrived on partition"),
            std::string::npos)
      << wrong.error().message;
  // Registry requests belong to the partition of the registry key.
  allocator::Request claim = allocator::op::ClaimWorker{{allocator::Claimant{"n"}}};
  const int32_t registry = kafka::PartitionFor(allocator::kWorkersKey, 12);
  EXPECT_TRUE(CheckRoute(claim, 0, registry, 12).has_value());
  auto misrouted_claim = CheckRoute(claim, 0, (registry + 1) % 12, 12);
  ASSERT_FALSE(misrouted_claim.has_value());
  EXPECT_TRUE(misrouted_claim.error().message.starts_with("registry request belongs to"))
      << misrouted_claim.error().message;
  // A tag may be named like the registry key: the operation, not the key, says what it is.
  allocator::Request same_name = allocator::op::Allocate{std::string(allocator::kWorkersKey)};
  auto misrouted_tag = CheckRoute(same_name, 0, (registry + 1) % 12, 12);
  ASSERT_FALSE(misrouted_tag.has_value());
  EXPECT_TRUE(misrouted_tag.error().message.starts_with("tag '" +
                                                        std::string(allocator::kWorkersKey) + "'"))
      << misrouted_tag.error().message;
  // Listing asks every partition for its own tags.
  EXPECT_TRUE(CheckRoute(allocator::op::ListTags{}, 0, 3, 12).has_value());
}

// A sequence request is served by the owner of its keys' sections, never by the partition of the
// space's name, and only if every key's section is that owner's.
TEST(RouteTest, ASequenceRequestIsServedOnlyWhereEveryKeysSectionLives) {
  constexpr int64_t kSection = 10;
  auto partition_of = [](uint64_t key) {
    return kafka::PartitionFor(allocator::SectionRouteKey("chat", key / kSection), 12);
  };
  // Two keys of sections on different partitions.
  uint64_t other = kSection;
  while (partition_of(other) == partition_of(0)) other += kSection;
  const int32_t p0 = partition_of(0);
  EXPECT_TRUE(
      CheckRoute(allocator::op::NextSeq{"chat", {0, 3, 0}, allocator::op::SpaceShape{kSection, 0}},
                 12, p0, 12));
  EXPECT_TRUE(CheckRoute(allocator::op::CurrentSeq{"chat", 5, kSection}, 12, p0, 12));
  auto mixed =
      CheckRoute(allocator::op::NextSeq{"chat", {0, other}, allocator::op::SpaceShape{kSection, 0}},
                 12, p0, 12);
  ASSERT_FALSE(mixed.has_value());
  EXPECT_EQ(mixed.error().code, Code::kFailedPrecondition);
  EXPECT_NE(
      mixed.error().message.find("section 'chat#" + std::to_string(other / kSection) +
                                 "' belongs to partition " + std::to_string(partition_of(other))),
      std::string::npos)
      << mixed.error().message;
  auto elsewhere = CheckRoute(allocator::op::CurrentSeq{"chat", other, kSection}, 12, p0, 12);
  EXPECT_FALSE(elsewhere.has_value());
  // Without section_size an allocator cannot tell where the keys' sections live.
  auto bare = CheckRoute(allocator::op::NextSeq{"chat", {0}}, 12, p0, 12);
  ASSERT_FALSE(bare.has_value());
  EXPECT_EQ(bare.error().code, Code::kInvalidArgument);
  // Spaces' records are routed by name, and listed by every partition.
  const int32_t named = kafka::PartitionFor("chat", 12);
  EXPECT_TRUE(CheckRoute(allocator::op::PutSpace{"chat"}, 12, named, 12));
  EXPECT_FALSE(CheckRoute(allocator::op::GetSpace{"chat"}, 12, (named + 1) % 12, 12));
  EXPECT_TRUE(CheckRoute(allocator::op::ListSpaces{}, 12, 5, 12));
}

TEST(RouteTest, ASenderWithAnotherPartitionCountIsRefusedEvenOnTheRightPartition) {
  const allocator::Request r = allocator::op::Allocate{"t1"};
  auto refused = CheckRoute(r, 5, kafka::PartitionFor("t1", 12), 12);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("routed for 5 partitions arrived on partition"),
            std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(CheckRoute(r, 12, kafka::PartitionFor("t1", 12), 12).has_value());
}

TEST(RouteTest, ThePartitionCountTravelsWithTheRequest) {
  auto decoded = wire::DecodeRequest(wire::EncodeRequest({allocator::op::Allocate{"t1"}, 7}));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->partitions, 7);
  const allocator::op::RenewWorker renew{{allocator::Claimant{"n", "p2", "p1"}, 3}};
  auto w = wire::DecodeRequest(wire::EncodeRequest({renew, 7}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->partitions, 7);
  const auto& report = std::get<allocator::op::RenewWorker>(w->request).report;
  EXPECT_EQ(report.claimant.holder, "p2");
  EXPECT_EQ(report.claimant.previous_holder, "p1");
}

// The consumed position a batch's transaction records in the state topic: read back exactly, and
// anything else (a record of another kind or a damaged one) is refused rather than read as an
// offset to resume from.
TEST(RequestsOffsetTest, RoundTripsAndRefusesWhatIsNotAnOffset) {
  EXPECT_EQ(RequestsOffsetKey(7), "requests_offset/7");
  for (int64_t next : {int64_t{0}, int64_t{1}, int64_t{123456789012}}) {
    EXPECT_EQ(wire::DecodeRequestsOffset(wire::EncodeRequestsOffset(next)), next);
  }
  for (const char* bad : {"", "-1", "12x", " 12", "{\"max_id\":5}", "99999999999999999999"}) {
    EXPECT_EQ(wire::DecodeRequestsOffset(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace kleaf::cluster
