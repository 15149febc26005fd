#include "cluster/state_export.h"

#include <map>
#include <optional>
#include <utility>

#include "cluster/restore.h"

namespace kleaf::cluster {

Result<state::ExportContents> ReadAllState(const kafka::Properties& props,
                                           const ClusterTopics& topics) {
  auto reader = kafka::PartitionReader::Create(props);
  if (!reader) return std::unexpected(reader.error());
  std::map<std::string, state::TagRecord> tags;
  std::map<std::string, state::SpaceRecord> spaces;
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> sections;
  for (int32_t p = 0; p < topics.partitions; ++p) {
    auto end = (*reader)->ReadToEnd(
        topics.state, p, 0,
        [&](const kafka::Message& m) {
          if (!m.value) return;
          if (m.key.starts_with("seg/")) {
            if (auto r = state::DecodeTag(*m.value)) {
              std::string tag = r->tag;  // read before the record is moved from
              auto it = tags.find(tag);
              auto merged = MergeRestored(
                  it == tags.end() ? std::nullopt : std::optional(it->second), std::move(*r));
              tags[tag] = std::move(merged);
            }
          } else if (m.key.starts_with("spc/")) {
            // A space's records are all on the partition of its name, in order: the last wins.
            if (auto r = state::DecodeSpace(*m.value)) {
              std::string space = r->space;
              spaces[space] = std::move(*r);
            }
          } else if (m.key.starts_with("sec/")) {
            // A maximum never goes down; the highest read is the section's.
            if (auto r = state::DecodeSection(*m.value)) {
              auto key = std::make_pair(r->space, r->section);
              auto it = sections.find(key);
              if (it == sections.end() || it->second.max_seq < r->max_seq) {
                sections[key] = std::move(*r);
              }
            }
          }
        },
        std::chrono::milliseconds(120000));
    if (!end) return std::unexpected(end.error());
  }
  state::ExportContents contents;
  for (auto& [name, r] : tags) contents.tags.push_back(std::move(r));
  for (auto& [name, r] : spaces) contents.spaces.push_back(std::move(r));
  for (auto& [key, r] : sections) contents.sections.push_back(std::move(r));
  return contents;
}

}  // namespace kleaf::cluster
