// docs/operations.md's configuration reference against the parser's table of keys
// (config::KeyReferences): the same keys, each integer key's range as enforced, and the roles that
// read it. A key added, a bound changed or a role's reading moved without the docs fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"

namespace kleaf::config {
namespace {

struct DocRow {
  std::string range;
  std::string read_by;
};

// Splits a Markdown table row on the pipes that are not escaped (`segment\|snowflake`).
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {  // past the leading '|'
    if (line[i] == '|' && line[i - 1] != '\\') {
      const size_t first = cell.find_first_not_of(' ');
      cells.push_back(first == std::string::npos
                          ? ""
                          : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

// The reference table's rows by key: | key | default | range | read by | meaning |.
std::map<std::string, DocRow> DocumentedKeys() {
  std::ifstream in(std::filesystem::path(KLEAF_SOURCE_DIR) / "docs" / "operations.md");
  std::map<std::string, DocRow> rows;
  std::string line;
  bool in_section = false;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) in_section = line == "## Configuration reference";
    if (!in_section) continue;
    if (line.starts_with("| key | default | range | read by |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    if (line.starts_with("|---")) continue;
    const auto cells = Cells(line);
    if (cells.size() < 5) {
      ADD_FAILURE() << "a reference row without 5 cells: " << line;
      continue;
    }
    std::string key = cells[0];
    std::erase(key, '`');
    rows[key] = {cells[2], cells[3]};
  }
  return rows;
}

std::string WithoutThousands(std::string s) {
  std::erase(s, ',');
  return s;
}

// "1–256", or "≥ 0" for a key without an upper bound.
std::string RangeText(const std::pair<int64_t, int64_t>& range) {
  if (range.second == std::numeric_limits<int64_t>::max()) {
    return "≥ " + std::to_string(range.first);
  }
  return std::to_string(range.first) + "–" + std::to_string(range.second);
}

std::string ReadByText(const std::vector<Role>& roles) {
  if (roles.size() == 4) return "all";
  std::string text;
  for (Role role : roles) {
    if (!text.empty()) text += ", ";
    switch (role) {
      case Role::kStandalone:
        text += "standalone";
        break;
      case Role::kAllocator:
        text += "allocator";
        break;
      case Role::kGateway:
        text += "gateway";
        break;
      case Role::kProducer:
        text += "producer";
        break;
      case Role::kStateTool:
        text += "state";
        break;
    }
  }
  return text;
}

TEST(ConfigReferenceTest, TheDocsListEveryKeyOfTheParserAndNoOther) {
  const auto documented = DocumentedKeys();
  ASSERT_FALSE(documented.empty()) << "no reference table found in docs/operations.md";
  std::map<std::string, bool> in_code;
  for (const KeyReference& ref : KeyReferences()) {
    in_code[ref.key] = true;
    EXPECT_TRUE(documented.contains(ref.key)) << ref.key << " is not in docs/operations.md";
  }
  for (const auto& [key, row] : documented) {
    EXPECT_TRUE(in_code.contains(key)) << key << " is documented but not a config key";
  }
}

TEST(ConfigReferenceTest, TheDocsGiveEveryRangeAndTheRolesThatReadEachKey) {
  const auto documented = DocumentedKeys();
  for (const KeyReference& ref : KeyReferences()) {
    auto row = documented.find(ref.key);
    if (row == documented.end()) continue;  // the test above says so
    if (ref.range) {
      EXPECT_EQ(WithoutThousands(row->second.range), RangeText(*ref.range)) << ref.key;
    } else {
      // Not an integer key: a length in words ("1–128 characters") at most, no bare numbers.
      const std::string& cell = row->second.range;
      EXPECT_TRUE(cell.empty() ||
                  std::any_of(cell.begin(), cell.end(),
                              [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); }))
          << ref.key << ": a range '" << cell << "' the parser does not have";
    }
    EXPECT_EQ(row->second.read_by, ReadByText(ref.read_by)) << ref.key;
  }
}

// The ranges the docs are checked against are the ones the parser enforces: just outside either
// end is refused, naming the key.
TEST(ConfigReferenceTest, EveryRangeIsEnforced) {
  for (const KeyReference& ref : KeyReferences()) {
    if (!ref.range) continue;
    std::string variable = "KLEAF_";
    for (char ch : ref.key) {
      variable +=
          ch == '.' ? std::string("__") : std::string(1, static_cast<char>(std::toupper(ch)));
    }
    const auto [min, max] = *ref.range;
    std::vector<int64_t> outside = {min - 1};
    if (max != std::numeric_limits<int64_t>::max()) outside.push_back(max + 1);
    for (int64_t v : outside) {
      auto c = ParseConfig("", {{variable, std::to_string(v)}});
      ASSERT_FALSE(c) << ref.key << " accepted " << v;
      EXPECT_NE(c.error().message.find(ref.key + ": must be between"), std::string::npos)
          << c.error().message;
    }
  }
}

}  // namespace
}  // namespace kleaf::config
