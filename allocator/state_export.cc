#include "allocator/state_export.h"

#include <future>
#include <optional>
#include <utility>

#include "allocator/allocation.h"

namespace kleaf::allocator {

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

ImportCounts ImportTags(Allocator& allocator, const std::vector<state::TagRecord>& records,
                        int64_t bump, std::ostream& errors) {
  ImportCounts counts;
  for (const auto& r : records) {
    if (r.max_id > kMaxSegmentId - bump) {
      errors << "kleaf: tag " << r.tag << ": max_id + bump exceeds the ID space\n";
      ++counts.failed;
      continue;
    }
    TagUpdate update{r.step, r.max_id + bump, r.description};
    std::promise<Result<state::TagRecord>> put;
    allocator.PutTag(r.tag, update,
                     [&put](Result<state::TagRecord> res) { put.set_value(std::move(res)); });
    auto result = put.get_future().get();
    if (!result && result.error().code == Code::kFailedPrecondition) {
      ++counts.kept;  // the live max_id is higher already: keep it
    } else if (!result) {
      errors << "kleaf: tag " << r.tag << ": " << result.error().message << "\n";
      ++counts.failed;
      continue;
    } else {
      ++counts.raised;
    }
    if (r.deleted) {
      std::promise<Result<state::TagRecord>> del;
      allocator.DeleteTag(r.tag,
                          [&del](Result<state::TagRecord> res) { del.set_value(std::move(res)); });
      if (auto d = del.get_future().get(); !d && d.error().code != Code::kNotFound) {
        errors << "kleaf: tag " << r.tag << ": " << d.error().message << "\n";
        ++counts.failed;
      }
    }
  }
  return counts;
}

}  // namespace kleaf::allocator
