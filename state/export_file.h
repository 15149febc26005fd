// The file `kleaf state export` writes and `kleaf state import` reads: the live records of a
// cluster's state topic (or of a standalone's state.path) as one JSON document
// {"version","topic","exported_at","tags":[...],"spaces":[...],"sections":[...]}, each record in
// the record JSON of records.h. Version 1 files (before sequences were exported) have no
// "version", "spaces" or "sections": they read as version 1 with no spaces and no sections.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "base/error.h"
#include "state/records.h"

namespace kleaf::state {

// The version EncodeExportFile writes; DecodeExportFile reads it and every older one.
inline constexpr int kExportFileVersion = 2;

// What an export file holds: every tag, every sequence space and every section maximum (of
// deleted tags and spaces too: they keep their max_id, section_size and maxima).
struct ExportContents {
  int version = kExportFileVersion;
  std::vector<TagRecord> tags;
  std::vector<SpaceRecord> spaces = {};
  std::vector<SectionRecord> sections = {};
};

// The document, pretty-printed (two spaces) and ending in a newline. `topic`: where the records
// come from (the state topic, or "standalone:<state.path>"); `exported_at`: a UTC time
// (FormatUtcMs). Writes kExportFileVersion whatever `contents.version` says.
std::string EncodeExportFile(const std::string& topic, const std::string& exported_at,
                             const ExportContents& contents);
// The records of a document read from `in`. Errors (kInvalidArgument): a record that is not valid
// (its Decode* message), a version above kExportFileVersion (written by a newer kleaf), or
// "not an export file: ..." for anything else.
[[nodiscard]] Result<ExportContents> DecodeExportFile(std::istream& in);

}  // namespace kleaf::state
