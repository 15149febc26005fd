// The file of `kleaf state export` / `import`: what is written reads back, and a file that is not
// an export is refused with a message saying so.
#include "state/export_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace kleaf::state {
namespace {

TEST(ExportFileTest, WrittenRecordsReadBack) {
  ExportContents contents;
  contents.tags = {{"a", 1001, 1000, "orders", 1'700'000'000'000, false},
                   {"b", 5, 10, "", 1'700'000'000'001, true}};
  contents.spaces = {{"chat", 100, 10, "inbox", 1'700'000'000'002, false},
                     {"gone", 50, 5, "", 1'700'000'000'003, true}};
  const uint64_t big = 18'000'000'000'000'000'000u;  // above INT64_MAX: values are unsigned
  contents.sections = {{"chat", 0, 100, 4010}, {"chat", big / 100, 100, big}, {"gone", 7, 50, 9}};
  const std::string text = EncodeExportFile("kleaf.state", "2026-01-01T00:00:00.000Z", contents);
  EXPECT_TRUE(text.ends_with("}\n"));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["version"], kExportFileVersion);
  EXPECT_EQ(j["topic"], "kleaf.state");
  EXPECT_EQ(j["exported_at"], "2026-01-01T00:00:00.000Z");
  std::istringstream in(text);
  auto read = DecodeExportFile(in);
  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_EQ(read->version, kExportFileVersion);
  ASSERT_EQ(read->tags.size(), 2u);
  EXPECT_EQ(read->tags[0].tag, "a");
  EXPECT_EQ(read->tags[0].max_id, 1001);
  EXPECT_EQ(read->tags[0].description, "orders");
  EXPECT_TRUE(read->tags[1].deleted);
  ASSERT_EQ(read->spaces.size(), 2u);
  EXPECT_EQ(read->spaces[0].space, "chat");
  EXPECT_EQ(read->spaces[0].section_size, 100);
  EXPECT_EQ(read->spaces[0].step, 10);
  EXPECT_EQ(read->spaces[0].description, "inbox");
  EXPECT_TRUE(read->spaces[1].deleted);
  EXPECT_EQ(read->spaces[1].section_size, 50);
  ASSERT_EQ(read->sections.size(), 3u);
  EXPECT_EQ(read->sections[0].max_seq, 4010u);
  EXPECT_EQ(read->sections[1].section, big / 100);
  EXPECT_EQ(read->sections[1].max_seq, big);
  EXPECT_EQ(read->sections[2].space, "gone");
  EXPECT_EQ(read->sections[2].section_size, 50);
}

TEST(ExportFileTest, AVersionOneFileWithoutSequencesStillReads) {
  // What kleaf wrote before exports carried sequences: no version, tags only.
  std::istringstream in(R"({
  "exported_at": "2026-01-01T00:00:00.000Z",
  "tags": [{"tag":"a","max_id":1001,"step":1000,"description":"","update_time":0,"deleted":false}],
  "topic": "kleaf.state"
})");
  auto read = DecodeExportFile(in);
  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_EQ(read->version, 1);
  ASSERT_EQ(read->tags.size(), 1u);
  EXPECT_EQ(read->tags[0].max_id, 1001);
  EXPECT_TRUE(read->spaces.empty());
  EXPECT_TRUE(read->sections.empty());
}

TEST(ExportFileTest, ANewerVersionOrABadSequenceRecordIsRefusedNamingIt) {
  std::istringstream newer(R"({"version":3,"tags":[]})");
  auto read = DecodeExportFile(newer);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code, Code::kInvalidArgument);
  EXPECT_NE(read.error().message.find("version 3"), std::string::npos) << read.error().message;
  std::istringstream bad_section(
      R"({"version":2,"tags":[],"sections":[{"space":"c","section":0,"section_size":0,"max_seq":5}]})");
  read = DecodeExportFile(bad_section);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code, Code::kInvalidArgument);
  EXPECT_NE(read.error().message.find("section"), std::string::npos) << read.error().message;
  std::istringstream bad_space(R"({"version":2,"tags":[],"spaces":[{"space":"c","step":1}]})");
  read = DecodeExportFile(bad_space);
  ASSERT_FALSE(read.has_value());
  EXPECT_NE(read.error().message.find("space"), std::string::npos) << read.error().message;
}

TEST(ExportFileTest, AnythingElseIsRefused) {
  for (const char* text : {"", "not json", "{}", "[1]", R"({"topic":"kleaf.state"})"}) {
    std::istringstream in(text);
    auto read = DecodeExportFile(in);
    ASSERT_FALSE(read.has_value()) << text;
    EXPECT_TRUE(read.error().message.starts_with("not an export file: ")) << read.error().message;
  }
}

}  // namespace
}  // namespace kleaf::state
