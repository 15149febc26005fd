// UUIDv7 and ULID built on snowflake draws: the text formats, RFC 9562's version and variant, the
// counter/worker/random fields, order over many draws (the counter running out within a
// millisecond included), the clock guard, and the compose bound.
#include "snowflake/id128.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"

namespace kleaf::snowflake {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;  // 2023-11-14T22:13:20Z
constexpr Id128Kind kKinds[] = {Id128Kind::kUuid7, Id128Kind::kUlid};

Id128Layout Layout(Id128Kind kind) { return Id128Layout(kind, SnowflakeLayout::Default()); }

SnowflakeGenerator::Options Worker(int64_t worker_id, bool random_start = true) {
  SnowflakeGenerator::Options o;
  o.worker_id = worker_id;
  o.random_sequence_start = random_start;
  return o;
}

std::vector<Id128> Draw(SnowflakeGenerator& generator, const Id128Layout& layout, int64_t count) {
  std::vector<Id128> ids;
  auto r = NextId128Batch(generator, layout, count, ids);
  EXPECT_TRUE(r) << r.error().message;
  return ids;
}

// Crockford base32 of 128 bits written the slow way, for comparison: the bits as a string of
// '0'/'1', two zero bits in front to make 130, five at a time.
std::string SlowUlidText(Id128 id) {
  const std::string bits =
      "00" + std::bitset<64>(id.high).to_string() + std::bitset<64>(id.low).to_string();
  std::string text;
  for (size_t i = 0; i < bits.size(); i += 5) {
    text += "0123456789ABCDEFGHJKMNPQRSTVWXYZ"[std::stoi(bits.substr(i, 5), nullptr, 2)];
  }
  return text;
}

TEST(Id128LayoutTest, FieldWidthsFollowTheSnowflakeLayout) {
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  EXPECT_EQ(uuid.counter_bits(), 12);  // exactly rand_a
  EXPECT_EQ(uuid.worker_bits(), 10);
  EXPECT_EQ(uuid.random_bits(), 52);
  const Id128Layout ulid = Layout(Id128Kind::kUlid);
  EXPECT_EQ(ulid.counter_bits(), 12);
  EXPECT_EQ(ulid.worker_bits(), 10);
  EXPECT_EQ(ulid.random_bits(), 58);
  auto other = SnowflakeLayout::Make(39, 13, 11, 1262304000000, 10, kNow);
  ASSERT_TRUE(other);
  EXPECT_EQ(Id128Layout(Id128Kind::kUuid7, *other).counter_bits(), 11);
  EXPECT_EQ(Id128Layout(Id128Kind::kUuid7, *other).worker_bits(), 13);
  EXPECT_EQ(Id128Layout(Id128Kind::kUuid7, *other).random_bits(), 50);
}

TEST(Id128LayoutTest, UuidTextIsCanonicalLowercaseHex) {
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  EXPECT_EQ(uuid.Format({0x0123456789abcdefULL, 0xfedcba9876543210ULL}),
            "01234567-89ab-cdef-fedc-ba9876543210");
  EXPECT_EQ(uuid.Format({}), "00000000-0000-0000-0000-000000000000");
}

TEST(Id128LayoutTest, UlidTextIsCrockfordBase32) {
  const Id128Layout ulid = Layout(Id128Kind::kUlid);
  EXPECT_EQ(ulid.Format({}), "00000000000000000000000000");
  EXPECT_EQ(ulid.Format({~0ULL, ~0ULL}), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
  std::mt19937_64 rng(2);
  for (int i = 0; i < 1000; ++i) {
    const Id128 id{rng(), rng()};
    ASSERT_EQ(ulid.Format(id), SlowUlidText(id));
    auto back = ulid.Parse(ulid.Format(id));
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_EQ(*back, id);
  }
}

TEST(Id128LayoutTest, ParseRefusesWhatIsNotOneOfItsIds) {
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  for (const std::string bad :
       {"", "01234567-89ab-cdef-fedc-ba9876543210",  // version c, not 7
        "01234567-89ab-7def-7edc-ba9876543210",      // variant 0
        "0123456789ab7def8edcba9876543210", "01234567-89ab-7def-8edc-ba987654321g",
        "01234567-89ab-7def-8edc-ba98765432100"}) {
    EXPECT_FALSE(uuid.Parse(bad)) << bad;
  }
  EXPECT_TRUE(uuid.Parse("01234567-89AB-7DEF-8EDC-BA9876543210"));
  const Id128Layout ulid = Layout(Id128Kind::kUlid);
  for (const std::string bad : {"", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "0000000000000000000000000U",
                                "000000000000000000000000000", "0000000000000000000000000"}) {
    EXPECT_FALSE(ulid.Parse(bad)) << bad;
  }
  // Crockford's reading aids: lowercase, I and L as 1, O as 0.
  auto lenient = ulid.Parse("00000000000000000000000oil");
  ASSERT_TRUE(lenient);
  EXPECT_EQ(*lenient, (Id128{0, (1 << 5) | 1}));
}

TEST(Id128Test, UuidsCarryVersion7AndTheRfc9562Variant) {
  ManualClock clock(kNow);
  SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(619), clock);
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  for (const Id128& id : Draw(generator, uuid, 5000)) {
    const std::string text = uuid.Format(id);
    ASSERT_EQ(text.size(), 36u);
    ASSERT_EQ(text[14], '7') << text;
    ASSERT_NE(std::string("89ab").find(text[19]), std::string::npos) << text;
    ASSERT_EQ(text, [&] {
      std::string lower = text;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      return lower;
    }());
    auto back = uuid.Parse(text);
    ASSERT_TRUE(back);
    ASSERT_EQ(*back, id);
  }
}

TEST(Id128Test, FieldsHoldTheTimeTheSequenceAndTheWorkerId) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(619, false), clock);
    const Id128Layout layout = Layout(kind);
    std::vector<Id128> ids = Draw(generator, layout, 3);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto parts = layout.Split(ids[i]);
      EXPECT_EQ(parts.timestamp_ms, kNow);
      EXPECT_EQ(parts.counter, static_cast<int64_t>(i));
      EXPECT_EQ(parts.worker_id, 619);
      EXPECT_EQ(static_cast<int64_t>(ids[i].high >> 16), kNow) << "the top 48 bits are the ms";
    }
    if (kind == Id128Kind::kUuid7) {
      // rand_a (bits 64..75) is the counter; the worker id is the top of rand_b.
      EXPECT_EQ(ids[2].high & 0xFFF, 2u);
      EXPECT_EQ((ids[2].low >> 52) & 0x3FF, 619u);
    } else {
      // The counter is the 12 bits after the timestamp, then the worker id, then 58 random bits.
      EXPECT_EQ((ids[2].high >> 4) & 0xFFF, 2u);
      EXPECT_EQ((ids[2].high & 0xF) << 6 | ids[2].low >> 58, 619u);
    }
  }
}

TEST(Id128Test, RandomBitsVaryFromIdToId) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(1), clock);
    std::set<uint64_t> random_fields;
    for (const Id128& id : Draw(generator, Layout(kind), 1000)) {
      random_fields.insert(id.low & ((uint64_t{1} << 48) - 1));
    }
    EXPECT_GT(random_fields.size(), 990u);
  }
}

// 20,000 draws at a clock that stands still: the 4,096 counter values of a millisecond run out
// several times; each time the next ID moves to the next millisecond instead of wrapping.
TEST(Id128Test, IdsAndTheirTextStrictlyIncreaseWhenTheCounterRunsOut) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(5), clock);
    const Id128Layout layout = Layout(kind);
    std::vector<Id128> ids;
    for (int i = 0; i < 100; ++i) {  // separate calls, as separate requests would be
      auto more = Draw(generator, layout, 200);
      ids.insert(ids.end(), more.begin(), more.end());
    }
    std::string last_text;
    int64_t millisecond_changes = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      ASSERT_LT(ids[i - 1], ids[i]) << i;
      const std::string text = layout.Format(ids[i]);
      ASSERT_LT(layout.Format(ids[i - 1]), text) << "text must sort as the IDs do";
      const auto before = layout.Split(ids[i - 1]);
      const auto now = layout.Split(ids[i]);
      if (now.timestamp_ms != before.timestamp_ms) {
        ++millisecond_changes;
        ASSERT_EQ(now.timestamp_ms, before.timestamp_ms + 1);
      } else {
        ASSERT_EQ(now.counter, before.counter + 1);
      }
    }
    EXPECT_GE(millisecond_changes, 4);
    EXPECT_EQ(layout.Split(ids.back()).worker_id, 5);
  }
}

TEST(Id128Test, TwoWorkersAtTheSameClockNeverIssueTheSameId) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock_a(kNow);
    ManualClock clock_b(kNow);
    // Same clock, same counter start: only the worker id tells them apart.
    SnowflakeGenerator a(SnowflakeLayout::Default(), Worker(1, false), clock_a);
    SnowflakeGenerator b(SnowflakeLayout::Default(), Worker(2, false), clock_b);
    const Id128Layout layout = Layout(kind);
    std::set<std::pair<int64_t, int64_t>> fields_a;
    for (const Id128& id : Draw(a, layout, 10000)) {
      fields_a.emplace(layout.Split(id).timestamp_ms, layout.Split(id).counter);
    }
    int64_t same_time_and_counter = 0;
    for (const Id128& id : Draw(b, layout, 10000)) {
      const auto parts = layout.Split(id);
      same_time_and_counter += fields_a.count({parts.timestamp_ms, parts.counter});
      EXPECT_EQ(parts.worker_id, 2);
    }
    EXPECT_EQ(same_time_and_counter, 10000) << "the workers drew the same (ms, counter) pairs";
  }
}

TEST(Id128Test, ClockMovedBackNeverGivesASmallerId) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(3), clock);
    const Id128Layout layout = Layout(kind);
    const Id128 first = Draw(generator, layout, 10).back();
    clock.SetWallMs(kNow - 3);  // within max_backward_ms: waited out
    const Id128 second = Draw(generator, layout, 1).front();
    EXPECT_LT(first, second);
    clock.SetWallMs(kNow - 1000);  // beyond it: refused
    std::vector<Id128> none;
    auto refused = NextId128Batch(generator, layout, 5, none);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kUnavailable);
    EXPECT_TRUE(none.empty());
    clock.SetWallMs(kNow + 1);
    EXPECT_LT(second, Draw(generator, layout, 1).front());
  }
}

// What the durable timestamp mark does after a restart (TimestampGuard sets the floor): no ID at
// or below it, whatever the clock says.
TEST(Id128Test, TheSnowflakeFloorHoldsForThemToo) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(3), clock);
    generator.SetFloorMs(kNow + 2);
    const Id128Layout layout = Layout(kind);
    EXPECT_GT(layout.Split(Draw(generator, layout, 1).front()).timestamp_ms, kNow + 2);
  }
}

TEST(Id128Test, SnowflakesAndTheseShareOneCounterPerNode) {
  ManualClock clock(kNow);
  SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(3, false), clock);
  ASSERT_TRUE(generator.Next());
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  const Id128Layout ulid = Layout(Id128Kind::kUlid);
  EXPECT_EQ(uuid.Split(Draw(generator, uuid, 1).front()).counter, 1);
  EXPECT_EQ(ulid.Split(Draw(generator, ulid, 1).front()).counter, 2);
  EXPECT_EQ(generator.Next().value() & 0xFFF, 3);
}

TEST(Id128Test, FirstAtBoundsEveryIdOfItsMillisecond) {
  for (Id128Kind kind : kKinds) {
    ManualClock clock(kNow);
    SnowflakeGenerator generator(SnowflakeLayout::Default(), Worker(1023), clock);
    const Id128Layout layout = Layout(kind);
    for (const Id128& id : Draw(generator, layout, 10000)) {
      const int64_t ms = layout.Split(id).timestamp_ms;
      ASSERT_LE(layout.FirstAt(ms).value(), id);
      ASSERT_GT(layout.FirstAt(ms + 1).value(), id);
      ASSERT_LT(layout.Format(layout.FirstAt(ms).value()), layout.Format(id));
    }
    const auto parts = layout.Split(layout.FirstAt(1795514400000).value());
    EXPECT_EQ(parts.timestamp_ms, 1795514400000);
    EXPECT_EQ(parts.counter, 0);
    EXPECT_EQ(parts.worker_id, 0);
  }
  // The smallest UUIDv7 of the ms is still a UUIDv7.
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  EXPECT_EQ(uuid.Format(uuid.FirstAt(0x0123456789ab).value()),
            "01234567-89ab-7000-8000-000000000000");
  const Id128Layout ulid = Layout(Id128Kind::kUlid);
  EXPECT_EQ(ulid.Format(ulid.FirstAt(0x0123456789ab).value()), "014D2PF2DB0000000000000000");
}

TEST(Id128Test, FirstAtRefusesTimesOutside48BitsNamingTheRange) {
  for (Id128Kind kind : kKinds) {
    const Id128Layout layout = Layout(kind);
    EXPECT_TRUE(layout.FirstAt(0));
    EXPECT_TRUE(layout.FirstAt(Id128Layout::kMaxTimestampMs));
    for (int64_t ms : {int64_t{-1}, Id128Layout::kMaxTimestampMs + 1}) {
      auto id = layout.FirstAt(ms);
      ASSERT_FALSE(id);
      EXPECT_EQ(id.error().code, Code::kInvalidArgument);
      EXPECT_NE(id.error().message.find(std::to_string(Id128Layout::kMaxTimestampMs)),
                std::string::npos)
          << id.error().message;
    }
  }
}

TEST(Id128Test, ComposeToJsonAnswersTheText) {
  const Id128Layout uuid = Layout(Id128Kind::kUuid7);
  auto json = ComposeToJson(uuid, "2026-11-24T10:00:00.123+08:00");
  ASSERT_TRUE(json);
  EXPECT_EQ(*json, "{\"id\":\"" + uuid.Format(uuid.FirstAt(1795485600123).value()) + "\"}");
  EXPECT_FALSE(ComposeToJson(uuid, "soon"));
}

}  // namespace
}  // namespace kleaf::snowflake
