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
  Result<std::optional<state::SpaceRecord>> GetSpace(const std::string& space) override {
    auto it = spaces.find(space);
    if (it == spaces.end()) return std::optional<state::SpaceRecord>();
    return std::optional(it->second);
  }
  Result<std::vector<state::SpaceRecord>> ListSpaces() override {
    std::vector<state::SpaceRecord> out;
    for (auto& [n, r] : spaces) out.push_back(r);
    return out;
  }
  // Not the StateReader's (sections are read as committed): this reader's sections are taken as
  // committed (StateOf), or as a batch staged them (SectionsAreReadAsCommitted...).
  Result<std::optional<state::SectionRecord>> GetSection(const std::string& space,
                                                         uint64_t section) {
    auto it = sections.find({space, section});
    if (it == sections.end()) return std::optional<state::SectionRecord>();
    return std::optional(it->second);
  }
  void Write(const std::vector<state::SectionRecord>& raises) {
    for (const auto& r : raises) sections[{r.space, r.section}] = r;
  }
  template <typename Op>
  void Apply(const Outcome<Op>& o) {
    for (const auto& w : o.effects.spaces) spaces[w.space] = w;
    for (const auto& w : o.effects.tags) tags[w.tag] = w;
    for (const auto& w : o.effects.workers) {
      std::erase_if(workers, [&](const auto& x) { return x.worker_id == w.worker_id; });
      workers.push_back(w);
    }
  }
  std::map<std::string, state::TagRecord> tags;
  std::vector<state::WorkerRecord> workers;
  std::map<std::string, state::SpaceRecord> spaces;
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> sections;
};

// The counters over `reader`'s sections, taken as committed.
SequenceState StateOf(SequenceCounters& counters, MapReader& reader) {
  return SequenceState{counters, [&reader](const std::string& space, uint64_t section) {
                         return reader.GetSection(space, section);
                       }};
}

// The raises the counters want, written to `reader` and settled as committed.
void WriteRaises(SequenceCounters& counters, MapReader& reader) {
  const auto raises = counters.TakeRaises();
  reader.Write(raises);
  counters.Settle(raises, true);
}

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
    ASSERT_EQ(o.effects.tags.size(), 1u)
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
  ASSERT_EQ(renew.effects.workers.size(), 1u) << "the reported timestamp must still be kept";
  EXPECT_EQ(renew.effects.workers[0].last_timestamp_ms, kNow + 5000);
  EXPECT_GE(renew.effects.workers[0].lease_until_ms, kNow + 5000 + 30000);
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
  EXPECT_STREQ(OpName(kOpIndex<op::NextSeq>), "next_seq");
  EXPECT_STREQ(OpName(kOpIndex<op::RaiseSection>), "raise_section");
  EXPECT_EQ(kOpIndex<op::RaiseSection>, kOpCount - 1);
  EXPECT_EQ(RouteKey(op::NextSeq{"chat", {1}}), "chat");
  // A raise goes to the owner of its section, as a next_seq of the section's keys does.
  EXPECT_EQ(RouteKey(op::RaiseSection{"chat", 7, 100, 5}), SectionRouteKey("chat", 7));
  EXPECT_EQ(RouteKeys(op::RaiseSection{"chat", 7, 100, 5}),
            RouteKeys(op::NextSeq{"chat", {700, 799}, op::SpaceShape{100, 1}}));
  EXPECT_EQ(RouteKey(op::ListSpaces{}), std::nullopt);
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

// ---- sequence spaces ----

SpaceUpdate Space(std::optional<int64_t> section_size, std::optional<int64_t> step) {
  SpaceUpdate u;
  u.section_size = section_size;
  u.step = step;
  return u;
}

TEST(OperationsTest, PutSpaceCreatesAndRefusesASectionSizeChange) {
  MapReader reader;
  auto created = Execute(op::PutSpace{"chat", Space(100, 10)}, reader, TestRules(), kNow);
  ASSERT_TRUE(created.result) << created.result.error().message;
  EXPECT_EQ(created.result->section_size, 100);
  ASSERT_EQ(created.effects.spaces.size(), 1u);
  reader.Apply(created);

  auto changed = Execute(op::PutSpace{"chat", Space(200, std::nullopt)}, reader, TestRules(), kNow);
  ASSERT_FALSE(changed.result);
  EXPECT_EQ(changed.result.error().code, Code::kFailedPrecondition);
  EXPECT_TRUE(changed.effects.empty());

  auto step = Execute(op::PutSpace{"chat", Space(std::nullopt, 20)}, reader, TestRules(), kNow);
  ASSERT_TRUE(step.result) << step.result.error().message;
  EXPECT_EQ(step.result->section_size, 100);
  EXPECT_EQ(step.result->step, 20);

  auto bad = Execute(op::PutSpace{"no/slash", Space(100, 10)}, reader, TestRules(), kNow);
  ASSERT_FALSE(bad.result);
  EXPECT_EQ(bad.result.error().code, Code::kInvalidArgument);
}

TEST(OperationsTest, DeletedSpaceIsNotFoundListedOrServedButKeepsItsSectionSize) {
  MapReader reader;
  reader.Apply(Execute(op::PutSpace{"a", Space(100, 10)}, reader, TestRules(), kNow));
  reader.Apply(Execute(op::PutSpace{"b", Space(50, 10)}, reader, TestRules(), kNow));
  auto listed = Execute(op::ListSpaces{}, reader, TestRules(), kNow);
  ASSERT_TRUE(listed.result);
  ASSERT_EQ(listed.result->size(), 2u);
  EXPECT_EQ((*listed.result)[0].space, "a");

  auto deleted = Execute(op::DeleteSpace{"a"}, reader, TestRules(), kNow);
  ASSERT_TRUE(deleted.result);
  EXPECT_FALSE(deleted.result->deleted) << "the record as it was";
  reader.Apply(deleted);
  EXPECT_EQ(Execute(op::GetSpace{"a"}, reader, TestRules(), kNow).result.error().code,
            Code::kNotFound);
  EXPECT_EQ(Execute(op::ListSpaces{}, reader, TestRules(), kNow).result->size(), 1u);

  SequenceCounters counters;
  SequenceState seq = StateOf(counters, reader);
  auto next = Execute(op::NextSeq{"a", {1}}, reader, TestRules(), kNow, seq);
  ASSERT_FALSE(next.result);
  EXPECT_EQ(next.result.error().code, Code::kNotFound);

  auto again = Execute(op::PutSpace{"a", Space(std::nullopt, 5)}, reader, TestRules(), kNow);
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->section_size, 100) << "re-created spaces keep their section_size";
}

TEST(OperationsTest, NextSeqComputesValuesUpToTheCommittedMaximumAndAsksForRaises) {
  MapReader reader;
  reader.Apply(Execute(op::PutSpace{"chat", Space(100, 10)}, reader, TestRules(), kNow));
  SequenceCounters counters;
  SequenceState seq = StateOf(counters, reader);
  uint64_t last7 = 0;
  int waited = 0;
  for (int round = 0; round < 25; ++round) {
    auto o = Execute(op::NextSeq{"chat", {7, 7, 150}}, reader, TestRules(), kNow, seq);
    if (seq.needs_raise) {
      // Nothing computed: the raise is written first, then the operation runs again.
      ASSERT_FALSE(o.result);
      EXPECT_EQ(o.result.error().code, Code::kUnavailable);
      ++waited;
      seq.needs_raise = false;
      WriteRaises(counters, reader);
      o = Execute(op::NextSeq{"chat", {7, 7, 150}}, reader, TestRules(), kNow, seq);
      ASSERT_FALSE(seq.needs_raise);
    }
    ASSERT_TRUE(o.result) << o.result.error().message;
    ASSERT_EQ(o.result->size(), 3u);
    EXPECT_GT((*o.result)[0], last7);
    EXPECT_GT((*o.result)[1], (*o.result)[0]) << "a key listed twice gets two values";
    last7 = (*o.result)[1];
    EXPECT_TRUE(o.effects.empty()) << "the raises are the counters', written by the caller";
    // Every value is at most the committed maximum: none waits for the raise it asks for.
    EXPECT_LE((*o.result)[1], reader.sections.at({"chat", 0}).max_seq);
    WriteRaises(counters, reader);  // ahead of need
  }
  EXPECT_EQ(waited, 1) << "the first call only: later raises come ahead of need";

  auto current = Execute(op::CurrentSeq{"chat", 7}, reader, TestRules(), kNow, seq);
  ASSERT_TRUE(current.result);
  EXPECT_EQ(*current.result, last7);

  // A new owner (fresh counters) starts above everything handed out.
  SequenceCounters fresh;
  SequenceState seq2 = StateOf(fresh, reader);
  auto after = Execute(op::NextSeq{"chat", {7}}, reader, TestRules(), kNow, seq2);
  ASSERT_TRUE(seq2.needs_raise);
  WriteRaises(fresh, reader);
  seq2.needs_raise = false;
  after = Execute(op::NextSeq{"chat", {7}}, reader, TestRules(), kNow, seq2);
  ASSERT_TRUE(after.result);
  EXPECT_GT((*after.result)[0], last7);
}

// Sections are read as committed, never through a reader's staged records (R6): a raise staged in
// an open batch may still abort.
TEST(OperationsTest, SectionsAreReadAsCommittedNotAsTheReaderStagedThem) {
  MapReader reader;
  reader.Apply(Execute(op::PutSpace{"chat", Space(100, 10)}, reader, TestRules(), kNow));
  reader.sections[{"chat", 0}] = state::SectionRecord{"chat", 0, 100, 5000};  // staged only
  SequenceCounters counters;
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> committed;
  SequenceState seq{counters,
                    [&committed](const std::string& space,
                                 uint64_t section) -> Result<std::optional<state::SectionRecord>> {
                      auto it = committed.find({space, section});
                      if (it == committed.end()) return std::nullopt;
                      return it->second;
                    }};
  auto o = Execute(op::NextSeq{"chat", {7}}, reader, TestRules(), kNow, seq);
  EXPECT_TRUE(seq.needs_raise) << "the staged maximum of 5000 was used";
  EXPECT_FALSE(o.result);
  auto current = Execute(op::CurrentSeq{"chat", 7}, reader, TestRules(), kNow, seq);
  ASSERT_TRUE(current.result);
  EXPECT_EQ(*current.result, 0u);
}

TEST(OperationsTest, RaiseSectionIsWantedInTheCountersAndNeedsTheSectionSizeNotTheSpaceRecord) {
  MapReader reader;  // no space record: in the cluster it is another partition's
  SequenceCounters counters;
  SequenceState seq = StateOf(counters, reader);
  auto missing = Execute(op::RaiseSection{"chat", 3, 0, 500}, reader, TestRules(), kNow, seq);
  ASSERT_FALSE(missing.result);
  EXPECT_EQ(missing.result.error().code, Code::kInvalidArgument);
  auto raised = Execute(op::RaiseSection{"chat", 3, 100, 500}, reader, TestRules(), kNow, seq);
  ASSERT_TRUE(raised.result) << raised.result.error().message;
  EXPECT_EQ(*raised.result, 500u);
  EXPECT_TRUE(raised.effects.empty()) << "the raise is the counters', written by the caller";
  auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  EXPECT_EQ(raises[0].space, "chat");
  EXPECT_EQ(raises[0].section, 3u);
  EXPECT_EQ(raises[0].section_size, 100);
  EXPECT_EQ(raises[0].max_seq, 500u);
  reader.Write(raises);
  counters.Settle(raises, true);
  // Lower: kept, nothing to write.
  auto kept = Execute(op::RaiseSection{"chat", 3, 100, 20}, reader, TestRules(), kNow, seq);
  ASSERT_TRUE(kept.result);
  EXPECT_EQ(*kept.result, 500u);
  EXPECT_TRUE(counters.TakeRaises().empty());
}

TEST(OperationsTest, NextSeqRefusesAnEmptyOrTooLongKeyList) {
  MapReader reader;
  reader.Apply(Execute(op::PutSpace{"chat", Space(100, 10)}, reader, TestRules(), kNow));
  SequenceCounters counters;
  SequenceState seq = StateOf(counters, reader);
  for (size_t n : {size_t{0}, kMaxSeqKeys + 1}) {
    auto o =
        Execute(op::NextSeq{"chat", std::vector<uint64_t>(n, 1)}, reader, TestRules(), kNow, seq);
    ASSERT_FALSE(o.result);
    EXPECT_EQ(o.result.error().code, Code::kInvalidArgument);
  }
  auto max = Execute(op::NextSeq{"chat", std::vector<uint64_t>(kMaxSeqKeys, 1)}, reader,
                     TestRules(), kNow, seq);
  ASSERT_TRUE(seq.needs_raise);
  WriteRaises(counters, reader);
  seq.needs_raise = false;
  max = Execute(op::NextSeq{"chat", std::vector<uint64_t>(kMaxSeqKeys, 1)}, reader, TestRules(),
                kNow, seq);
  ASSERT_TRUE(max.result) << max.result.error().message;
}

// In the cluster the owner of a section does not hold the space's record: the request carries the
// section_size and step the gateway read. Sections remember their section_size, so a sender with
// another one is refused instead of mapping keys to the wrong sections.
TEST(OperationsTest, NextSeqServesWithTheSendersSectionSizeAndRefusesAnotherOne) {
  MapReader reader;  // no space record: it lives in another partition
  SequenceCounters counters;
  SequenceState seq = StateOf(counters, reader);
  auto o = Execute(op::NextSeq{"chat", {7, 150}, op::SpaceShape{100, 10}}, reader, TestRules(),
                   kNow, seq);
  ASSERT_TRUE(seq.needs_raise);
  const auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 2u);
  EXPECT_EQ(raises[0].section_size, 100);
  EXPECT_EQ(raises[0].max_seq, 10u) << "raised by the sender's step";
  reader.Write(raises);
  counters.Settle(raises, true);
  seq.needs_raise = false;
  o = Execute(op::NextSeq{"chat", {7, 150}, op::SpaceShape{100, 10}}, reader, TestRules(), kNow,
              seq);
  ASSERT_TRUE(o.result) << o.result.error().message;
  EXPECT_EQ(*o.result, (std::vector<uint64_t>{1, 1}));

  SequenceCounters other_owner;
  SequenceState seq2 = StateOf(other_owner, reader);
  auto wrong =
      Execute(op::NextSeq{"chat", {7}, op::SpaceShape{50, 10}}, reader, TestRules(), kNow, seq2);
  ASSERT_FALSE(wrong.result);
  EXPECT_EQ(wrong.result.error().code, Code::kFailedPrecondition) << wrong.result.error().message;
  auto zero =
      Execute(op::NextSeq{"chat", {7}, op::SpaceShape{0, 10}}, reader, TestRules(), kNow, seq2);
  ASSERT_FALSE(zero.result);
  EXPECT_EQ(zero.result.error().code, Code::kInvalidArgument);
  auto right =
      Execute(op::NextSeq{"chat", {7}, op::SpaceShape{100, 10}}, reader, TestRules(), kNow, seq2);
  ASSERT_TRUE(seq2.needs_raise) << "its first value is above the committed maximum";
  WriteRaises(other_owner, reader);
  seq2.needs_raise = false;
  right =
      Execute(op::NextSeq{"chat", {7}, op::SpaceShape{100, 10}}, reader, TestRules(), kNow, seq2);
  ASSERT_TRUE(right.result) << right.result.error().message;
  EXPECT_EQ(right.result->front(), 11u) << "a new owner starts at the persisted maximum";
  auto current = Execute(op::CurrentSeq{"chat", 150, 100}, reader, TestRules(), kNow, seq2);
  ASSERT_TRUE(current.result) << current.result.error().message;
  EXPECT_EQ(*current.result, 10u) << "a section not counted here: its persisted maximum";
}

TEST(OperationsTest, ReadersWithoutSequencesRefuseTheSpaceOperations) {
  class TagsOnly final : public StateReader {
   public:
    Result<std::optional<state::TagRecord>> Get(const std::string&) override {
      return std::optional<state::TagRecord>();
    }
    Result<std::vector<state::TagRecord>> List() override { return {}; }
    Result<std::vector<state::WorkerRecord>> ListWorkers() override { return {}; }
  } reader;
  auto o = Execute(op::GetSpace{"chat"}, reader, TestRules(), kNow);
  ASSERT_FALSE(o.result);
  EXPECT_EQ(o.result.error().code, Code::kFailedPrecondition);
}

}  // namespace
}  // namespace kleaf::allocator
