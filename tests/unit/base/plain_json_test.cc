// The hand-written JSON reader of the hot paths (base/plain_json.h): it takes exactly the bytes
// nlohmann's dump() writes and nothing else, and a step that does not match consumes nothing, so
// its caller can hand the whole text to the general reader.
#include "base/plain_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace kleaf::plain_json {
namespace {

TEST(PlainJsonTest, NumbersAreTakenOnlyInDumpsShapeAndRange) {
  uint64_t u = 7;
  EXPECT_TRUE(Reader("0").Uint(u));
  EXPECT_EQ(u, 0u);
  EXPECT_TRUE(Reader("18446744073709551615").Uint(u));
  EXPECT_EQ(u, UINT64_MAX);
  for (const char* bad : {"", "01", "18446744073709551616", "-1", "+1", " 1", "x"}) {
    Reader r(bad);
    EXPECT_FALSE(r.Uint(u)) << bad;
    EXPECT_TRUE(r.Literal(bad)) << bad << ": a refused step consumes nothing";
  }
  int64_t i = 0;
  EXPECT_TRUE(Reader("-9223372036854775808").Int(i));
  EXPECT_EQ(i, std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(Reader("9223372036854775807").Int(i));
  EXPECT_EQ(i, std::numeric_limits<int64_t>::max());
  for (const char* bad : {"-0", "9223372036854775808", "-9223372036854775809", "-", "--1"}) {
    Reader r(bad);
    EXPECT_FALSE(r.Int(i)) << bad;
    EXPECT_TRUE(r.Literal(bad)) << bad;
  }
}

TEST(PlainJsonTest, StringsAndListsAreTakenWithoutEscapesAndWithinTheirBound) {
  std::string_view s;
  Reader plain(R"("bench-1.x")");
  EXPECT_TRUE(plain.String(s));
  EXPECT_EQ(s, "bench-1.x");
  EXPECT_TRUE(plain.AtEnd());
  for (const char* bad : {R"("a\"b")", R"("a\\b")", "\"caf\xc3\xa9\"", "\"tab\t\"", R"("open)"}) {
    EXPECT_FALSE(Reader(bad).String(s)) << bad;
  }

  std::vector<uint64_t> out = {9};
  Reader list("[1,2,3]]");
  EXPECT_TRUE(list.UintList(out, 3));
  EXPECT_EQ(out, (std::vector<uint64_t>{9, 1, 2, 3}));
  EXPECT_TRUE(list.Literal("]"));
  EXPECT_TRUE(list.AtEnd());
  out.clear();
  EXPECT_TRUE(Reader("[]").UintList(out, 3));
  EXPECT_TRUE(out.empty());
  for (const char* bad : {"[1,2,3,4]", "[1,]", "[1 ,2]", "[1", "[,1]", "1"}) {
    Reader r(bad);
    EXPECT_FALSE(r.UintList(out, 3)) << bad;
    EXPECT_TRUE(out.empty()) << bad << ": a refused list leaves nothing behind";
    EXPECT_TRUE(r.Literal(bad)) << bad;
  }
}

TEST(PlainJsonTest, WritersAndIsPlain) {
  std::string out;
  AppendUint(out, UINT64_MAX);
  out += ',';
  AppendInt(out, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out, "18446744073709551615,-9223372036854775808");
  EXPECT_TRUE(IsPlain("a-b_c.d ~"));
  EXPECT_FALSE(IsPlain("a\"b"));
  EXPECT_FALSE(IsPlain("a\\b"));
  EXPECT_FALSE(IsPlain("\x7f"));
}

}  // namespace
}  // namespace kleaf::plain_json
