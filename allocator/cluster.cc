#include "allocator/cluster.h"

#include <spdlog/spdlog.h>

#include <map>
#include <vector>

namespace kleaf::allocator {

ClusterTopics ClusterTopics::For(const std::string& prefix, int32_t partitions,
                                 int32_t reply_partitions) {
  return ClusterTopics{prefix + ".requests", prefix + ".state", prefix + ".replies", partitions,
                       reply_partitions, prefix + ".ids"};
}

Result<void> EnsureClusterTopics(const kafka::Properties& props, const ClusterTopics& t,
                                 int16_t replication_factor, std::chrono::milliseconds timeout) {
  std::string min_isr = replication_factor >= 3 ? "2" : "1";
  std::vector<kafka::TopicSpec> specs{
      {t.requests, t.partitions, replication_factor, {{"min.insync.replicas", min_isr}}},
      {t.state,
       t.partitions,
       replication_factor,
       {{"cleanup.policy", "compact"},
        {"min.insync.replicas", min_isr},
        // Deletions must outlive the longest restore; segments roll often so compaction runs.
        {"delete.retention.ms", "86400000"},
        {"segment.ms", "3600000"},
        {"min.cleanable.dirty.ratio", "0.1"}}},
      {t.replies, t.reply_partitions, replication_factor,
       {{"retention.ms", "3600000"}, {"min.insync.replicas", min_isr}}},
  };
  if (!t.ids.empty()) {
    specs.push_back({t.ids, t.partitions, replication_factor, {{"min.insync.replicas", min_isr}}});
  }
  return kafka::EnsureTopics(props, specs, timeout);
}

std::string AppliedOffsetKey(int32_t p) { return "state_offset/" + std::to_string(p); }

state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming) {
  if (existing && existing->max_id > incoming.max_id) incoming.max_id = existing->max_id;
  return incoming;
}

Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader, state::Store& store,
                                       const ClusterTopics& topics, int32_t p,
                                       std::chrono::milliseconds timeout) {
  auto applied = store.GetValue(AppliedOffsetKey(p));
  if (!applied) return std::unexpected(applied.error());
  RestoreResult result;
  result.from = applied->value_or(0);
  auto marks = reader.Watermarks(topics.state, p, timeout);
  if (!marks) return std::unexpected(marks.error());
  if (result.from > marks->second) {
    spdlog::warn("[restore] state partition {} ends at {} but {} was applied: the topic was "
                 "recreated or truncated; re-reading it all (max_id never goes down)",
                 p, marks->second, result.from);
    result.from = 0;
  }
  std::map<std::string, state::TagRecord> merged;
  std::map<int64_t, state::WorkerRecord> workers;  // the last record of each id wins
  int64_t skipped = 0;
  Error store_error{Code::kInternal, ""};
  bool store_failed = false;
  auto end = reader.ReadToEnd(
      topics.state, p, result.from,
      [&](const kafka::Message& m) {
        if (!m.value) return;
        if (m.key.starts_with("wrk/")) {
          if (auto w = state::DecodeWorker(*m.value)) {
            workers[w->worker_id] = std::move(*w);
            ++result.records;
          } else {
            ++skipped;
          }
          return;
        }
        if (!m.key.starts_with("seg/")) return;
        auto r = state::DecodeTag(*m.value);
        if (!r) {
          ++skipped;
          return;
        }
        std::optional<state::TagRecord> existing;
        if (auto it = merged.find(r->tag); it != merged.end()) {
          existing = it->second;
        } else if (auto stored = store.GetTag(r->tag); stored) {
          existing = *stored;
        } else {
          store_failed = true;
          store_error = stored.error();
        }
        std::string tag = r->tag;  // read before the record is moved from
        merged[tag] = MergeRestored(existing, std::move(*r));
        ++result.records;
      },
      timeout);
  if (!end) return std::unexpected(end.error());
  if (store_failed) return std::unexpected(store_error);
  if (skipped > 0) spdlog::error("[restore] state partition {}: {} unreadable records skipped", p, skipped);
  state::Store::Batch batch;
  for (auto& [tag, r] : merged) batch.tags.push_back(std::move(r));
  for (auto& [id, w] : workers) batch.workers.push_back(std::move(w));
  batch.values.emplace_back(AppliedOffsetKey(p), *end);
  if (auto w = store.Write(batch, /*sync=*/true); !w) {
    return std::unexpected(w.error());
  }
  result.end = *end;
  return result;
}

}  // namespace kleaf::allocator
