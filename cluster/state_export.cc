#include "cluster/state_export.h"

#include <optional>
#include <utility>

#include "cluster/restore.h"

namespace kleaf::cluster {

Result<std::map<std::string, state::TagRecord>> ReadAllTags(const kafka::Properties& props,
                                                            const ClusterTopics& topics) {
  auto reader = kafka::PartitionReader::Create(props);
  if (!reader) return std::unexpected(reader.error());
  std::map<std::string, state::TagRecord> tags;
  for (int32_t p = 0; p < topics.partitions; ++p) {
    auto end = (*reader)->ReadToEnd(
        topics.state, p, 0,
        [&](const kafka::Message& m) {
          if (!m.key.starts_with("seg/") || !m.value) return;
          if (auto r = state::DecodeTag(*m.value)) {
            std::string tag = r->tag;  // read before the record is moved from
            auto it = tags.find(tag);
            auto merged = MergeRestored(it == tags.end() ? std::nullopt : std::optional(it->second),
                                        std::move(*r));
            tags[tag] = std::move(merged);
          }
        },
        std::chrono::milliseconds(120000));
    if (!end) return std::unexpected(end.error());
  }
  return tags;
}

}  // namespace kleaf::cluster
