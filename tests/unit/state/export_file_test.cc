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
  std::vector<TagRecord> tags = {{"a", 1001, 1000, "orders", 1'700'000'000'000, false},
                                 {"b", 5, 10, "", 1'700'000'000'001, true}};
  const std::string text = EncodeExportFile("kleaf.state", "2026-01-01T00:00:00.000Z", tags);
  EXPECT_TRUE(text.ends_with("}\n"));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["topic"], "kleaf.state");
  EXPECT_EQ(j["exported_at"], "2026-01-01T00:00:00.000Z");
  std::istringstream in(text);
  auto read = DecodeExportFile(in);
  ASSERT_TRUE(read.has_value()) << read.error().message;
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].tag, "a");
  EXPECT_EQ((*read)[0].max_id, 1001);
  EXPECT_EQ((*read)[0].description, "orders");
  EXPECT_TRUE((*read)[1].deleted);
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
