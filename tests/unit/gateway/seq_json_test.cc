// The sequence routes' JSON (gateway/seq_json.h): the hand-written reader of a fan-out's keys
// answers exactly as the general JSON reader does, on every body, and the written answer is the
// JSON the routes promise.
#include "gateway/seq_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "allocator/sequences.h"

namespace kleaf::gateway {
namespace {

using nlohmann::json;

// The same keys, or the same error.
void ExpectSameAnswer(const std::string& body) {
  auto fast = ParseSeqKeys(body);
  auto general = detail::ParseAnySeqKeys(body);
  ASSERT_EQ(fast.has_value(), general.has_value()) << body;
  if (fast) {
    EXPECT_EQ(*fast, *general) << body;
  } else {
    EXPECT_EQ(fast.error().code, general.error().code) << body;
    EXPECT_EQ(fast.error().message, general.error().message) << body;
  }
}

TEST(SeqJsonTest, PlainBodiesAreReadByHandWithTheGeneralReadersKeys) {
  for (const std::string body : {
           R"({"keys":["1"]})",
           R"({"keys":["0","18446744073709551615",7,0]})",
           " \t\r\n{ \"keys\" :\n[ \"12\" , 13 ,\"12\" ] } \n",
       }) {
    auto plain = detail::ParsePlainSeqKeys(body);
    ASSERT_TRUE(plain.has_value()) << body;
    auto general = detail::ParseAnySeqKeys(body);
    ASSERT_TRUE(general.has_value()) << body;
    EXPECT_EQ(*plain, *general) << body;
  }
  EXPECT_EQ(*detail::ParsePlainSeqKeys(R"({"keys":["5",6]})"), (std::vector<uint64_t>{5, 6}));
}

TEST(SeqJsonTest, EveryOtherShapeIsLeftToTheGeneralReader) {
  for (const std::string body : {
           R"({"keys":[]})",
           R"({"keys":["01"]})",
           R"({"keys":[01]})",
           R"({"keys":[-1]})",
           R"({"keys":[1.0]})",
           R"({"keys":[1e3]})",
           R"({"keys":["18446744073709551616"]})",
           R"({"keys":[18446744073709551616]})",
           R"({"keys":["\u0031"]})",
           R"({"keys":[""]})",
           R"({"keys":["1"],"x":1})",
           R"({"x":1,"keys":["1"]})",
           R"({"keys":["1",]})",
           R"({"keys":["1"]} x)",
           R"({"keys":["1"])",
           R"({"keys":"1"})",
           R"(["1"])",
           "",
           R"({"keys":[" 1"]})",
           R"({"keys":[true]})",
           R"({"keys":[null]})",
           "\xEF\xBB\xBF{\"keys\":[\"1\"]}",  // a byte-order mark
       }) {
    EXPECT_FALSE(detail::ParsePlainSeqKeys(body).has_value()) << body;
    ExpectSameAnswer(body);
  }
}

TEST(SeqJsonTest, TheKeyLimitIsTheGeneralReadersToo) {
  std::string body = R"({"keys":[)";
  for (size_t i = 0; i < allocator::kMaxSeqKeys; ++i)
    body += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  EXPECT_EQ(ParseSeqKeys(body + "]}")->size(), allocator::kMaxSeqKeys);
  ExpectSameAnswer(body + "]}");
  EXPECT_FALSE(detail::ParsePlainSeqKeys(body + ",\"1\"]}").has_value());
  ExpectSameAnswer(body + ",\"1\"]}");
}

// Bodies put together from the pieces both readers have to agree on: both answer the same on
// every one of them.
TEST(SeqJsonTest, RandomBodiesGetTheSameAnswerFromBothReaders) {
  // Mostly pieces the hand-written reader takes, now and then one it leaves to the other.
  const std::vector<std::string> keys = {"0", "7", "42", "18446744073709551615"};
  const std::vector<std::string> odd_keys = {
      "00", "07", "-1",      "1.5", "2e2", "18446744073709551616", "99999999999999999999",
      "",   "a",  "\\u0033", " 3",  "3 "};
  const std::vector<std::string> spaces = {"", " ", "\n", "\t", "\r", "  \n "};
  std::mt19937_64 rng(20261128);
  auto one_of = [&](const std::vector<std::string>& from) { return from[rng() % from.size()]; };
  auto space = [&] { return rng() % 100 == 0 ? std::string("\f") : one_of(spaces); };
  auto key = [&] { return rng() % 20 == 0 ? one_of(odd_keys) : one_of(keys); };
  size_t read_by_hand = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string body = space() + "{" + space();
    body += rng() % 20 == 0 ? "\"key\"" : "\"keys\"";
    body += space() + ":" + space() + "[";
    const size_t n = rng() % 6;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) body += space() + ",";
      const bool quoted = rng() % 2 == 0;
      body += space() + (quoted ? "\"" : "") + key() + (quoted ? "\"" : "");
    }
    body += space() + "]" + space();
    if (rng() % 20 == 0) body += ",\"other\":1";
    body += "}" + space();
    if (rng() % 30 == 0) body.pop_back();
    if (detail::ParsePlainSeqKeys(body)) ++read_by_hand;
    ExpectSameAnswer(body);
    if (HasFailure()) return;
  }
  // Both paths were taken, many times each.
  EXPECT_GT(read_by_hand, 1000u);
  EXPECT_LT(read_by_hand, 19000u);
}

TEST(SeqJsonTest, TheAnswerListsEachKeyWithItsValueAsStrings) {
  const std::vector<uint64_t> keys = {3, 18446744073709551615u, 3};
  const std::vector<uint64_t> values = {1, 9007199254740993u, 2};
  std::string out;
  AppendSeqList(out, "inbox", keys, values);
  EXPECT_EQ(json::parse(out), json::parse(R"({"space":"inbox","seqs":[
      {"key":"3","seq":"1"},{"key":"18446744073709551615","seq":"9007199254740993"},
      {"key":"3","seq":"2"}]})"));
}

}  // namespace
}  // namespace kleaf::gateway
