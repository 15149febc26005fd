// More than one datacenter (issue 17): each cluster's worker ids and segment IDs are its own
// slice of the space, and every place that could let two datacenters meet checks the pair.
#include "allocator/datacenter.h"

#include <gtest/gtest.h>

#include <set>

#include "allocator/allocation.h"
#include "allocator/workers.h"

namespace kleaf::allocator {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

TEST(DatacenterTest, WorkerSlicesAreDisjointAndCoverEveryId) {
  for (int bits : {1, 4, 10}) {
    for (int64_t count = 1; count <= (int64_t{1} << bits) && count <= 7; ++count) {
      std::set<int64_t> seen;
      for (int64_t i = 0; i < count; ++i) {
        const auto r = WorkerRangeOf({i, count}, bits);
        ASSERT_GE(r.size(), 1) << i << " of " << count << ", " << bits << " bits";
        for (int64_t w = r.first; w <= r.last; ++w) {
          EXPECT_TRUE(seen.insert(w).second) << "worker " << w << " in two slices";
          EXPECT_EQ(DatacenterOfWorker(w, count, bits), i) << "worker " << w;
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), int64_t{1} << bits);
    }
  }
  EXPECT_EQ(WorkerRangeOf({0, 1}, 10).first, 0);  // one datacenter: today's whole space
  EXPECT_EQ(WorkerRangeOf({0, 1}, 10).last, 1023);
  EXPECT_EQ(WorkerRangeOf({1, 2}, 10).first, 512);
}

TEST(DatacenterTest, CheckNamesTheKey) {
  EXPECT_TRUE(CheckDatacenter({0, 1}, 10));
  auto index = CheckDatacenter({2, 2}, 10);
  ASSERT_FALSE(index);
  EXPECT_TRUE(index.error().message.starts_with("datacenter.index:")) << index.error().message;
  auto count = CheckDatacenter({0, 5}, 2);
  ASSERT_FALSE(count);
  EXPECT_TRUE(count.error().message.starts_with("datacenter.count:")) << count.error().message;
}

// The residue class: two datacenters' IDs never meet whatever their counters, and each one's
// grow with its counters.
TEST(DatacenterTest, SegmentIdsOfTwoDatacentersNeverMeet) {
  auto dc0 = IdFormat::PlainIn({0, 2});
  auto dc1 = IdFormat::PlainIn({1, 2});
  ASSERT_TRUE(dc0 && dc1);
  EXPECT_EQ(IdFormat::PlainIn({0, 1}), nullptr) << "one datacenter: IDs are the counters";
  std::set<int64_t> ids;
  int64_t previous = -1;
  for (int64_t c = 1; c < 5000; ++c) {
    auto a = dc0->Map(c, 0);
    auto b = dc1->Map(c, 0);
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(ids.insert(*a).second);
    EXPECT_TRUE(ids.insert(*b).second);
    EXPECT_GT(*a, previous);
    previous = *a;
    EXPECT_EQ(*dc1->Unmap(*b), c);
    EXPECT_FALSE(dc0->Unmap(*b)) << "an ID of datacenter 1 is not one of datacenter 0";
  }
  // The end of the space is refused, never wrapped.
  auto last = dc1->Map(MaxSegmentCounter({1, 2}), 0);
  ASSERT_TRUE(last);
  EXPECT_GT(*last, 0);
  auto past = dc1->Map(MaxSegmentCounter({1, 2}) + 1, 0);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, Code::kResourceExhausted);
}

TEST(DatacenterTest, ApplyDatacenterFormatsPlainSegmentsAndRefusesObfuscatedOnes) {
  Segment plain{"order", 10, 20, 10, nullptr};
  ASSERT_TRUE(ApplyDatacenter(plain, {0, 1}));
  EXPECT_EQ(plain.format, nullptr) << "one datacenter: unchanged";
  ASSERT_TRUE(ApplyDatacenter(plain, {1, 3}));
  ASSERT_NE(plain.format, nullptr);
  EXPECT_EQ(*plain.format->Map(10, 0), 31);

  state::TagRecord r;
  r.tag = "secret";
  r.id_mode = state::IdMode::kObfuscated;
  r.id_key = NewIdKey();
  r.id_base = 5;
  Segment obfuscated{"secret", 5, 15, 10, *IdFormat::Of(r)};
  ASSERT_TRUE(ApplyDatacenter(obfuscated, {0, 1}));
  auto refused = ApplyDatacenter(obfuscated, {0, 2});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find("more than one datacenter"), std::string::npos);
}

TEST(DatacenterTest, ATagCannotBecomeObfuscatedWithMoreThanOneDatacenter) {
  TagRules rules;
  rules.datacenter_count = 2;
  TagUpdate update;
  update.id_mode = state::IdMode::kObfuscated;
  auto r = ApplyTagUpdate(std::nullopt, "order", update, rules, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("more than one datacenter"), std::string::npos);
  update.id_mode = state::IdMode::kPlain;
  EXPECT_TRUE(ApplyTagUpdate(std::nullopt, "order", update, rules, kNow));
  rules.datacenter_count = 1;
  update.id_mode = state::IdMode::kObfuscated;
  EXPECT_TRUE(ApplyTagUpdate(std::nullopt, "order", update, rules, kNow));
}

// The registry of datacenter 1 of 2 (10 bits: ids 512 to 1023) never hands out an id of
// datacenter 0, not even one its records hold or its claimant held before.
TEST(DatacenterTest, TheRegistryHandsOutOnlyItsDatacentersIds) {
  const auto range = WorkerRangeOf({1, 2}, 10);
  const WorkerRules rules{.max_worker_id = range.last,
                          .lease_ttl_ms = 30000,
                          .max_clock_skew_ms = 1000,
                          .min_worker_id = range.first};
  std::vector<WorkerRecord> records = {{3, "gw-a", kNow - 1, kNow - 5}};  // expired, outside
  auto first = ClaimWorker(records, Claimant{"gw-a"}, kNow, kNow, rules);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->record.worker_id, 512) << "not its old id 3: another datacenter's";
  std::vector<WorkerRecord> full;
  for (int64_t w = range.first; w <= range.last; ++w) full.push_back({w, "n", kNow + 1000, kNow});
  auto none = ClaimWorker(full, Claimant{"late"}, kNow, kNow, rules);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Code::kResourceExhausted);
  EXPECT_NE(none.error().message.find("512 to 1023"), std::string::npos) << none.error().message;
  const auto counts = CountWorkers(full, kNow, rules);
  EXPECT_EQ(counts.leased, 512);
  EXPECT_EQ(counts.free, 0);
  // A renewal of an id outside the slice is refused: the holder must stop issuing.
  auto renew = RenewWorker(WorkerRecord{3, "gw-a", kNow + 1000, kNow}, 3, Claimant{"gw-a"}, kNow,
                           kNow, rules);
  ASSERT_FALSE(renew);
  EXPECT_EQ(renew.error().code, Code::kFailedPrecondition);
}

}  // namespace
}  // namespace kleaf::allocator
