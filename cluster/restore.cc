#include "cluster/restore.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "cluster/wire.h"

namespace kleaf::cluster {

std::string AppliedOffsetKey(int32_t p) { return "state_offset/" + std::to_string(p); }

std::string RequestsOffsetKey(int32_t p) { return "requests_offset/" + std::to_string(p); }

state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming) {
  if (existing && existing->max_id > incoming.max_id) incoming.max_id = existing->max_id;
  return incoming;
}

namespace {

// The records of one state partition read back, folded as RestorePartition writes them: per tag
// the highest max_id (of the records read and what the store holds), per worker id and per space
// the last, per section the highest max_seq (as for tags: I5 rests on it never going down).
struct RestoredPartition {
  std::map<std::string, state::TagRecord> tags;
  std::map<int64_t, state::WorkerRecord> workers;  // the last record of each id wins
  std::map<std::string, state::SpaceRecord> spaces;  // the last record of each space wins
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> sections;
  std::optional<int64_t> requests_offset;          // the highest RequestsOffsetKey record
  std::string requests_offset_key;
  int64_t records = 0;
  int64_t skipped = 0;               // unreadable
  std::optional<Error> store_error;  // reading the store's record of a tag failed

  void Add(const kafka::Message& m, state::Store& store) {
    if (!m.value) return;
    if (m.key == requests_offset_key) {
      if (auto next = wire::DecodeRequestsOffset(*m.value)) {
        requests_offset = std::max(requests_offset.value_or(0), *next);
      } else {
        ++skipped;
      }
      return;
    }
    if (m.key.starts_with("wrk/")) {
      if (auto w = state::DecodeWorker(*m.value)) {
        workers[w->worker_id] = std::move(*w);
        ++records;
      } else {
        ++skipped;
      }
      return;
    }
    if (m.key.starts_with("spc/")) {
      if (auto r = state::DecodeSpace(*m.value)) {
        spaces[r->space] = std::move(*r);
        ++records;
      } else {
        ++skipped;
      }
      return;
    }
    if (m.key.starts_with("sec/")) {
      AddSection(m, store);
      return;
    }
    if (!m.key.starts_with("seg/")) return;
    auto r = state::DecodeTag(*m.value);
    if (!r) {
      ++skipped;
      return;
    }
    std::optional<state::TagRecord> existing;
    if (auto it = tags.find(r->tag); it != tags.end()) {
      existing = it->second;
    } else if (auto stored = store.GetTag(r->tag); stored) {
      existing = *stored;
    } else {
      store_error = stored.error();
    }
    std::string tag = r->tag;  // read before the record is moved from
    tags[tag] = MergeRestored(existing, std::move(*r));
    ++records;
  }

  void AddSection(const kafka::Message& m, state::Store& store) {
    auto r = state::DecodeSection(*m.value);
    if (!r) {
      ++skipped;
      return;
    }
    auto key = std::make_pair(r->space, r->section);
    auto it = sections.find(key);
    if (it == sections.end()) {
      auto stored = store.GetSection(r->space, r->section);
      if (!stored) {
        store_error = stored.error();
        return;
      }
      it = sections.emplace(key, stored->value_or(*r)).first;
    }
    if (r->max_seq >= it->second.max_seq) it->second = std::move(*r);
    ++records;
  }
};

}  // namespace

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
    // Records this store applied are gone from the topic: a node without this store would
    // restore less than was committed and serve IDs again.
    return Fail(Code::kFailedPrecondition,
                "state partition " + std::to_string(p) + " of " + topics.state +
                    " ends at offset " + std::to_string(marks->second) +
                    " but this store applied records up to " + std::to_string(result.from) +
                    ": the topic was recreated or truncated and lost committed state. Restore the "
                    "state from an export (docs/operations.md, \"Layout refusals\")");
  }
  RestoredPartition restored;
  restored.requests_offset_key = RequestsOffsetKey(p);
  auto end = reader.ReadToEnd(
      topics.state, p, result.from, [&](const kafka::Message& m) { restored.Add(m, store); },
      timeout);
  if (!end) return std::unexpected(end.error());
  if (restored.store_error) return std::unexpected(*restored.store_error);
  if (restored.skipped > 0) {
    spdlog::error("[restore] state partition {}: {} unreadable records skipped", p,
                  restored.skipped);
  }
  state::Store::Batch batch;
  for (auto& [tag, r] : restored.tags) batch.tags.push_back(std::move(r));
  for (auto& [id, w] : restored.workers) batch.workers.push_back(std::move(w));
  for (auto& [name, r] : restored.spaces) batch.spaces.push_back(std::move(r));
  for (auto& [key, r] : restored.sections) batch.sections.push_back(std::move(r));
  batch.values.emplace_back(AppliedOffsetKey(p), *end);
  auto stored_offset = store.GetValue(RequestsOffsetKey(p));
  if (!stored_offset) return std::unexpected(stored_offset.error());
  if (*stored_offset &&
      (!restored.requests_offset || **stored_offset > *restored.requests_offset)) {
    restored.requests_offset = **stored_offset;
  }
  if (restored.requests_offset) {
    batch.values.emplace_back(RequestsOffsetKey(p), *restored.requests_offset);
  }
  if (auto w = store.Write(batch, /*sync=*/true); !w) {
    return std::unexpected(w.error());
  }
  result.requests_offset = restored.requests_offset;
  result.records = restored.records;
  result.end = *end;
  return result;
}

}  // namespace kleaf::cluster
