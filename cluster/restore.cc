#include "cluster/restore.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cluster/wire.h"
#include "state/lease_record.h"

namespace kleaf::cluster {

// The lease an unreadable lease record is taken for: the longest sequence.lease_ms accepts.
constexpr int64_t kUnreadableLeaseMs = 60000;

std::string LeaseCopyKey(int32_t p) { return "lease/" + std::to_string(p); }

std::string LeaseCompleteKey(int32_t p) { return "lease_complete/" + std::to_string(p); }

std::string EncodeLeaseCopy(const allocator::FoundLease& lease) {
  return nlohmann::json{{"record", state::EncodeLease(lease.record)},
                        {"offset", lease.offset},
                        {"generation_lease_ms", lease.generation_lease_ms}}
      .dump();
}

Result<allocator::FoundLease> DecodeLeaseCopy(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    auto record = state::DecodeLease(j.at("record").get<std::string>());
    if (!record) return std::unexpected(record.error());
    return allocator::FoundLease{std::move(*record), j.at("offset").get<int64_t>(),
                                 j.at("generation_lease_ms").get<int64_t>()};
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("the store's lease copy is corrupt: ") + e.what());
  }
}

void KeepLeaseCopy(state::Store::Batch& batch, int32_t p,
                   const std::optional<allocator::FoundLease>& kept,
                   const std::optional<allocator::FoundLease>& lease, int64_t applied) {
  if (lease) {
    batch.texts.emplace_back(LeaseCopyKey(p), EncodeLeaseCopy(allocator::MergeLease(kept, *lease)));
  }
  batch.values.emplace_back(LeaseCompleteKey(p), applied);
}

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
  // Reading past the last stable offset (RestorePartition's tail): the keys read there.
  bool in_tail = false;
  std::set<std::string> tail_keys;
  // The partition's lease records (R3): the newest so far, from the store's copy, then the log.
  std::string lease_key;
  std::optional<allocator::FoundLease> lease;
  bool tail_had_lease = false;
  std::string goes_back;
  int64_t tail_out_of_order = 0;

  void Add(const kafka::Message& m, state::Store& store) {
    if (!m.value) return;
    if (m.key == lease_key) {
      AddLease(m);
      return;
    }
    if (in_tail) tail_keys.insert(m.key);
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

  void AddLease(const kafka::Message& m) {
    auto r = state::DecodeLease(*m.value);
    if (!r) {
      // A lease record this version cannot read (a format it does not know, or a writer other
      // than kleaf's allocators): kept as a `held` record of the longest lease any allocator may
      // hold, at its offset, so that it is waited out and the store's copy keeps it. Skipping it
      // could make an older record, or none (no wait), the newest.
      ++skipped;
      spdlog::error(
          "[restore] state partition {}: the lease record at offset {} cannot be read "
          "({}): waited out as a lease of {} ms",
          m.partition, m.offset, r.error().message, kUnreadableLeaseMs);
      r = state::LeaseRecord{lease ? lease->record.generation : 1,
                             "",
                             "(unreadable)",
                             kUnreadableLeaseMs,
                             false,
                             state::LeaseState::kHeld};
    }
    if (lease && allocator::GoesBack(*lease, *r)) {
      if (in_tail) {
        ++tail_out_of_order;
      } else if (goes_back.empty()) {
        goes_back = "generation " + std::to_string(r->generation) + " at offset " +
                    std::to_string(m.offset) + " after generation " +
                    std::to_string(lease->record.generation) + " at offset " +
                    std::to_string(lease->offset);
      }
    }
    if (in_tail) tail_had_lease = true;
    const int64_t lease_ms = r->lease_ms;
    lease = allocator::MergeLease(lease, allocator::FoundLease{std::move(*r), m.offset, lease_ms});
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

kafka::Properties TailReaderProperties(const kafka::Properties& props) {
  kafka::Properties p = props;
  p["isolation.level"] = "read_uncommitted";
  return p;
}

Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader,
                                       kafka::PartitionReader& tail_reader, state::Store& store,
                                       const ClusterTopics& topics, int32_t p,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()),
                    std::chrono::milliseconds(1));
  };
  auto applied = store.GetValue(AppliedOffsetKey(p));
  if (!applied) return std::unexpected(applied.error());
  RestoreResult result;
  result.from = applied->value_or(0);
  // The log's end (read_uncommitted: the high watermark) and the last stable offset, below which
  // every transaction has its outcome. After the fence they are equal but for a moment: the fenced
  // owner's transaction is aborted before init_transactions returns, its markers written. A last
  // stable offset that stays below the end is a transaction without an outcome: Kafka answers a
  // commit once its decision is logged and writes the markers after, and drops them for a
  // partition that has no leader at that moment (a restart of its only broker, all its replicas
  // down), taking it for deleted. Its records may be committed ones (the owner applied and served
  // them), and every record committed after it is hidden from read_committed readers with it.
  auto log_end = tail_reader.Watermarks(topics.state, p, left());
  if (!log_end) return std::unexpected(log_end.error());
  auto marks = reader.Watermarks(topics.state, p, left());
  if (!marks) return std::unexpected(marks.error());
  for (int i = 0; marks->second < log_end->second && i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // markers on their way
    marks = reader.Watermarks(topics.state, p, left());
    if (!marks) return std::unexpected(marks.error());
  }
  if (result.from > log_end->second) {
    // Records this store applied are gone from the topic: a node without this store would
    // restore less than was committed and serve IDs again.
    return Fail(Code::kFailedPrecondition,
                "state partition " + std::to_string(p) + " of " + topics.state +
                    " ends at offset " + std::to_string(log_end->second) +
                    " but this store applied records up to " + std::to_string(result.from) +
                    ": the topic was recreated or truncated and lost committed state. Restore the "
                    "state from an export (docs/operations.md, \"Layout refusals\")");
  }
  RestoredPartition restored;
  restored.requests_offset_key = RequestsOffsetKey(p);
  restored.lease_key = state::LeaseKey(p);
  // The store's lease copy (R3), and whether it is complete up to the applied offset. One that is
  // not (a store of a version that kept no lease records, or moved on by one) has p's lease
  // records read again below the applied offset, committed ones only, from its completeness
  // point (from the start without one), so that it is complete again after this restore.
  std::optional<allocator::FoundLease> kept_copy;
  auto text = store.GetText(LeaseCopyKey(p));
  if (!text) return std::unexpected(text.error());
  if (*text) {
    if (auto copy = DecodeLeaseCopy(**text); copy) {
      kept_copy = *copy;
      restored.lease = *copy;
    } else {
      // Read again from the start below rather than refuse p for good on this node.
      spdlog::error("[restore] state partition {}: {}; reading its lease records again", p,
                    copy.error().message);
    }
  }
  auto complete = store.GetValue(LeaseCompleteKey(p));
  if (!complete) return std::unexpected(complete.error());
  const int64_t complete_at = kept_copy || !*text ? complete->value_or(0) : 0;
  if (complete_at < result.from) {
    result.lease_copy_rebuilt = true;
    RestoredPartition leases_only;
    leases_only.lease_key = restored.lease_key;
    leases_only.lease = restored.lease;
    auto scanned = reader.ReadToEnd(
        topics.state, p, complete_at,
        [&](const kafka::Message& m) {
          if (m.offset < result.from && m.key == leases_only.lease_key) leases_only.Add(m, store);
        },
        left());
    if (!scanned) return std::unexpected(scanned.error());
    if (*scanned < result.from) {
      // The committed read stopped at a transaction without an outcome below the applied offset:
      // the records from there to it are read uncommitted, for this takeover's wait only. The
      // copy takes none of them and does not become complete (RestoreResult::lease_copy_complete).
      result.lease_copy_complete = false;
      auto rest = tail_reader.ReadToEnd(
          topics.state, p, *scanned,
          [&](const kafka::Message& m) {
            if (m.offset < result.from && m.key == leases_only.lease_key) leases_only.Add(m, store);
          },
          left());
      if (!rest) return std::unexpected(rest.error());
    }
    restored.lease = leases_only.lease;
    restored.goes_back = leases_only.goes_back;
    restored.skipped += leases_only.skipped;
    spdlog::info(
        "[restore] state partition {}: lease records read again from offset {} to {} "
        "(the store's copy was behind its applied offset)",
        p, complete_at, result.from);
  }
  auto end = reader.ReadToEnd(
      topics.state, p, result.from, [&](const kafka::Message& m) { restored.Add(m, store); },
      left());
  if (!end) return std::unexpected(end.error());
  // The applied offset this restore records: the end of what it read committed, never into the
  // tail below. Past it only once the tail's maxima are committed again (the caller's to do and to
  // record, restore.h): until then every restore reads the tail again and finds them to rewrite.
  const int64_t committed_end = *end;
  // The store's copy takes only what committed (R3): the newest after the committed pass.
  const std::optional<allocator::FoundLease> committed_lease = restored.lease;
  // What the committed pass read: all the store may take before the tail's maxima are committed
  // again (RestoreResult::tail).
  struct Committed {
    std::map<std::string, state::TagRecord> tags;
    std::map<int64_t, state::WorkerRecord> workers;
    std::map<std::string, state::SpaceRecord> spaces;
    std::map<std::pair<std::string, uint64_t>, state::SectionRecord> sections;
    std::optional<int64_t> requests_offset;
  };
  std::optional<Committed> committed;
  if (*end < log_end->second) {
    committed = Committed{restored.tags, restored.workers, restored.spaces, restored.sections,
                          restored.requests_offset};
    // The tail behind a transaction without an outcome, read uncommitted: committed records, the
    // open transaction's (committed or not: unknown) and those of transactions aborted since.
    // Each is applied as if committed: tags and sections only raise their maximum (MergeRestored,
    // AddSection), the requests offset only moves forward, so an aborted record leaves a gap,
    // never an ID or value twice.
    result.open_transaction_at = marks->second;
    restored.in_tail = true;
    end = tail_reader.ReadToEnd(
        topics.state, p, *end, [&](const kafka::Message& m) { restored.Add(m, store); }, left());
    if (!end) return std::unexpected(end.error());
  }
  if (restored.store_error) return std::unexpected(*restored.store_error);
  if (restored.skipped > 0) {
    spdlog::error("[restore] state partition {}: {} unreadable records skipped", p,
                  restored.skipped);
  }
  // Before the records move into the store's batch below.
  if (result.open_transaction_at) {
    for (const auto& [tag, r] : restored.tags) {
      if (!restored.tail_keys.contains(state::TagKey(tag))) continue;
      result.floors.emplace_back(state::TagKey(tag), state::EncodeTag(r));
      result.tail.tags.push_back(r);
    }
    for (const auto& [key, r] : restored.sections) {
      const std::string k = state::SectionKey(key.first, key.second);
      if (!restored.tail_keys.contains(k)) continue;
      result.floors.emplace_back(k, state::EncodeSection(r));
      result.tail.sections.push_back(r);
    }
    for (const auto& [id, w] : restored.workers) {
      if (!restored.tail_keys.contains(state::WorkerKey(id))) continue;
      result.floors.emplace_back(state::WorkerKey(id), state::EncodeWorker(w));
      result.tail.workers.push_back(w);
    }
    for (const auto& [name, r] : restored.spaces) {
      if (!restored.tail_keys.contains(state::SpaceKey(name))) continue;
      result.floors.emplace_back(state::SpaceKey(name), state::EncodeSpace(r));
      result.tail.spaces.push_back(r);
    }
    if (restored.requests_offset && restored.tail_keys.contains(restored.requests_offset_key)) {
      result.floors.emplace_back(restored.requests_offset_key,
                                 wire::EncodeRequestsOffset(*restored.requests_offset));
      result.tail.values.emplace_back(RequestsOffsetKey(p), *restored.requests_offset);
    }
    if (restored.tail_had_lease && restored.lease) {
      // The newest record again, with the largest lease_ms of its generation (R3).
      state::LeaseRecord again = restored.lease->record;
      again.lease_ms = std::max(again.lease_ms, restored.lease->generation_lease_ms);
      result.floors.emplace_back(restored.lease_key, state::EncodeLease(again));
    }
  }
  state::Store::Batch batch;
  if (!committed) {
    committed =
        Committed{std::move(restored.tags), std::move(restored.workers), std::move(restored.spaces),
                  std::move(restored.sections), restored.requests_offset};
  }
  for (auto& [tag, r] : committed->tags) batch.tags.push_back(std::move(r));
  for (auto& [id, w] : committed->workers) batch.workers.push_back(std::move(w));
  for (auto& [name, r] : committed->spaces) batch.spaces.push_back(std::move(r));
  for (auto& [key, r] : committed->sections) batch.sections.push_back(std::move(r));
  batch.values.emplace_back(AppliedOffsetKey(p), committed_end);
  if (result.lease_copy_complete) {
    KeepLeaseCopy(batch, p, std::nullopt, committed_lease, committed_end);  // holds the copy
  }
  auto stored_offset = store.GetValue(RequestsOffsetKey(p));
  if (!stored_offset) return std::unexpected(stored_offset.error());
  if (*stored_offset &&
      (!restored.requests_offset || **stored_offset > *restored.requests_offset)) {
    restored.requests_offset = **stored_offset;
  }
  // The store takes the committed pass's requests offset (the tail's comes with `tail`).
  std::optional<int64_t> stored_requests = committed->requests_offset;
  if (*stored_offset && (!stored_requests || **stored_offset > *stored_requests)) {
    stored_requests = **stored_offset;
  }
  if (stored_requests) batch.values.emplace_back(RequestsOffsetKey(p), *stored_requests);
  if (auto w = store.Write(batch, /*sync=*/true); !w) {
    return std::unexpected(w.error());
  }
  result.requests_offset = restored.requests_offset;
  result.lease = restored.lease;
  result.tail_had_lease = restored.tail_had_lease;
  result.lease_goes_back = restored.goes_back;
  result.tail_leases_out_of_order = restored.tail_out_of_order;
  if (!restored.goes_back.empty()) {
    spdlog::error(
        "[restore] state partition {}: a committed lease record goes back ({}): only "
        "kleaf's allocators may write lease records (docs/operations.md, \"Kafka ACLs\")",
        p, restored.goes_back);
  }
  if (restored.tail_out_of_order > 0) {
    spdlog::info(
        "[restore] state partition {}: {} lease record(s) past the last stable offset "
        "of an older generation (a fenced owner's appends)",
        p, restored.tail_out_of_order);
  }
  result.records = restored.records;
  result.end = *end;
  return result;
}

}  // namespace kleaf::cluster
