// A partition's state restored from the state topic into the store: what an allocator does after
// it fenced the previous owner and before it serves (docs/architecture.md, I1).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocator/lease.h"
#include "base/error.h"
#include "cluster/topics.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::cluster {

// A record restored from the state topic, merged with what the store already holds: max_id never
// goes down (a record of a recreated or truncated topic cannot undo reservations the store saw).
state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming);

struct RestoreResult {
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;  // next offset to apply (recorded as applied but past an open transaction)
  // The next offset of requests partition `p` to serve, as the last committed batch recorded it
  // (RequestsOffsetKey), or nullopt when no batch of this version was ever committed on p.
  std::optional<int64_t> requests_offset;
  // Set when a transaction without an outcome held the last stable offset below the log's end
  // (docs/architecture.md, "A transaction without an outcome"): the offset where it began. The
  // records from there to `end` were read uncommitted and applied as if committed. The store's
  // applied offset is left where the committed read ended, at or below the tail: the caller
  // records `end` as applied (AppliedOffsetKey) only once `floors` are committed again, so a
  // restore after a failed rewrite reads the tail again and rewrites the same maxima.
  std::optional<int64_t> open_transaction_at;
  // Those records, merged with what was read before them and with the store (tags and sections
  // keep their highest maximum; the requests offset): key and value to write again in a committed
  // transaction, so that the floors they set survive an abort of the open transaction.
  std::vector<std::pair<std::string, std::string>> floors;
  // The same records for the store. RestorePartition's own write takes only what it read
  // committed: a section maximum of the tail in the store, its transaction then aborted, would be
  // answered as a `current` that a later owner's `next` goes below (I5). The caller writes `tail`
  // once `floors` are committed again (`kleaf state replay`, which commits nothing, at once).
  state::Store::Batch tail;

  // Sequence lease records (docs/architecture.md, "I5 with a lease", R3). `lease`: the newest of
  // p's lease records in R3's order among those read (committed, in the tail) and the store's
  // copy, carrying the largest lease_ms of its generation. When the tail held lease records,
  // `floors` holds `lease` again (its lease_ms that largest one), so an abort cannot take it away,
  // and the caller's write after the rewrite keeps it in the store's copy (LeaseCopyKey).
  std::optional<allocator::FoundLease> lease;
  bool tail_had_lease = false;
  // A committed lease record of a lower generation after a higher one (A4: this protocol never
  // commits one): the offsets, for the refusal of p's sequences. Empty when none.
  std::string lease_goes_back;
  // Lease records past the last stable offset of a lower generation than one read before them: a
  // fenced producer's appends (A3), expected, counted.
  int64_t tail_leases_out_of_order = 0;
  // Whether the store's lease copy was behind its applied offset (written by a version that does
  // not keep lease records, or none yet), so that this restore read p's lease records again from
  // the copy's completeness point (from the start when it had none).
  bool lease_copy_rebuilt = false;
  // False when that reading stopped below the applied offset at a transaction without an outcome
  // (the rest was read uncommitted for the wait, not kept): the copy is then not complete, and no
  // write may record a completeness point for p until a later restore completes it.
  bool lease_copy_complete = true;
};

// The store's copy of partition p's newest committed lease record (R3), as text, and its
// completeness point: the applied offset (AppliedOffsetKey) up to which it holds the newest of the
// committed lease records. Every write that moves the applied offset moves the point with it.
std::string LeaseCopyKey(int32_t p);
std::string LeaseCompleteKey(int32_t p);
std::string EncodeLeaseCopy(const allocator::FoundLease& lease);
[[nodiscard]] Result<allocator::FoundLease> DecodeLeaseCopy(std::string_view text);
// `batch` also stores `lease` (merged into `kept`, the copy as read) when set, and the completeness
// point `applied`.
void KeepLeaseCopy(state::Store::Batch& batch, int32_t p,
                   const std::optional<allocator::FoundLease>& kept,
                   const std::optional<allocator::FoundLease>& lease, int64_t applied);

// Applies state-topic partition `p` from the store's applied offset up to the end of its log into
// the store (with MergeRestored), and records the new applied offset and the requests offset the
// restored records carry. Up to the last stable offset through `reader` (read_committed); past it,
// where a transaction without an outcome holds it below the log's end, through `tail_reader`
// (isolation.level=read_uncommitted): every record there is applied as if it was committed, which
// only ever raises a maximum (a record of an aborted transaction leaves a gap, never a duplicate).
// The applied offset it records stops where the committed read ended: past the tail only after
// the caller committed `floors` again (RestoreResult::open_transaction_at).
[[nodiscard]] Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader,
                                                     kafka::PartitionReader& tail_reader,
                                                     state::Store& store,
                                                     const ClusterTopics& topics, int32_t p,
                                                     std::chrono::milliseconds timeout);

// The properties of RestorePartition's tail reader: `props` with isolation.level=read_uncommitted.
kafka::Properties TailReaderProperties(const kafka::Properties& props);

// Name of the store value holding the next state-topic offset to apply for partition `p`.
std::string AppliedOffsetKey(int32_t p);

// The consumed position of requests partition `p`: every batch's transaction puts a record with
// this key (in the state topic, partition p) and the next request offset as decimal text beside
// its state records and replies, so the position commits exactly with what it answered. The store
// keeps the last one under the same name. Other readers of the state topic skip the key.
std::string RequestsOffsetKey(int32_t p);

}  // namespace kleaf::cluster
