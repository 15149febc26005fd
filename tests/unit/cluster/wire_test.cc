// The cluster's wire format (cluster/wire.h): every operation and result survives its encoding,
// and the bytes stay what earlier versions send and read, so that nodes of two versions side by
// side during a rolling restart understand each other.
#include "cluster/wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "allocator/allocation.h"
#include "allocator/id_format.h"

namespace kleaf::cluster::wire {
namespace {

namespace op = allocator::op;
using allocator::Claimant;
using allocator::Segment;
using allocator::WorkerLeaseInfo;

constexpr int64_t kNow = 1'800'000'000'000;

TEST(WireTest, RequestsSurviveTheirEncoding) {
  auto back =
      DecodeRequest(EncodeRequest({op::RenewWorker{{Claimant{"node-1"}, 7, 123, 456}}, 12}));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->partitions, 12);
  const auto* renew = std::get_if<op::RenewWorker>(&back->request);
  ASSERT_NE(renew, nullptr);
  EXPECT_EQ(renew->report.claimant.node_id, "node-1");
  EXPECT_EQ(renew->report.worker_id, 7);
  EXPECT_EQ(renew->report.last_timestamp_ms, 456);

  allocator::TagUpdate u{5, 100, "d"};
  auto put = DecodeRequest(EncodeRequest({op::PutTag{"t", u}}));
  ASSERT_TRUE(put.has_value());
  ASSERT_TRUE(std::holds_alternative<op::PutTag>(put->request));
  EXPECT_EQ(std::get<op::PutTag>(put->request).update.max_id, 100);
  EXPECT_EQ(put->partitions, 0);

  EXPECT_FALSE(DecodeRequest("{not json").has_value());
  auto unknown = DecodeRequest(R"({"op":"transmogrify","tag":"t"})");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, Code::kInvalidArgument);
}

// The bytes of earlier versions (nlohmann's sorted keys): a changed field name would leave a
// gateway and an allocator of two versions unable to talk during a rolling restart.
// The sequence operations carry what the gateway read of the space (section_size, step): the
// allocator that owns a section does not hold the space's record.
TEST(WireTest, SequenceRequestsAndRepliesSurviveTheirEncoding) {
  const uint64_t big = 18'000'000'000'000'000'000u;  // above INT64_MAX: keys are unsigned
  auto next =
      DecodeRequest(EncodeRequest({op::NextSeq{"chat", {1, big, 1}, op::SpaceShape{100, 7}}, 4}));
  ASSERT_TRUE(next.has_value()) << next.error().message;
  const auto* n = std::get_if<op::NextSeq>(&next->request);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->space, "chat");
  EXPECT_EQ(n->keys, (std::vector<uint64_t>{1, big, 1}));
  ASSERT_TRUE(n->shape.has_value());
  EXPECT_EQ(n->shape->section_size, 100);
  EXPECT_EQ(n->shape->step, 7);
  // No shape (the owner reads the space's record itself) travels as 0 and 0, as before shapes.
  auto bare = DecodeRequest(EncodeRequest({op::NextSeq{"chat", {1}}, 4}));
  ASSERT_TRUE(bare.has_value());
  EXPECT_FALSE(std::get<op::NextSeq>(bare->request).shape.has_value());
  auto bare_current = DecodeRequest(EncodeRequest({op::CurrentSeq{"chat", 1}, 4}));
  ASSERT_TRUE(bare_current.has_value());
  EXPECT_FALSE(std::get<op::CurrentSeq>(bare_current->request).section_size.has_value());
  auto current = DecodeRequest(EncodeRequest({op::CurrentSeq{"chat", big, 100}, 4}));
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(std::get<op::CurrentSeq>(current->request).key, big);
  EXPECT_EQ(std::get<op::CurrentSeq>(current->request).section_size, 100);
  allocator::SpaceUpdate u{std::nullopt, 50, "members"};
  auto put = DecodeRequest(EncodeRequest({op::PutSpace{"chat", u}, 4}));
  ASSERT_TRUE(put.has_value());
  EXPECT_FALSE(std::get<op::PutSpace>(put->request).update.section_size.has_value());
  EXPECT_EQ(std::get<op::PutSpace>(put->request).update.step, 50);
  EXPECT_EQ(std::get<op::PutSpace>(put->request).update.description, "members");
  for (const allocator::Request& r :
       {allocator::Request{op::GetSpace{"chat"}}, allocator::Request{op::DeleteSpace{"chat"}},
        allocator::Request{op::ListSpaces{}}}) {
    auto back = DecodeRequest(EncodeRequest({r, 4}));
    ASSERT_TRUE(back.has_value()) << EncodeRequest({r, 4});
    EXPECT_EQ(back->request.index(), r.index());
  }

  auto seqs = DecodeReply<std::vector<uint64_t>>(
      EncodeReply(Result<std::vector<uint64_t>>(std::vector<uint64_t>{5, big})));
  ASSERT_TRUE(seqs.has_value()) << seqs.error().message;
  EXPECT_EQ(*seqs, (std::vector<uint64_t>{5, big}));
  auto seq = DecodeReply<uint64_t>(EncodeReply(Result<uint64_t>(big)));
  ASSERT_TRUE(seq.has_value());
  EXPECT_EQ(*seq, big);
  state::SpaceRecord space{"chat", 100, 7, "d", kNow, false};
  auto one = DecodeReply<state::SpaceRecord>(EncodeReply(Result<state::SpaceRecord>(space)));
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ(one->section_size, 100);
  EXPECT_EQ(one->description, "d");
  auto list = DecodeReply<std::vector<state::SpaceRecord>>(
      EncodeReply(Result<std::vector<state::SpaceRecord>>(std::vector{space, space})));
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->size(), 2u);
  auto refused = DecodeReply<std::vector<uint64_t>>(
      EncodeReply(Result<std::vector<uint64_t>>(Fail(Code::kNotFound, "unknown space 'x'"))));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kNotFound);
}

TEST(WireTest, ARaiseSectionSurvivesItsEncodingWithUnsignedValuesAboveInt64) {
  const uint64_t big = 18'000'000'000'000'000'000u;
  auto raise =
      DecodeRequest(EncodeRequest({op::RaiseSection{"chat", big - 1, 4294967295, big}, 4}));
  ASSERT_TRUE(raise.has_value()) << raise.error().message;
  EXPECT_EQ(raise->partitions, 4);
  const auto* r = std::get_if<op::RaiseSection>(&raise->request);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->space, "chat");
  EXPECT_EQ(r->section, big - 1);
  EXPECT_EQ(r->section_size, 4294967295);
  EXPECT_EQ(r->max_seq, big);
  EXPECT_EQ(EncodeRequest({op::RaiseSection{"c", 2, 10, 77}, 3}),
            R"({"max_seq":77,"op":"raise_section","partitions":3,"section":2,"section_size":10,)"
            R"("space":"c"})");
  // Every field is required: a raise without its section_size or maximum is not one.
  for (const char* text : {R"({"op":"raise_section","space":"c","section":2,"max_seq":7})",
                           R"({"op":"raise_section","space":"c","section":2,"section_size":10})",
                           R"({"op":"raise_section","space":"c","section":-2,"section_size":10,)"
                           R"("max_seq":7})"}) {
    auto bad = DecodeRequest(text);
    ASSERT_FALSE(bad.has_value()) << text;
    EXPECT_EQ(bad.error().code, Code::kInvalidArgument) << text;
  }
  // The reply is the section's maximum after the raise.
  auto after = DecodeReply<uint64_t>(EncodeReply(Result<uint64_t>(big)));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(*after, big);
}

TEST(WireTest, RequestBytesAreThoseEarlierVersionsSend) {
  EXPECT_EQ(EncodeRequest({op::Allocate{"t", 10}, 12}),
            R"({"op":"allocate","partitions":12,"step":10,"tag":"t"})");
  EXPECT_EQ(EncodeRequest({op::ListTags{}, 12}), R"({"op":"list_tags","partitions":12})");
  EXPECT_EQ(EncodeRequest({op::ClaimWorker{{Claimant{"n", "h"}, 5}}, 3}),
            R"({"holder":"h","last_timestamp":0,"node_id":"n","node_now":5,"op":"claim_worker",)"
            R"("partitions":3,"worker_id":-1})");
  auto old = DecodeRequest(R"({"op":"release_worker","node_id":"n","worker_id":4,"node_now":1,)"
                           R"("last_timestamp":2})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(std::get<op::ReleaseWorker>(old->request).report.worker_id, 4);
}

TEST(WireTest, RepliesDecodeAsTheResultTheSenderAsked) {
  auto segment = DecodeReply<Segment>(EncodeReply(Result<Segment>(Segment{"t", 10, 20, 5})));
  ASSERT_TRUE(segment.has_value()) << segment.error().message;
  EXPECT_EQ(segment->start, 10);
  EXPECT_EQ(segment->format, nullptr);
  auto lease = DecodeReply<WorkerLeaseInfo>(
      EncodeReply(Result<WorkerLeaseInfo>(WorkerLeaseInfo{3, 99, 42, kNow + 40})));
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->not_before_ms, 42);
  EXPECT_EQ(lease->allocator_now_ms, kNow + 40);
  // A reply from an allocator that does not send its clock yet.
  auto older =
      DecodeReply<WorkerLeaseInfo>(R"({"lease":{"worker_id":3,"lease_until":1,"not_before":0}})");
  ASSERT_TRUE(older.has_value());
  EXPECT_EQ(older->allocator_now_ms, 0);
  // An error travels with its code; a reply without the result asked for is an internal error.
  auto refused = DecodeReply<state::TagRecord>(
      EncodeReply(Result<state::TagRecord>(Fail(Code::kNotFound, "unknown tag 'x'"))));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kNotFound);
  EXPECT_EQ(refused.error().message, "unknown tag 'x'");
  EXPECT_EQ(DecodeReply<Segment>(R"({"workers":{"leased":1,"free":2}})").error().code,
            Code::kInternal);
  // No tags: the key is left out, as before.
  EXPECT_EQ(EncodeReply(Result<std::vector<state::TagRecord>>(std::vector<state::TagRecord>{})),
            "{}");
  auto none = DecodeReply<std::vector<state::TagRecord>>("{}");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  state::TagRecord a{"a", 7, 10, "d", 0, false};
  auto tags = DecodeReply<std::vector<state::TagRecord>>(
      EncodeReply(Result<std::vector<state::TagRecord>>(std::vector{a, a})));
  ASSERT_TRUE(tags.has_value()) << tags.error().message;
  ASSERT_EQ(tags->size(), 2u);
  EXPECT_EQ((*tags)[1].max_id, 7);
}

TEST(WireTest, SegmentRepliesCarryTheFormatAcrossKafka) {
  state::TagRecord r{"order", 5, 10, "", 0, false};
  r.id_mode = state::IdMode::kObfuscated;
  r.id_key = allocator::NewIdKey();
  r.id_base = 5;
  auto segment = allocator::ReserveSegment(r, 0, 1000, kNow);
  ASSERT_TRUE(segment);
  auto back = DecodeReply<Segment>(EncodeReply(Result<Segment>(*segment)));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_NE(back->format, nullptr);
  EXPECT_TRUE(*back->format == *segment->format);
  EXPECT_EQ(*back->format->Map(7, kNow), *segment->format->Map(7, kNow));

  // A plain segment of datacenter 1 of 3, mapped by the allocator's rules.
  Segment plain{"order", 1, 11, 10, allocator::IdFormat::PlainIn({1, 3})};
  auto mapped = DecodeReply<Segment>(EncodeReply(Result<Segment>(plain)));
  ASSERT_TRUE(mapped) << mapped.error().message;
  ASSERT_NE(mapped->format, nullptr);
  EXPECT_EQ(mapped->format->datacenter(), (allocator::Datacenter{1, 3}));
  EXPECT_EQ(*mapped->format->Map(4, kNow), 13);

  op::PutTag put{"order"};
  put.update.id_mode = state::IdMode::kObfuscatedTime;
  put.update.restore_id_format = r;
  auto decoded = DecodeRequest(EncodeRequest({put}));
  ASSERT_TRUE(decoded) << decoded.error().message;
  const auto& update = std::get<op::PutTag>(decoded->request).update;
  EXPECT_EQ(update.id_mode, state::IdMode::kObfuscatedTime);
  EXPECT_EQ(update.restore_id_format->id_key, r.id_key);
}

TEST(WireTest, LayoutAndRequestsOffsetRecords) {
  ClusterLayout l{12, "id-A", "node-1", kNow, {1, 2}};
  auto back = DecodeLayout(EncodeLayout(l));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->partitions, 12);
  EXPECT_EQ(back->datacenter, (allocator::Datacenter{1, 2}));
  EXPECT_EQ(DecodeRequestsOffset(EncodeRequestsOffset(42)), 42);
  EXPECT_EQ(DecodeRequestsOffset("-1"), std::nullopt);
  EXPECT_EQ(DecodeRequestsOffset("12x"), std::nullopt);
}

TEST(WireTest, OwnerHopCallsAndRepliesSurviveTheirFraming) {
  const std::vector<HopCall> calls = {{3, R"({"op":"next_seq"})"}, {0, ""}, {11, "a\nb 7\n"}};
  auto decoded = DecodeHopCalls(EncodeHopCalls(calls));
  ASSERT_TRUE(decoded) << decoded.error().message;
  ASSERT_EQ(decoded->size(), 3u);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ((*decoded)[i].partition, calls[i].partition);
    EXPECT_EQ((*decoded)[i].request, calls[i].request);
  }
  const std::vector<HopReply> replies = {{200, "[1,2]", 7}, {503, "{\"error\":{}}", 0}};
  auto back = DecodeHopReplies(EncodeHopReplies(replies));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].status, 200);
  EXPECT_EQ((*back)[0].body, "[1,2]");
  EXPECT_EQ((*back)[0].generation, 7u);
  EXPECT_EQ((*back)[1].status, 503);
  EXPECT_EQ((*back)[1].generation, 0u);
}

TEST(WireTest, AnOwnerHopBodyThatIsNotOneIsRefused) {
  for (const char* bad : {"", "3", "3 ", "3 5\nabc", "x 1\na", "3 1 a", "-1x 0\n"}) {
    EXPECT_FALSE(DecodeHopCalls(bad)) << bad;
  }
  EXPECT_FALSE(DecodeHopReplies("200 1 5\nabc"));
  EXPECT_FALSE(DecodeHopReplies("200 x 1\na"));
  EXPECT_TRUE(DecodeHopReplies("")) << "no answers for no calls";
  std::string many;
  for (size_t i = 0; i <= kMaxHopCalls; ++i) many += "0 0\n";
  auto refused = DecodeHopCalls(many);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace kleaf::cluster::wire

namespace kleaf::cluster::wire {
namespace {

// next_seq's envelope and values are written and read by hand (base/plain_json.h): the bytes must
// be nlohmann's, byte for byte, so that a node of an earlier version reads them and writes what
// this one reads, and every other text must still be read as before (by nlohmann).
TEST(WireTest, HandWrittenNextSeqEnvelopesAndValuesAreNlohmannsBytes) {
  const uint64_t max = UINT64_MAX;
  struct Case {
    op::NextSeq next;
    int32_t partitions;
  };
  const std::vector<Case> cases = {
      {op::NextSeq{"chat", {1, max, 0, 1}, op::SpaceShape{100, 7}}, 12},
      {op::NextSeq{"chat", {5}}, 0},
      {op::NextSeq{"a-b_c.d", {}, op::SpaceShape{-3, INT64_MAX}}, INT32_MAX},
      {op::NextSeq{"quote\"and\\slash", {2}, op::SpaceShape{1, 1}}, 4},  // nlohmann's escapes
      {op::NextSeq{"caf\xc3\xa9", {3}}, 4},                              // and UTF-8
  };
  for (const auto& c : cases) {
    const op::SpaceShape shape = c.next.shape.value_or(op::SpaceShape{});
    nlohmann::json expected = {{"op", "next_seq"},
                               {"space", c.next.space},
                               {"keys", c.next.keys},
                               {"section_size", shape.section_size},
                               {"step", shape.step}};
    if (c.partitions > 0) expected["partitions"] = c.partitions;
    const std::string bytes = EncodeRequest({c.next, c.partitions});
    EXPECT_EQ(bytes, expected.dump());
    auto back = DecodeRequest(bytes);
    ASSERT_TRUE(back.has_value()) << bytes << ": " << back.error().message;
    EXPECT_EQ(back->partitions, c.partitions) << bytes;
    const auto& n = std::get<op::NextSeq>(back->request);
    EXPECT_EQ(n.space, c.next.space);
    EXPECT_EQ(n.keys, c.next.keys);
    EXPECT_EQ(n.shape.has_value(), c.next.shape.has_value()) << bytes;
    if (n.shape && c.next.shape) {
      EXPECT_EQ(n.shape->section_size, c.next.shape->section_size);
      EXPECT_EQ(n.shape->step, c.next.shape->step);
    }
  }

  for (const std::vector<uint64_t>& values :
       {std::vector<uint64_t>{}, std::vector<uint64_t>{0}, std::vector<uint64_t>{1, max, 42}}) {
    const std::string bytes = EncodeReply(Result<std::vector<uint64_t>>(values));
    EXPECT_EQ(bytes, nlohmann::json({{"seqs", values}}).dump());
    auto back = DecodeReply<std::vector<uint64_t>>(bytes);
    ASSERT_TRUE(back.has_value()) << bytes;
    EXPECT_EQ(*back, values);
  }
}

TEST(WireTest, NextSeqTextsNotInDumpsShapeAreStillReadAsJson) {
  // Spaces, other member orders, no partitions: what another writer may send.
  auto spaced = DecodeRequest(
      R"({ "op": "next_seq", "space": "chat", "keys": [ 1, 2 ], "step": 7, "section_size": 100 })");
  ASSERT_TRUE(spaced.has_value()) << spaced.error().message;
  EXPECT_EQ(spaced->partitions, 0);
  const auto& n = std::get<op::NextSeq>(spaced->request);
  EXPECT_EQ(n.keys, (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(n.shape.has_value());
  EXPECT_EQ(n.shape->section_size, 100);
  // Not JSON (a leading zero, a trailing comma, an unclosed list, a hexadecimal number): refused as
  // before.
  for (const char* bad :
       {R"({"keys":[01],"op":"next_seq","section_size":0,"space":"chat","step":0})",
        R"({"keys":[1,],"op":"next_seq","section_size":0,"space":"chat","step":0})",
        R"({"keys":[1,"op":"next_seq","section_size":0,"space":"chat","step":0})",
        R"({"keys":[1],"op":"next_seq","section_size":-0x1,"space":"chat","step":0})"}) {
    auto r = DecodeRequest(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << bad;
  }
  // Values with spaces, and an error, still read.
  auto values = DecodeReply<std::vector<uint64_t>>(R"({ "seqs" : [ 3 , 4 ] })");
  ASSERT_TRUE(values.has_value());
  EXPECT_EQ(*values, (std::vector<uint64_t>{3, 4}));
  auto refused = DecodeReply<std::vector<uint64_t>>(
      EncodeReply(Result<std::vector<uint64_t>>(std::unexpected(Error{Code::kUnavailable, "x"}))));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kUnavailable);
}

}  // namespace
}  // namespace kleaf::cluster::wire
