#include "state/records.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace kleaf::state {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

SpaceRecord Space() {
  SpaceRecord r;
  r.space = "chat.inbox";
  r.section_size = 4096;
  r.step = 250;
  r.description = "inbox sequence, \"quoted\" and ünïcode\n";
  r.update_time_ms = 1'700'000'000'123;
  r.deleted = true;
  return r;
}

SectionRecord Section(uint64_t section, uint64_t max_seq) {
  SectionRecord r;
  r.space = "chat.inbox";
  r.section = section;
  r.section_size = 100000;
  r.max_seq = max_seq;
  return r;
}

TEST(SpaceRecordTest, EveryFieldSurvivesEncodeAndDecode) {
  const SpaceRecord in = Space();
  auto out = DecodeSpace(EncodeSpace(in));
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->space, in.space);
  EXPECT_EQ(out->section_size, in.section_size);
  EXPECT_EQ(out->step, in.step);
  EXPECT_EQ(out->description, in.description);
  EXPECT_EQ(out->update_time_ms, in.update_time_ms);
  EXPECT_EQ(out->deleted, in.deleted);
}

TEST(SpaceRecordTest, KeyIsSpcSlashTheName) { EXPECT_EQ(SpaceKey("chat.inbox"), "spc/chat.inbox"); }

TEST(SpaceRecordTest, CorruptInputIsAnInternalErrorNamingTheRecord) {
  for (const char* json : {"", "{", "[]", "{\"space\":\"a\",\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":0,\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":-5,\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":2.5,\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":\"100\",\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":18446744073709551615,\"step\":1}",
                           "{\"space\":\"a\",\"section_size\":100,\"step\":0}",
                           "{\"space\":7,\"section_size\":100,\"step\":1}"}) {
    auto r = DecodeSpace(json);
    ASSERT_FALSE(r) << json;
    EXPECT_EQ(r.error().code, Code::kInternal) << json;
    EXPECT_NE(r.error().message.find("corrupt space record"), std::string::npos) << json;
  }
}

TEST(SectionRecordTest, EveryFieldSurvivesEncodeAndDecode) {
  const SectionRecord in = Section(12, 1'230'000);
  auto out = DecodeSection(EncodeSection(in));
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->space, in.space);
  EXPECT_EQ(out->section, in.section);
  EXPECT_EQ(out->section_size, in.section_size);
  EXPECT_EQ(out->max_seq, in.max_seq);
}

TEST(SectionRecordTest, ValuesAbove2To63SurviveExactly) {
  for (uint64_t v : {uint64_t{1} << 63, (uint64_t{1} << 63) + 1, kMaxU64 - 1, kMaxU64}) {
    auto out = DecodeSection(EncodeSection(Section(v, v)));
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(out->section, v);
    EXPECT_EQ(out->max_seq, v);
  }
  // As text: no exponent, no sign, every digit.
  EXPECT_NE(EncodeSection(Section(0, kMaxU64)).find("\"max_seq\":18446744073709551615"),
            std::string::npos);
}

TEST(SectionRecordTest, KeyIsSecSlashSpaceSlashDecimalSection) {
  EXPECT_EQ(SectionKey("chat.inbox", 0), "sec/chat.inbox/0");
  EXPECT_EQ(SectionKey("chat.inbox", kMaxU64), "sec/chat.inbox/18446744073709551615");
}

// A negative or fractional max_seq would otherwise be converted silently (-1 to 2^64 - 1): a
// corrupt record must never become a maximum.
TEST(SectionRecordTest, NumbersThatAreNotExactUnsignedIntegersAreCorrupt) {
  const std::string head = R"({"space":"s","section_size":100,)";
  for (const char* tail : {R"("section":1,"max_seq":-1})", R"("section":1,"max_seq":1.5})",
                           R"("section":1,"max_seq":1e3})", R"("section":1,"max_seq":"7"})",
                           R"("section":1,"max_seq":18446744073709551616})",
                           R"("section":-1,"max_seq":7})", R"("section":1})", R"("max_seq":7})"}) {
    auto r = DecodeSection(head + tail);
    ASSERT_FALSE(r) << tail;
    EXPECT_EQ(r.error().code, Code::kInternal) << tail;
    EXPECT_NE(r.error().message.find("corrupt section record"), std::string::npos) << tail;
  }
  auto no_size = DecodeSection(R"({"space":"s","section":1,"max_seq":7})");
  EXPECT_FALSE(no_size);
  EXPECT_FALSE(DecodeSection("not json"));
}

}  // namespace
}  // namespace kleaf::state
