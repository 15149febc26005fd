#include "allocator/sequences.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kleaf::allocator {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
constexpr int64_t kNow = 1'700'000'000'000;

state::SpaceRecord Space(int64_t section_size = 100000, int64_t step = 10000,
                         std::string name = "chat") {
  state::SpaceRecord s;
  s.space = std::move(name);
  s.section_size = section_size;
  s.step = step;
  return s;
}

// The section records of one partition as the state topic keeps them: written only with a
// committed transaction, and never lowered.
struct FakeStore {
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> records;
  int loads = 0;

  SectionLoader LoaderFor(const std::string& space) {
    return [this, space](uint64_t section) -> Result<std::optional<state::SectionRecord>> {
      ++loads;
      auto it = records.find({space, section});
      if (it == records.end()) return std::nullopt;
      return it->second;
    };
  }
  void Write(const std::vector<state::SectionRecord>& raises) {
    for (const auto& r : raises) {
      auto& stored = records[{r.space, r.section}];
      EXPECT_GT(r.max_seq, stored.max_seq) << "a raise that does not raise";
      stored = r;
    }
  }
  uint64_t MaxOf(const std::string& space, uint64_t section) const {
    auto it = records.find({space, section});
    return it == records.end() ? 0 : it->second.max_seq;
  }
};

// The raises the counters want, made durable in `store` and settled as committed.
void WriteRaises(SequenceCounters& counters, FakeStore& store) {
  const auto raises = counters.TakeRaises();
  store.Write(raises);
  counters.Settle(raises, /*committed=*/true);
}

// One call of the owner, as both request paths make it: the values if every section's committed
// maximum holds them, else the raise first and the call again; then the raises ahead of need.
// Checks that no value is above the maximum the store held when it was computed.
std::vector<uint64_t> Serve(SequenceCounters& counters, FakeStore& store,
                            const state::SpaceRecord& space, const std::vector<uint64_t>& keys) {
  auto next = counters.Next(space, keys, store.LoaderFor(space.space));
  if (next && next->needs_raise) {
    EXPECT_TRUE(next->values.empty());
    WriteRaises(counters, store);
    next = counters.Next(space, keys, store.LoaderFor(space.space));
    if (next) {
      EXPECT_FALSE(next->needs_raise) << "a second raise needed";
    }
  }
  if (!next) {
    ADD_FAILURE() << next.error().message;
    return {};
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t section = SectionOf(keys[i], static_cast<uint64_t>(space.section_size));
    EXPECT_LE(next->values[i], store.MaxOf(space.space, section)) << "key " << keys[i];
  }
  WriteRaises(counters, store);
  return next->values;
}

uint64_t ServeOne(SequenceCounters& counters, FakeStore& store, const state::SpaceRecord& space,
                  uint64_t key) {
  auto values = Serve(counters, store, space, {key});
  return values.empty() ? 0 : values[0];
}

// ---------------------------------------------------------------------------------------------
// Sections and route keys

TEST(SectionTest, KeysGoToSectionsOfSectionSizeConsecutiveKeys) {
  EXPECT_EQ(SectionOf(0, 100000), 0u);
  EXPECT_EQ(OffsetInSection(0, 100000), 0u);
  EXPECT_EQ(SectionOf(99999, 100000), 0u);
  EXPECT_EQ(OffsetInSection(99999, 100000), 99999u);
  EXPECT_EQ(SectionOf(100000, 100000), 1u);
  EXPECT_EQ(OffsetInSection(100000, 100000), 0u);
}

TEST(SectionTest, TheLastKeyHasAPartialLastSection) {
  EXPECT_EQ(SectionOf(kMaxU64, 100000), kMaxU64 / 100000);
  EXPECT_EQ(OffsetInSection(kMaxU64, 100000), 51615u);  // 2^64 - 1 = 184467440737095 * 10^5 + 51615
  EXPECT_EQ(SectionOf(kMaxU64, 1), kMaxU64);
  EXPECT_EQ(OffsetInSection(kMaxU64, 1), 0u);
  const auto largest = static_cast<uint64_t>(kMaxSectionSize);
  EXPECT_EQ(SectionOf(kMaxU64, largest), uint64_t{1} << 32 | 1);
  EXPECT_EQ(OffsetInSection(kMaxU64, largest), 0u);
  EXPECT_EQ(OffsetInSection(kMaxU64 - 1, largest), largest - 1);  // below OffsetTable::kFree
}

TEST(SectionTest, ARouteKeyIsSpaceHashSectionAndNeverAValidTagOrSpace) {
  EXPECT_EQ(SectionRouteKey("chat", 0), "chat#0");
  EXPECT_EQ(SectionRouteKey("chat", kMaxU64), "chat#18446744073709551615");
  EXPECT_FALSE(ValidateSpaceName(SectionRouteKey("chat", 7)));
}

// ---------------------------------------------------------------------------------------------
// ApplySpaceUpdate

SpaceUpdate Update(std::optional<int64_t> section_size, std::optional<int64_t> step = std::nullopt,
                   std::optional<std::string> description = std::nullopt) {
  SpaceUpdate u;
  u.section_size = section_size;
  u.step = step;
  u.description = std::move(description);
  return u;
}

TEST(SpaceUpdateTest, ANewSpaceTakesTheDefaultsAndWhatTheUpdateSets) {
  auto d = ApplySpaceUpdate(std::nullopt, "chat", SpaceUpdate{}, SpaceRules{}, kNow);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->space, "chat");
  EXPECT_EQ(d->section_size, 100000);
  EXPECT_EQ(d->step, 10000);
  EXPECT_EQ(d->update_time_ms, kNow);
  EXPECT_FALSE(d->deleted);
  auto s = ApplySpaceUpdate(std::nullopt, "chat", Update(64, 5, "inbox"), SpaceRules{}, kNow);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->section_size, 64);
  EXPECT_EQ(s->step, 5);
  EXPECT_EQ(s->description, "inbox");
}

TEST(SpaceUpdateTest, NamesFollowTheTagRules) {
  for (const char* bad : {"", "a/b", "a#1", "a b"}) {
    auto r = ApplySpaceUpdate(std::nullopt, bad, SpaceUpdate{}, SpaceRules{}, kNow);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find("space"), std::string::npos);
  }
  EXPECT_FALSE(ApplySpaceUpdate(std::nullopt, std::string(129, 'a'), {}, SpaceRules{}, kNow));
}

TEST(SpaceUpdateTest, SectionSizeAndStepOutsideTheirRangesAreRefusedNamingTheField) {
  for (int64_t size : {int64_t{0}, int64_t{-1}, kMaxSectionSize + 1}) {
    auto r = ApplySpaceUpdate(std::nullopt, "chat", Update(size), SpaceRules{}, kNow);
    ASSERT_FALSE(r) << size;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find("section_size"), std::string::npos);
  }
  EXPECT_TRUE(ApplySpaceUpdate(std::nullopt, "chat", Update(kMaxSectionSize), {}, kNow));
  EXPECT_TRUE(ApplySpaceUpdate(std::nullopt, "chat", Update(1), {}, kNow));
  for (int64_t step : {int64_t{0}, kMaxSequenceStep + 1}) {
    auto r = ApplySpaceUpdate(std::nullopt, "chat", Update(std::nullopt, step), {}, kNow);
    ASSERT_FALSE(r) << step;
    EXPECT_NE(r.error().message.find("step"), std::string::npos);
  }
  EXPECT_TRUE(
      ApplySpaceUpdate(std::nullopt, "chat", Update(std::nullopt, kMaxSequenceStep), {}, kNow));
  EXPECT_FALSE(ApplySpaceUpdate(
      std::nullopt, "chat", Update(std::nullopt, std::nullopt, std::string(1025, 'x')), {}, kNow));
}

TEST(SpaceUpdateTest, SectionSizeNeverChangesNotEvenAcrossDelete) {
  state::SpaceRecord existing = Space(100000, 10000);
  for (bool deleted : {false, true}) {
    existing.deleted = deleted;
    auto r = ApplySpaceUpdate(existing, "chat", Update(50000), SpaceRules{}, kNow);
    ASSERT_FALSE(r) << deleted;
    EXPECT_EQ(r.error().code, Code::kFailedPrecondition);
    EXPECT_NE(r.error().message.find("section_size: cannot change from 100000 to 50000"),
              std::string::npos)
        << r.error().message;
    // Naming the size it has is no change.
    EXPECT_TRUE(ApplySpaceUpdate(existing, "chat", Update(100000, 7), SpaceRules{}, kNow));
  }
}

TEST(SpaceUpdateTest, ARecreatedDeletedSpaceKeepsItsSectionSizeAndNothingElse) {
  state::SpaceRecord existing = Space(4096, 77);
  existing.description = "old";
  existing.deleted = true;
  SpaceRules rules;
  rules.default_section_size = 100000;
  auto r = ApplySpaceUpdate(existing, "chat", SpaceUpdate{}, rules, kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->deleted);
  EXPECT_EQ(r->section_size, 4096);
  EXPECT_EQ(r->step, rules.default_step);
  EXPECT_EQ(r->description, "");
}

TEST(SpaceUpdateTest, AnUpdateKeepsTheFieldsItDoesNotName) {
  state::SpaceRecord existing = Space(4096, 77);
  existing.description = "kept";
  auto r = ApplySpaceUpdate(existing, "chat", Update(std::nullopt, 99), SpaceRules{}, kNow);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->section_size, 4096);
  EXPECT_EQ(r->step, 99);
  EXPECT_EQ(r->description, "kept");
}

// ---------------------------------------------------------------------------------------------
// SequenceCounters: values

TEST(SequenceTest, AFreshKeyStartsAtOneAndAKeyOfAPersistedSectionAboveItsMaximum) {
  SequenceCounters counters;
  FakeStore store;
  store.records[{"chat", 3}] = state::SectionRecord{"chat", 3, 100000, 5000};
  EXPECT_EQ(ServeOne(counters, store, Space(), 7), 1u);
  EXPECT_EQ(ServeOne(counters, store, Space(), 300'007), 5001u);
}

TEST(SequenceTest, EveryKeyStrictlyIncreasesOverManyCalls) {
  SequenceCounters counters;
  FakeStore store;
  const auto space = Space(100, 7);
  std::mt19937_64 rng(28);
  std::map<uint64_t, uint64_t> last;
  for (int call = 0; call < 5000; ++call) {
    std::vector<uint64_t> keys;
    for (int i = 0; i < 1 + call % 5; ++i) keys.push_back(rng() % 1000);
    auto values = Serve(counters, store, space, keys);
    ASSERT_EQ(values.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_GT(values[i], last[keys[i]]) << "key " << keys[i] << " call " << call;
      last[keys[i]] = values[i];
    }
  }
}

TEST(SequenceTest, AValuePastTheCommittedMaximumWaitsForARaiseToValuePlusStepMinusOne) {
  SequenceCounters counters(/*raise_ahead=*/0);  // at need only
  FakeStore store;
  auto first = counters.Next(Space(100000, 10), std::vector<uint64_t>{42}, store.LoaderFor("chat"));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->needs_raise);
  EXPECT_TRUE(first->values.empty()) << "nothing computed above the committed maximum";
  auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  const state::SectionRecord raise = raises[0];
  EXPECT_EQ(raise.space, "chat");
  EXPECT_EQ(raise.section, 0u);
  EXPECT_EQ(raise.section_size, 100000);
  EXPECT_EQ(raise.max_seq, 10u);  // value 1 + step 10 - 1
  store.Write(raises);
  counters.Settle(raises, true);
  // Values 1 to 10 of the key, and 1 to 10 of the other keys of the section, need no write.
  for (uint64_t want = 1; want <= 10; ++want) {
    auto next =
        counters.Next(Space(100000, 10), std::vector<uint64_t>{42, 43}, store.LoaderFor("chat"));
    ASSERT_TRUE(next);
    ASSERT_FALSE(next->needs_raise) << want;
    EXPECT_EQ(next->values[0], want);
    EXPECT_TRUE(counters.TakeRaises().empty());
  }
  EXPECT_EQ(ServeOne(counters, store, Space(100000, 10), 42), 11u);
  EXPECT_EQ(store.MaxOf("chat", 0), 20u);
}

// R6: with less than raise_ahead of a step left, the raise is asked for ahead of need, so that in
// steady state no call waits for one.
TEST(SequenceTest, RaisesComeAheadOfNeedOnceLessThanHalfAStepIsLeft) {
  SequenceCounters counters;  // kDefaultRaiseAhead: half a step
  FakeStore store;
  const auto space = Space(100, 10);
  int waited = 0;
  for (uint64_t want = 1; want <= 100; ++want) {
    auto next = counters.Next(space, std::vector<uint64_t>{5}, store.LoaderFor("chat"));
    ASSERT_TRUE(next);
    if (next->needs_raise) {
      ++waited;
      WriteRaises(counters, store);
      next = counters.Next(space, std::vector<uint64_t>{5}, store.LoaderFor("chat"));
      ASSERT_TRUE(next && !next->needs_raise);
    }
    EXPECT_EQ(next->values[0], want);
    const uint64_t max = store.MaxOf("chat", 0);
    auto raises = counters.TakeRaises();
    if (max - want < 5) {
      ASSERT_EQ(raises.size(), 1u) << "value " << want << ", maximum " << max;
      EXPECT_EQ(raises[0].max_seq, max + 10);
    } else {
      EXPECT_TRUE(raises.empty()) << "value " << want << ", maximum " << max;
    }
    store.Write(raises);
    counters.Settle(raises, true);
  }
  EXPECT_EQ(waited, 1) << "only the first value of the section waited";
  EXPECT_EQ(counters.RaisesAtNeed(), 1u);
  EXPECT_GE(counters.RaisesAhead(), 9u);
}

TEST(SequenceTest, AKeyListedTwiceInOneCallGetsDistinctIncreasingValues) {
  SequenceCounters counters;
  FakeStore store;
  auto values = Serve(counters, store, Space(), {5, 5, 7, 5, 100005, 5});
  EXPECT_EQ(values, (std::vector<uint64_t>{1, 2, 1, 3, 1, 4}));
  // Two calls continue from each other.
  auto loader = store.LoaderFor("chat");
  auto a = counters.Next(Space(), std::vector<uint64_t>{5, 7}, loader);
  auto b = counters.Next(Space(), std::vector<uint64_t>{7, 5}, loader);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->values, (std::vector<uint64_t>{5, 2}));
  EXPECT_EQ(b->values, (std::vector<uint64_t>{3, 6}));
}

// A call's keys first check a bound (the highest value they start from plus their count), and
// count exactly only when the bound passes the maximum: 100 distinct keys need one value each, one
// key listed ten times needs ten.
TEST(SequenceTest, AFanOutNeedsWhatItsKeysCountExactlyNotWhatItsBoundSays) {
  SequenceCounters counters(/*raise_ahead=*/0);
  FakeStore store;
  store.records[{"chat", 0}] = state::SectionRecord{"chat", 0, 1000, 10};
  std::vector<uint64_t> distinct(100);
  for (uint64_t i = 0; i < distinct.size(); ++i) distinct[i] = i;
  auto next = counters.Next(Space(1000, 10), distinct, store.LoaderFor("chat"));
  ASSERT_TRUE(next && next->needs_raise);
  auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  EXPECT_EQ(raises[0].max_seq, 20u) << "11 needed, + step 10 - 1 (the bound said 110)";
  store.Write(raises);
  counters.Settle(raises, true);
  next = counters.Next(Space(1000, 10), distinct, store.LoaderFor("chat"));
  ASSERT_TRUE(next);
  ASSERT_FALSE(next->needs_raise) << "every key at 11, below 20";
  EXPECT_EQ(next->values, std::vector<uint64_t>(100, 11));
  auto same = counters.Next(Space(1000, 10), std::vector<uint64_t>(10, 5), store.LoaderFor("chat"));
  ASSERT_TRUE(same);
  EXPECT_TRUE(same->needs_raise) << "key 5 ten times needs 21";
  raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  EXPECT_EQ(raises[0].max_seq, 30u);  // 21 + 10 - 1
}

TEST(SequenceTest, KeysZeroAndTheLargestCountInTheirOwnSections) {
  for (int64_t size : {int64_t{1}, int64_t{100000}, kMaxSectionSize}) {
    SequenceCounters counters(/*raise_ahead=*/0);
    FakeStore store;
    const auto space = Space(size, 3);
    for (uint64_t want = 1; want <= 5; ++want) {
      EXPECT_EQ(Serve(counters, store, space, {0, kMaxU64, kMaxU64 - 1}),
                (std::vector<uint64_t>{want, want, want}))
          << size;
    }
    // Values 1 and 4 passed the maximum: 1 + 3 - 1, then 4 + 3 - 1.
    EXPECT_EQ(store.MaxOf("chat", SectionOf(kMaxU64, static_cast<uint64_t>(size))), 6u) << size;
    EXPECT_EQ(store.MaxOf("chat", 0), 6u) << size;
  }
}

TEST(SequenceTest, AKeyAtTheLargestValueIsExhaustedAndTheFailedCallChangesNothing) {
  SequenceCounters counters;
  FakeStore store;
  store.records[{"chat", 0}] = state::SectionRecord{"chat", 0, 100000, kMaxU64 - 2};
  auto loader = store.LoaderFor("chat");
  auto three = counters.Next(Space(), std::vector<uint64_t>{9, 8, 9, 9}, loader);
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().code, Code::kResourceExhausted);
  EXPECT_NE(three.error().message.find("key 9"), std::string::npos) << three.error().message;
  EXPECT_TRUE(counters.TakeRaises().empty());
  auto two = counters.Next(Space(), std::vector<uint64_t>{9, 9}, loader);
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_TRUE(two->needs_raise);
  auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  EXPECT_EQ(raises[0].max_seq, kMaxU64);  // value + step - 1, saturated
  store.Write(raises);
  counters.Settle(raises, true);
  two = counters.Next(Space(), std::vector<uint64_t>{9, 9}, loader);
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->values, (std::vector<uint64_t>{kMaxU64 - 1, kMaxU64}));
  EXPECT_FALSE(counters.Next(Space(), std::vector<uint64_t>{9}, loader));
  auto eight = counters.Next(Space(), std::vector<uint64_t>{8}, loader);
  ASSERT_TRUE(eight);
  EXPECT_EQ(eight->values, (std::vector<uint64_t>{kMaxU64 - 1}));
}

// ---------------------------------------------------------------------------------------------
// Failover, durability and raises

TEST(SequenceTest, ANewOwnerStartsEveryKeyAboveEverythingTheOldOneHandedOut) {
  FakeStore store;
  const auto space = Space(1000, 50);
  std::mt19937_64 rng(5);
  std::map<uint64_t, uint64_t> handed_out;  // key -> highest value
  std::map<uint64_t, uint64_t> section_high;
  // At need only, so that a key can be driven to exactly its section's maximum below.
  auto old_owner = std::make_unique<SequenceCounters>(/*raise_ahead=*/0);
  for (int call = 0; call < 3000; ++call) {
    const uint64_t key = rng() % 5000;
    const uint64_t v = ServeOne(*old_owner, store, space, key);
    handed_out[key] = v;
    section_high[SectionOf(key, 1000)] = std::max(section_high[SectionOf(key, 1000)], v);
  }
  // The hardest case: a key of each section at exactly the section's maximum.
  for (auto& [section, high] : section_high) {
    const uint64_t key = section * 1000 + 999;
    while (old_owner->Current(space, key, store.LoaderFor("chat")).value_or(0) <
           store.MaxOf("chat", section)) {
      high = handed_out[key] = ServeOne(*old_owner, store, space, key);
    }
    ASSERT_EQ(high, store.MaxOf("chat", section));
  }
  old_owner.reset();  // crash: the counters are gone, the store stays
  SequenceCounters new_owner;
  for (const auto& [key, v] : handed_out) {
    auto current = new_owner.Current(space, key, store.LoaderFor("chat"));
    ASSERT_TRUE(current);
    EXPECT_GE(*current, section_high[SectionOf(key, 1000)]) << "key " << key;
    const uint64_t next = ServeOne(new_owner, store, space, key);
    EXPECT_GT(next, section_high[SectionOf(key, 1000)]) << "key " << key;
    EXPECT_GT(next, v) << "key " << key;
  }
}

// R1 (iv): no value is ever computed above the committed maximum, whichever raises commit, abort
// or are still in flight.
TEST(SequenceTest, NoValueAboveTheCommittedMaximumWhateverTheRaisesBecome) {
  SequenceCounters counters;
  FakeStore store;
  const auto space = Space(10, 4);
  std::mt19937_64 rng(11);
  std::vector<state::SectionRecord> in_flight;
  for (int call = 0; call < 4000; ++call) {
    const std::vector<uint64_t> keys{rng() % 40, rng() % 40};
    auto next = counters.Next(space, keys, store.LoaderFor("chat"));
    ASSERT_TRUE(next) << next.error().message;
    for (size_t i = 0; i < next->values.size(); ++i) {
      ASSERT_LE(next->values[i], store.MaxOf("chat", SectionOf(keys[i], 10))) << "call " << call;
    }
    // A transaction ends now and then: its raises commit or abort; the next one takes new ones.
    if (call % 2 == 0) {
      const bool committed = rng() % 3 != 0;
      if (committed) store.Write(in_flight);
      counters.Settle(in_flight, committed);
      in_flight = counters.TakeRaises();
    }
  }
  EXPECT_GT(store.records.size(), 0u);
}

// `kleaf state import`'s raise: `section` to `max_seq`, made durable and settled; the maximum it
// answered.
uint64_t RaiseOne(SequenceCounters& counters, FakeStore& store, const state::SpaceRecord& space,
                  uint64_t section, uint64_t max_seq) {
  auto after = counters.Raise(space, section, max_seq, store.LoaderFor(space.space));
  if (!after) {
    ADD_FAILURE() << after.error().message;
    return 0;
  }
  WriteRaises(counters, store);
  return *after;
}

TEST(SequenceTest, ARaisedSectionContinuesAboveTheRaisedMaximumForCountedAndNewKeys) {
  SequenceCounters counters(/*raise_ahead=*/0);
  FakeStore store;
  const auto space = Space(100, 10);
  for (int i = 0; i < 25; ++i) ServeOne(counters, store, space, 7);  // key 7 at 25, max 30
  ASSERT_EQ(store.MaxOf("chat", 0), 30u);
  EXPECT_EQ(RaiseOne(counters, store, space, 0, 5000), 5000u);
  EXPECT_EQ(store.MaxOf("chat", 0), 5000u) << "the raise is a section record of the transaction";
  EXPECT_EQ(ServeOne(counters, store, space, 7), 5001u) << "a counted key restarts above it";
  EXPECT_EQ(ServeOne(counters, store, space, 8), 5001u) << "so does a key never seen";
  EXPECT_EQ(ServeOne(counters, store, space, 7), 5002u);
  // A section never loaded before: raised from its committed maximum (none: 0).
  EXPECT_EQ(RaiseOne(counters, store, space, 3, 900), 900u);
  EXPECT_EQ(ServeOne(counters, store, space, 350), 901u);
}

TEST(SequenceTest, ARaiseNeverLowersAMaximumNorMovesItsKeys) {
  SequenceCounters counters(/*raise_ahead=*/0);
  FakeStore store;
  const auto space = Space(100, 10);
  for (int i = 0; i < 25; ++i) ServeOne(counters, store, space, 7);
  for (uint64_t lower : {uint64_t{0}, uint64_t{20}, uint64_t{30}}) {
    auto after = counters.Raise(space, 0, lower, store.LoaderFor("chat"));
    ASSERT_TRUE(after) << after.error().message;
    EXPECT_EQ(*after, 30u) << "raised to " << lower;
  }
  EXPECT_TRUE(counters.TakeRaises().empty()) << "nothing to write";
  EXPECT_EQ(ServeOne(counters, store, space, 7), 26u) << "the key goes on where it was";
  EXPECT_EQ(store.MaxOf("chat", 0), 30u);
}

// R6: a raise_section reaches the counters only once its record committed; values computed before
// stay below the old committed maximum, and every key continues above the raised one after.
TEST(SequenceTest, AnImportRebasesTheSectionOnlyOnceItsRaiseCommitted) {
  SequenceCounters counters;
  FakeStore store;
  const auto space = Space(100, 10);
  EXPECT_EQ(Serve(counters, store, space, {1, 1}), (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(counters.Raise(space, 0, 700, store.LoaderFor("chat")));
  auto before = counters.Next(space, std::vector<uint64_t>{1, 2}, store.LoaderFor("chat"));
  ASSERT_TRUE(before && !before->needs_raise);
  EXPECT_EQ(before->values, (std::vector<uint64_t>{3, 1})) << "not raised before it committed";
  WriteRaises(counters, store);
  EXPECT_EQ(store.MaxOf("chat", 0), 700u);
  EXPECT_EQ(Serve(counters, store, space, {1, 2}), (std::vector<uint64_t>{701, 701}));
}

TEST(SequenceTest, AnAbortedRaiseLeavesTheCountersAndARaiseWithAnotherSectionSizeIsRefused) {
  SequenceCounters counters;
  FakeStore store;
  const auto space = Space(100, 10);
  ASSERT_EQ(ServeOne(counters, store, space, 1), 1u);
  ASSERT_TRUE(counters.Raise(space, 0, 700, store.LoaderFor("chat")));
  counters.Settle(counters.TakeRaises(), /*committed=*/false);  // the transaction aborted
  EXPECT_EQ(ServeOne(counters, store, space, 1), 2u);
  EXPECT_LT(store.MaxOf("chat", 0), 700u);
  auto other = counters.Raise(Space(1000, 10), 0, 700, store.LoaderFor("chat"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, Code::kFailedPrecondition);
  EXPECT_NE(other.error().message.find("'chat'"), std::string::npos) << other.error().message;
  // A section only written (not counted) with another section_size is refused as well.
  SequenceCounters fresh;
  auto written = fresh.Raise(Space(1000, 10), 0, 700, store.LoaderFor("chat"));
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().code, Code::kFailedPrecondition);
}

// R1: the counters keep every value computed, whether or not its answer is seen (a batch that
// aborted, a connection that broke): the next value is above it, and a lost answer is a gap.
TEST(SequenceTest, EveryValueComputedStaysInTheCountersSeenOrNot) {
  SequenceCounters counters;
  FakeStore store;
  ASSERT_EQ(ServeOne(counters, store, Space(), 1), 1u);
  auto lost = counters.Next(Space(), std::vector<uint64_t>{1, 1}, store.LoaderFor("chat"));
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->values, (std::vector<uint64_t>{2, 3}));  // never answered
  auto current = counters.Current(Space(), 1, store.LoaderFor("chat"));
  ASSERT_TRUE(current);
  EXPECT_EQ(*current, 3u);
  EXPECT_EQ(ServeOne(counters, store, Space(), 1), 4u);
}

TEST(SequenceTest, ARaiseInFlightIsNotAskedForTwiceAndAnAbortedOneIsAskedForAgain) {
  SequenceCounters counters;
  FakeStore store;
  auto next = counters.Next(Space(), std::vector<uint64_t>{1}, store.LoaderFor("chat"));
  ASSERT_TRUE(next && next->needs_raise);
  auto raises = counters.TakeRaises();
  ASSERT_EQ(raises.size(), 1u);
  next = counters.Next(Space(), std::vector<uint64_t>{1}, store.LoaderFor("chat"));
  ASSERT_TRUE(next && next->needs_raise) << "in flight is not committed";
  EXPECT_TRUE(counters.TakeRaises().empty()) << "one raise per section in flight";
  counters.Settle(raises, /*committed=*/false);
  next = counters.Next(Space(), std::vector<uint64_t>{1}, store.LoaderFor("chat"));
  ASSERT_TRUE(next && next->needs_raise);
  auto again = counters.TakeRaises();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].max_seq, raises[0].max_seq);
  store.Write(again);
  counters.Settle(again, true);
  EXPECT_EQ(ServeOne(counters, store, Space(), 1), 1u);
}

TEST(SequenceTest, ARaiseSettledAfterAClearIsSkippedAndTheSectionReloadsAboveItsValues) {
  SequenceCounters counters;
  FakeStore store;
  EXPECT_EQ(Serve(counters, store, Space(100, 5), {1, 1, 1}), (std::vector<uint64_t>{1, 2, 3}));
  auto more = counters.Next(Space(100, 5), std::vector<uint64_t>{1, 1}, store.LoaderFor("chat"));
  ASSERT_TRUE(more && !more->needs_raise);
  EXPECT_EQ(more->values, (std::vector<uint64_t>{4, 5}));
  auto raises = counters.TakeRaises();  // ahead of need: 2 of the maximum 7 left
  ASSERT_EQ(raises.size(), 1u);
  store.Write(raises);  // committed
  counters.Clear();     // e.g. the partition was revoked and assigned again meanwhile
  counters.Settle(raises, true);
  EXPECT_EQ(counters.Sections(), 0u);
  EXPECT_GT(ServeOne(counters, store, Space(100, 5), 1), 5u);
}

TEST(SequenceTest, AForgottenSpaceContinuesAboveItsPersistedMaxima) {
  SequenceCounters counters(/*raise_ahead=*/0);
  FakeStore store;
  for (int i = 0; i < 3; ++i) ServeOne(counters, store, Space(100, 5), 2);
  counters.Forget("chat");
  EXPECT_EQ(counters.Sections(), 0u);
  EXPECT_EQ(ServeOne(counters, store, Space(100, 5), 2), 6u);  // the persisted max was 5
}

TEST(SequenceTest, ASectionSizeOtherThanTheOneCountedOrWrittenIsRefused) {
  SequenceCounters counters;
  FakeStore store;
  ServeOne(counters, store, Space(100), 1);
  auto counted = counters.Next(Space(200), std::vector<uint64_t>{1}, store.LoaderFor("chat"));
  ASSERT_FALSE(counted);
  EXPECT_EQ(counted.error().code, Code::kFailedPrecondition);
  EXPECT_NE(counted.error().message.find("section_size 200"), std::string::npos);
  // A new owner knows the size only from the records.
  SequenceCounters new_owner;
  auto written = new_owner.Next(Space(200), std::vector<uint64_t>{1}, store.LoaderFor("chat"));
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("written with 100"), std::string::npos)
      << written.error().message;
  EXPECT_FALSE(new_owner.Current(Space(200), 1, store.LoaderFor("chat")));
}

TEST(SequenceTest, ALoaderErrorFailsTheCallAndNothingIsHandedOut) {
  SequenceCounters counters;
  SectionLoader broken = [](uint64_t) -> Result<std::optional<state::SectionRecord>> {
    return Fail(Code::kInternal, "disk on fire");
  };
  auto v = counters.Next(Space(), std::vector<uint64_t>{1}, broken);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().message, "disk on fire");
  EXPECT_TRUE(counters.TakeRaises().empty());
}

TEST(SequenceTest, CurrentIsTheLastValueHandedOutOrTheSectionMaximum) {
  SequenceCounters counters;
  FakeStore store;
  store.records[{"chat", 0}] = state::SectionRecord{"chat", 0, 100000, 70};
  auto loader = store.LoaderFor("chat");
  EXPECT_EQ(counters.Current(Space(), 3, loader).value_or(0), 70u);  // not counted: the maximum
  ServeOne(counters, store, Space(), 3);
  ServeOne(counters, store, Space(), 3);
  EXPECT_EQ(counters.Current(Space(), 3, loader).value_or(0), 72u);
  EXPECT_EQ(counters.Current(Space(), 4, loader).value_or(0), 70u);  // counted, untouched: base
}

// ---------------------------------------------------------------------------------------------
// Rebase

// A raise that takes the maximum more than max_delta past the base rebases the section: every key
// restarts at the maximum before that raise, at or above every value computed, so the raise is left
// to count up in and the value that asked for it needs no second raise (Serve checks that).
TEST(SequenceTest, ASectionWhoseMaximumOutrunsTheDeltasIsRebasedAndStillOnlyGoesUp) {
  for (double ahead : {0.0, kDefaultRaiseAhead}) {
    SCOPED_TRACE(ahead);
    SequenceCounters counters(ahead, /*max_delta=*/100);
    FakeStore store;
    const auto space = Space(1000, 10);
    ASSERT_EQ(ServeOne(counters, store, space, 1), 1u);
    uint64_t last = 0;
    uint64_t base = 0;  // where an untouched key of the section stands: the base
    int rebases = 0;
    for (int i = 0; i < 500; ++i) {
      const uint64_t v = ServeOne(counters, store, space, 7);
      ASSERT_GT(v, last);
      last = v;
      auto untouched = counters.Current(space, 999, store.LoaderFor("chat"));
      ASSERT_TRUE(untouched);
      if (*untouched > base) {
        ++rebases;
        base = *untouched;
      }
    }
    EXPECT_GE(rebases, 3) << "the section never rebased";
    EXPECT_GT(ServeOne(counters, store, space, 1), base);
    EXPECT_GT(ServeOne(counters, store, space, 7), last);
  }
}

// Near 2^64 - 1 the bound a call checks first must not wrap: two keys one below the committed
// maximum need one value each above it, and wait for the raise.
TEST(SequenceTest, KeysNearTheLargestValueStillWaitForTheRaiseTheyNeed) {
  SequenceCounters counters(/*raise_ahead=*/0);
  FakeStore store;
  store.records[{"chat", 0}] = state::SectionRecord{"chat", 0, 100000, kMaxU64 - 1};
  auto next = counters.Next(Space(), std::vector<uint64_t>{9, 8}, store.LoaderFor("chat"));
  ASSERT_TRUE(next) << next.error().message;
  ASSERT_TRUE(next->needs_raise) << "values above the committed maximum " << kMaxU64 - 1;
  WriteRaises(counters, store);
  EXPECT_EQ(store.MaxOf("chat", 0), kMaxU64);
  next = counters.Next(Space(), std::vector<uint64_t>{9, 8}, store.LoaderFor("chat"));
  ASSERT_TRUE(next && !next->needs_raise);
  EXPECT_EQ(next->values, (std::vector<uint64_t>{kMaxU64, kMaxU64}));
}

// ---------------------------------------------------------------------------------------------
// Memory: at most 16 bytes per active key

// The 10 M-key tests measure the layout and take seconds; under a sanitizer they would take minutes
// and measure nothing new (the small tests run the same code there).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KLEAF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KLEAF_SANITIZED 1
#endif
#endif

// Bytes the process's heap holds (small blocks and mmapped ones).
size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Serves every key once in calls of 100,000 keys and checks the figures: MemoryBytes() per
// key, and what the heap really grew by per key (the fake store's records included).
void ExpectAtMost16BytesPerKey(const std::vector<uint64_t>& keys) {
  const size_t heap_before = HeapInUse();
  SequenceCounters counters;
  FakeStore store;
  const auto space = Space();
  constexpr size_t kBatch = 100000;
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    const size_t n = std::min(kBatch, keys.size() - i);
    const auto part = std::span(keys).subspan(i, n);
    auto next = counters.Next(space, part, store.LoaderFor("chat"));
    ASSERT_TRUE(next);
    if (next->needs_raise) {
      WriteRaises(counters, store);
      next = counters.Next(space, part, store.LoaderFor("chat"));
      ASSERT_TRUE(next && !next->needs_raise);
    }
    WriteRaises(counters, store);
  }
  const auto active = static_cast<double>(counters.TrackedKeys());
  const double counted = static_cast<double>(counters.MemoryBytes()) / active;
  const double heap = static_cast<double>(HeapInUse() - heap_before) / active;
  std::printf(
      "%zu keys in %zu sections: MemoryBytes %zu, %.2f bytes per key; heap grew %.2f bytes "
      "per key\n",
      counters.TrackedKeys(), counters.Sections(), counters.MemoryBytes(), counted, heap);
  EXPECT_LE(counted, 16.0);
  EXPECT_LE(heap, 16.0);
  EXPECT_NEAR(counted, heap, 0.1 * heap) << "MemoryBytes() does not count what the heap holds";
}

TEST(SequenceMemoryTest, TenMillionRandomKeysOverABillionTakeAtMost16BytesEach) {
#ifdef KLEAF_SANITIZED
  GTEST_SKIP() << "a layout measurement: not under a sanitizer";
#endif
  std::mt19937_64 rng(2026);
  std::vector<uint64_t> keys(10'000'000);
  for (auto& k : keys) k = rng() % 1'000'000'000;
  ExpectAtMost16BytesPerKey(keys);
}

TEST(SequenceMemoryTest, TenMillionDenseKeysTakeAtMost16BytesEach) {
#ifdef KLEAF_SANITIZED
  GTEST_SKIP() << "a layout measurement: not under a sanitizer";
#endif
  std::vector<uint64_t> keys(10'000'000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  ExpectAtMost16BytesPerKey(keys);
}

}  // namespace
}  // namespace kleaf::allocator
