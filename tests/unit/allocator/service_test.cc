// Execute(): what one request does to the records, whatever transport carried it.
#include "allocator/service.h"

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
  void Apply(const Outcome& o) {
    for (const auto& w : o.writes) tags[w.tag] = w;
    for (const auto& w : o.worker_writes) {
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

TEST(ServiceTest, AllocationsOfOneBatchNeverOverlap) {
  MapReader reader;
  reader.tags["t"] = state::TagRecord{"t", 1, 10, "", 0, false};
  int64_t last_end = 1;
  for (int i = 0; i < 5; ++i) {
    auto o = Execute(MakeRequest(Request::Op::kAllocate, "t", 10), reader, TestRules(), kNow);
    ASSERT_TRUE(o.reply.segment.has_value());
    EXPECT_EQ(o.reply.segment->start, last_end);
    last_end = o.reply.segment->end;
    ASSERT_EQ(o.writes.size(), 1u) << "the new max_id must be written before the reply counts";
    reader.Apply(o);
  }
}

TEST(ServiceTest, UnknownTagIsNotFoundAndWritesNothing) {
  MapReader reader;
  auto o = Execute(MakeRequest(Request::Op::kAllocate, "nope"), reader, TestRules(), kNow);
  ASSERT_TRUE(o.reply.error.has_value());
  EXPECT_EQ(o.reply.error->code, Code::kNotFound);
  EXPECT_TRUE(o.writes.empty());
}

TEST(ServiceTest, RenewalFromAClockThatRanAheadIsRefusedButRecorded) {
  MapReader reader;
  auto claim = Execute(MakeWorkerRequest(Request::Op::kClaimWorker, Claimant{"n"}, -1, kNow), reader, TestRules(), kNow);
  ASSERT_TRUE(claim.reply.lease.has_value());
  reader.Apply(claim);
  int64_t id = claim.reply.lease->worker_id;
  // The node reports a timestamp 5 s ahead of the allocator's clock.
  auto renew = Execute(MakeWorkerRequest(Request::Op::kRenewWorker, Claimant{"n"}, id, kNow + 5000, kNow + 5000),
                       reader, TestRules(), kNow + 10);
  ASSERT_TRUE(renew.reply.error.has_value());
  EXPECT_EQ(renew.reply.error->code, Code::kFailedPrecondition);
  EXPECT_NE(renew.reply.error->message.find("ahead"), std::string::npos);
  ASSERT_EQ(renew.worker_writes.size(), 1u) << "the reported timestamp must still be kept";
  EXPECT_EQ(renew.worker_writes[0].last_timestamp_ms, kNow + 5000);
  EXPECT_GE(renew.worker_writes[0].lease_until_ms, kNow + 5000 + 30000);
  reader.Apply(renew);
  // Once that blocked lease ends, a new holder starts after the reported timestamp.
  std::vector<state::WorkerRecord> all = reader.workers;
  for (int i = 0; i < 4; ++i) {
    if (i != id) all.push_back({i, "other" + std::to_string(i), kNow + 999999, 0});
  }
  reader.workers = all;
  int64_t later = kNow + 5000 + 30001;
  auto next = Execute(MakeWorkerRequest(Request::Op::kClaimWorker, Claimant{"m"}, -1, later), reader, TestRules(), later);
  ASSERT_TRUE(next.reply.lease.has_value()) << next.reply.error->message;
  EXPECT_EQ(next.reply.lease->worker_id, id);
  EXPECT_GE(next.reply.lease->not_before_ms, kNow + 5000);
}

TEST(ServiceTest, RequestsAndRepliesSurviveTheirJsonEncoding) {
  auto r = MakeWorkerRequest(Request::Op::kRenewWorker, Claimant{"node-1"}, 7, 123, 456);
  auto back = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->op, Request::Op::kRenewWorker);
  EXPECT_EQ(back->node_id, "node-1");
  EXPECT_EQ(back->worker_id, 7);
  EXPECT_EQ(back->last_timestamp_ms, 456);
  TagUpdate u{5, 100, "d"};
  auto put = DecodeRequest(EncodeRequest(MakeRequest(Request::Op::kPutTag, "t", 0, u)));
  ASSERT_TRUE(put.has_value());
  EXPECT_EQ(put->update.max_id, 100);
  Reply reply;
  reply.segment = Segment{"t", 10, 20, 5};
  reply.lease = WorkerLeaseInfo{3, 99, 42};
  auto decoded = DecodeReply(EncodeReply(reply));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->segment->start, 10);
  EXPECT_EQ(decoded->lease->not_before_ms, 42);
  EXPECT_FALSE(DecodeRequest("{not json").has_value());
}

// What lets a node estimate its clock offset to the allocator (snowflake::WorkerLease).
TEST(ServiceTest, ClaimAndRenewRepliesCarryTheAllocatorsClock) {
  MapReader reader;
  Rules rules;
  auto claim = Execute(ClaimRequest({.claimant = Claimant{"n1"}, .node_now_ms = kNow}), reader,
                       rules, kNow + 40);
  ASSERT_TRUE(claim.reply.lease.has_value());
  EXPECT_EQ(claim.reply.lease->allocator_now_ms, kNow + 40);
  reader.Apply(claim);
  auto renew =
      Execute(ReportRequest(Request::Op::kRenewWorker, {.claimant = Claimant{"n1"},
                                                        .worker_id = claim.reply.lease->worker_id,
                                                        .node_now_ms = kNow + 500,
                                                        .last_timestamp_ms = kNow + 400}),
              reader, rules, kNow + 1000);
  ASSERT_TRUE(renew.reply.lease.has_value())
      << (renew.reply.error ? renew.reply.error->message : "");
  EXPECT_EQ(renew.reply.lease->allocator_now_ms, kNow + 1000);

  auto decoded = DecodeReply(EncodeReply(claim.reply));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->lease->allocator_now_ms, kNow + 40);
  // A reply from an allocator that does not send its clock yet.
  auto old = DecodeReply(R"({"lease":{"worker_id":3,"lease_until":1,"not_before":0}})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->lease->allocator_now_ms, 0);
}

}  // namespace
}  // namespace kleaf::allocator
