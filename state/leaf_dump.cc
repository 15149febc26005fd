#include "state/leaf_dump.h"

#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/tag.h"

namespace kleaf::state {
namespace {

constexpr size_t kColumns = 4;  // biz_tag, max_id, step, description

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    auto tab = line.find('\t');
    fields.push_back(line.substr(0, tab));
    if (tab == std::string_view::npos) return fields;
    line.remove_prefix(tab + 1);
  }
}

// A value as the client wrote it, unescaped; nullopt for SQL NULL. Errors name the problem only.
[[nodiscard]] Result<std::optional<std::string>> Unescape(std::string_view field) {
  if (field == "NULL") return std::nullopt;
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out += field[i];
      continue;
    }
    const char next = i + 1 < field.size() ? field[i + 1] : '\0';
    switch (next) {
      case '0':
        out += '\0';
        break;
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case '\\':
        out += '\\';
        break;
      default:
        return Fail(Code::kInvalidArgument,
                    "a backslash not followed by 0, t, n or \\ (was the dump written with "
                    "--raw? dump without it)");
    }
    ++i;
  }
  return out;
}

[[nodiscard]] Result<int64_t> ParseNumber(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Fail(Code::kInvalidArgument, "'" + std::string(text) + "' is not a 64-bit integer");
  }
  return v;
}

bool IsUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// One data line as a record; errors name the column.
[[nodiscard]] Result<TagRecord> DecodeRow(std::string_view line, const LeafDumpLimits& limits) {
  const auto fields = SplitTabs(line);
  if (fields.size() != kColumns) {
    return Fail(Code::kInvalidArgument,
                "expected 4 tab-separated columns (biz_tag, max_id, step, description), found " +
                    std::to_string(fields.size()) +
                    " (a tab or a line break in a description splits its row when the dump "
                    "was written with mysql -r/--raw: dump without it, escaped, as "
                    "docs/migrating-from-leaf.md shows)");
  }
  std::optional<std::string> values[kColumns];
  constexpr const char* kNames[kColumns] = {"biz_tag", "max_id", "step", "description"};
  for (size_t i = 0; i < kColumns; ++i) {
    auto v = Unescape(fields[i]);
    if (!v) return Fail(Code::kInvalidArgument, std::string(kNames[i]) + ": " + v.error().message);
    if (!*v && i < 3) return Fail(Code::kInvalidArgument, std::string(kNames[i]) + ": NULL");
    values[i] = std::move(*v);
  }
  TagRecord r;
  r.tag = *values[0];
  if (auto valid = ValidateTag(r.tag); !valid) {
    return Fail(Code::kInvalidArgument, "biz_tag '" + r.tag + "': " + valid.error().message);
  }
  auto max_id = ParseNumber(*values[1]);
  if (!max_id) return Fail(Code::kInvalidArgument, "max_id: " + max_id.error().message);
  if (*max_id < 0) return Fail(Code::kInvalidArgument, "max_id: must not be negative");
  if (*max_id > limits.max_id) {
    return Fail(Code::kInvalidArgument, "max_id: " + std::to_string(*max_id) +
                                            " is above the most kleaf can import here (" +
                                            std::to_string(limits.max_id) + ")");
  }
  r.max_id = *max_id;
  auto step = ParseNumber(*values[2]);
  if (!step) return Fail(Code::kInvalidArgument, "step: " + step.error().message);
  if (*step < 1 || *step > limits.max_step) {
    return Fail(Code::kInvalidArgument, "step: must be between 1 and " +
                                            std::to_string(limits.max_step) +
                                            " (segment.max_step), found " + std::to_string(*step));
  }
  r.step = *step;
  r.description = values[3].value_or("");
  if (!IsUtf8(r.description)) {
    return Fail(Code::kInvalidArgument,
                "description: not UTF-8 (dump with --default-character-set=utf8mb4)");
  }
  if (r.description.size() > limits.max_description_bytes) {
    return Fail(
        Code::kInvalidArgument,
        "description: longer than " + std::to_string(limits.max_description_bytes) + " bytes");
  }
  return r;
}

}  // namespace

Result<std::vector<TagRecord>> DecodeLeafDump(std::istream& in, const LeafDumpLimits& limits) {
  std::string line;
  if (!std::getline(in, line) || line != kLeafDumpHeader) {
    return Fail(Code::kInvalidArgument,
                "line 1: not a leaf_alloc dump: expected the header line 'biz_tag<TAB>max_id<TAB>"
                "step<TAB>description', as mysql -B -e 'SELECT biz_tag,max_id,step,description "
                "FROM leaf_alloc' writes it");
  }
  std::vector<TagRecord> records;
  std::map<std::string, int64_t> line_of_tag;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    auto record = DecodeRow(line, limits);
    if (!record) {
      return Fail(Code::kInvalidArgument,
                  "line " + std::to_string(number) + ": " + record.error().message);
    }
    auto [it, inserted] = line_of_tag.emplace(record->tag, number);
    if (!inserted) {
      return Fail(Code::kInvalidArgument, "line " + std::to_string(number) + ": biz_tag '" +
                                              record->tag + "' repeats line " +
                                              std::to_string(it->second));
    }
    records.push_back(std::move(*record));
  }
  if (in.bad()) return Fail(Code::kInvalidArgument, "cannot read the dump");
  return records;
}

}  // namespace kleaf::state
