// The leaf_alloc dump of `kleaf state import --from-leaf`: what the MySQL/MariaDB client writes in
// batch mode reads back exactly (escapes, NULL, large max_id), and any bad line refuses the whole
// dump with a message naming the line.
#include "state/leaf_dump.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace kleaf::state {
namespace {

constexpr LeafDumpLimits kLimits{int64_t{1} << 62, 1'000'000, 1024};

Result<std::vector<TagRecord>> Decode(const std::string& text,
                                      const LeafDumpLimits& limits = kLimits) {
  std::istringstream in(text);
  return DecodeLeafDump(in, limits);
}

std::string Dump(const std::string& rows) { return std::string(kLeafDumpHeader) + "\n" + rows; }

TEST(LeafDumpTest, ReadsRowsAsTheClientWritesThem) {
  auto r =
      Decode(Dump("leaf-segment-test\t2001\t2000\tTest leaf Segment Mode Get Id\n"
                  "orders\t4000000000000000000\t100\tNULL\n"
                  "tabbed\t5\t10\ta\\tb\\nc\\\\d\\0e \xe8\xae\xa2\xe5\x8d\x95\n"
                  "zero:1_x.y\t0\t1\t\n"));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 4u);
  const auto& rows = *r;
  EXPECT_EQ(rows[0].tag, "leaf-segment-test");
  EXPECT_EQ(rows[0].max_id, 2001);  // unchanged: Leaf's IDs are below it, kleaf's start at it
  EXPECT_EQ(rows[0].step, 2000);
  EXPECT_EQ(rows[0].description, "Test leaf Segment Mode Get Id");
  EXPECT_FALSE(rows[0].deleted);
  EXPECT_EQ(rows[1].max_id, 4'000'000'000'000'000'000);
  EXPECT_EQ(rows[1].description, "") << "SQL NULL";
  EXPECT_EQ(rows[2].description, std::string("a\tb\nc\\d\0e \xe8\xae\xa2\xe5\x8d\x95", 16));
  EXPECT_EQ(rows[3].tag, "zero:1_x.y");
  EXPECT_EQ(rows[3].max_id, 0);
  EXPECT_EQ(rows[3].description, "");
}

TEST(LeafDumpTest, TheHeaderAloneIsAnEmptyTable) {
  for (const std::string& text : {std::string(kLeafDumpHeader), Dump("")}) {
    auto r = Decode(text);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->empty());
  }
}

TEST(LeafDumpTest, TheLastLineNeedsNoNewline) {
  auto r = Decode(Dump("a\t1\t2\tNULL"));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].step, 2);
}

TEST(LeafDumpTest, ANonHeaderFirstLineIsRefused) {
  for (const std::string& text :
       {std::string(""), std::string("a\t1\t2\tx\n"), std::string("biz_tag\tmax_id\tstep\n"),
        std::string("biz_tag,max_id,step,description\n"),
        std::string("biz_tag\tmax_id\tstep\tdescription\tupdate_time\n"),
        std::string("+---------+\n")}) {
    SCOPED_TRACE(text);
    auto r = Decode(text);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_TRUE(r.error().message.starts_with("line 1: not a leaf_alloc dump"))
        << r.error().message;
  }
}

// Every bad row fails the whole dump (nothing is imported), naming its line and column.
TEST(LeafDumpTest, ABadRowRefusesTheWholeDumpNamingTheLine) {
  struct Case {
    std::string row;
    std::string message;
  };
  const std::string long_tag(129, 'x');
  for (const Case& c : std::vector<Case>{
           {"a\t1\t2", "line 3: expected 4 tab-separated columns"},
           {"a\t1\t2\tx\ty",
            "found 5 (a tab or a line break in a description splits its row "
            "when the dump was written with mysql -r/--raw"},
           {"", "found 1"},
           {"bad tag\t1\t2\tx", "line 3: biz_tag 'bad tag': invalid tag"},
           {"\xe8\xae\xa2\t1\t2\tx", "biz_tag"},
           {long_tag + "\t1\t2\tx", "biz_tag"},
           {"NULL\t1\t2\tx", "line 3: biz_tag: NULL"},
           {"a\t-1\t2\tx", "line 3: max_id: must not be negative"},
           {"a\tabc\t2\tx", "line 3: max_id: 'abc' is not a 64-bit integer"},
           {"a\t1.5\t2\tx", "max_id: '1.5' is not"},
           {"a\t\t2\tx", "max_id: '' is not"},
           {"a\t99999999999999999999\t2\tx", "max_id: '99999999999999999999' is not"},
           {"a\t4611686018427387905\t2\tx", "max_id: 4611686018427387905 is above"},
           {"a\tNULL\t2\tx", "max_id: NULL"},
           {"a\t1\t0\tx", "line 3: step: must be between 1 and 1000000"},
           {"a\t1\t-5\tx", "step: must be between"},
           {"a\t1\t1000001\tx", "step: must be between"},
           {"a\t1\tx\tx", "step: 'x' is not"},
           {"a\t1\t2\tx\\q", "line 3: description: a backslash"},
           {"a\t1\t2\tx\\", "description: a backslash"},
           {"a\t1\t2\t\xff\xfe", "line 3: description: not UTF-8"},
           {"a\t1\t2\t" + std::string(1025, 'd'), "description: longer than 1024 bytes"},
           {"ok\t1\t2\tx", "line 3: biz_tag 'ok' repeats line 2"}}) {
    SCOPED_TRACE(c.row);
    auto r = Decode(Dump("ok\t1\t2\tfine\n" + c.row + "\nlater\t1\t2\tx\n"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
  }
}

TEST(LeafDumpTest, TheLimitsComeFromTheCaller) {
  LeafDumpLimits tight{1000, 50, 3};
  EXPECT_TRUE(Decode(Dump("a\t1000\t50\tabc\n"), tight));
  EXPECT_FALSE(Decode(Dump("a\t1001\t50\tabc\n"), tight));
  EXPECT_FALSE(Decode(Dump("a\t1000\t51\tabc\n"), tight));
  EXPECT_FALSE(Decode(Dump("a\t1000\t50\tabcd\n"), tight));
}

}  // namespace
}  // namespace kleaf::state
