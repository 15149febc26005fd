// Execute(): what one operation does to the records, whatever transport carried it.
#include "allocator/operations.h"

#include <gtest/gtest.h>

#include <map>

namespace kleaf::allocator {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

class MapReader final : public StateReader {
 public:
  Result<std::optional<state::TagRecord>> Get(const std::string& tag) override {
    auto it = tags.find(tag);
    if (it == tags.end()) return std::optional<state::TagRecord>();
    return std::optional(it->second);
  }
  Result<std::vector<state::TagRecord>> List() override {
    std::vector<state::TagRecord> out;
    for (auto& [t, r] : tags) out.push_back(r);
    return out;
  }
  Result<std::vector<state::WorkerRecord>> ListWorkers() override { return workers; }
  template <typename Op>
  void Apply(const Outcome<Op>& o) {
    for (const auto& w : o.effects.writes) tags[w.tag] = w;
    for (const auto& w : o.effects.worker_writes) {
      std::erase_if(workers, [&](const auto& x) { return x.worker_id == w.worker_id; });
      workers.push_back(w);
    }
  }
  std::map<std::string, state::TagRecord> tags;
  std::vector<state::WorkerRecord> workers;
};

Rules TestRules() {
  Rules r;
  r.workers = {.max_worker_id = 3, .lease_ttl_ms = 30000, .max_clock_skew_ms = 1000};
  return r;
}

TEST(OperationsTest, AllocationsOfOneBatchNeverOverlap) {
  MapReader reader;
  reader.tags["t"] = state::TagRecord{"t", 1, 10, "", 0, false};
  int64_t last_end = 1;
  for (int i = 0; i < 5; ++i) {
    auto o = Execute(op::Allocate{"t", 10}, reader, TestRules(), kNow);
    ASSERT_TRUE(o.result.has_value());
    EXPECT_EQ(o.result->start, last_end);
    last_end = o.result->end;
    ASSERT_EQ(o.effects.writes.size(), 1u)
        << "the new max_id must be written before the reply counts";
    reader.Apply(o);
  }
}

TEST(OperationsTest, UnknownTagIsNotFoundAndWritesNothing) {
  MapReader reader;
  auto o = Execute(op::Allocate{"nope"}, reader, TestRules(), kNow);
  ASSERT_FALSE(o.result.has_value());
  EXPECT_EQ(o.result.error().code, Code::kNotFound);
  EXPECT_TRUE(o.effects.empty());
}

TEST(OperationsTest, RenewalFromAClockThatRanAheadIsRefusedButRecorded) {
  MapReader reader;
  auto claim = Execute(op::ClaimWorker{{Claimant{"n"}, kNow}}, reader, TestRules(), kNow);
  ASSERT_TRUE(claim.result.has_value());
  reader.Apply(claim);
  int64_t id = claim.result->worker_id;
  // The node reports a timestamp 5 s ahead of the allocator's clock.
  auto renew = Execute(op::RenewWorker{{Claimant{"n"}, id, kNow + 5000, kNow + 5000}}, reader,
                       TestRules(), kNow + 10);
  ASSERT_FALSE(renew.result.has_value());
  EXPECT_EQ(renew.result.error().code, Code::kFailedPrecondition);
  EXPECT_NE(renew.result.error().message.find("ahead"), std::string::npos);
  ASSERT_EQ(renew.effects.worker_writes.size(), 1u) << "the reported timestamp must still be kept";
  EXPECT_EQ(renew.effects.worker_writes[0].last_timestamp_ms, kNow + 5000);
  EXPECT_GE(renew.effects.worker_writes[0].lease_until_ms, kNow + 5000 + 30000);
  reader.Apply(renew);
  // Once that blocked lease ends, a new holder starts after the reported timestamp.
  std::vector<state::WorkerRecord> all = reader.workers;
  for (int i = 0; i < 4; ++i) {
    if (i != id) all.push_back({i, "other" + std::to_string(i), kNow + 999999, 0});
  }
  reader.workers = all;
  int64_t later = kNow + 5000 + 30001;
  auto next = Execute(op::ClaimWorker{{Claimant{"m"}, later}}, reader, TestRules(), later);
  ASSERT_TRUE(next.result.has_value()) << next.result.error().message;
  EXPECT_EQ(next.result->worker_id, id);
  EXPECT_GE(next.result->not_before_ms, kNow + 5000);
}

TEST(OperationsTest, SegmentsAreMappedIntoTheRulesDatacenter) {
  MapReader reader;
  reader.tags["t"] = state::TagRecord{"t", 1, 10, "", 0, false};
  Rules rules = TestRules();
  rules.datacenter = {1, 3};
  auto o = Execute(op::Allocate{"t", 10}, reader, rules, kNow);
  ASSERT_TRUE(o.result.has_value()) << o.result.error().message;
  ASSERT_NE(o.result->format, nullptr);
  EXPECT_EQ(*o.result->format->Map(5, kNow), 5 * 3 + 1);
  // An obfuscated tag cannot be issued with more than one datacenter: refused before anything is
  // written.
  reader.tags["o"] = state::TagRecord{"o", 1, 10, "", 0, false};
  reader.tags["o"].id_mode = state::IdMode::kObfuscated;
  reader.tags["o"].id_key = std::string(32, 'a');
  auto refused = Execute(op::Allocate{"o", 10}, reader, rules, kNow);
  ASSERT_FALSE(refused.result.has_value());
  EXPECT_EQ(refused.result.error().code, Code::kFailedPrecondition);
  EXPECT_TRUE(refused.effects.empty());
}

TEST(OperationsTest, OperationNamesFollowTheRequestVariant) {
  EXPECT_STREQ(OpName(kOpIndex<op::Allocate>), "allocate");
  EXPECT_STREQ(OpName(kOpIndex<op::WorkerStatus>), "worker_status");
  EXPECT_EQ(kOpIndex<op::WorkerStatus>, kOpCount - 1);
  EXPECT_EQ(RouteKey(op::GetTag{"t"}), "t");
  EXPECT_EQ(RouteKey(op::RenewWorker{}), std::string(kWorkersKey));
  EXPECT_EQ(RouteKey(op::ListTags{}), std::nullopt);
}

// What lets a node estimate its clock offset to the allocator (snowflake::WorkerLease).
TEST(OperationsTest, ClaimAndRenewRepliesCarryTheAllocatorsClock) {
  MapReader reader;
  Rules rules;
  auto claim = Execute(op::ClaimWorker{{.claimant = Claimant{"n1"}, .node_now_ms = kNow}}, reader,
                       rules, kNow + 40);
  ASSERT_TRUE(claim.result.has_value());
  EXPECT_EQ(claim.result->allocator_now_ms, kNow + 40);
  reader.Apply(claim);
  auto renew = Execute(op::RenewWorker{{.claimant = Claimant{"n1"},
                                        .worker_id = claim.result->worker_id,
                                        .node_now_ms = kNow + 500,
                                        .last_timestamp_ms = kNow + 400}},
                       reader, rules, kNow + 1000);
  ASSERT_TRUE(renew.result.has_value()) << renew.result.error().message;
  EXPECT_EQ(renew.result->allocator_now_ms, kNow + 1000);
}

}  // namespace
}  // namespace kleaf::allocator
