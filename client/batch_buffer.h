// The claimed-batch buffer of BatchConsumer (internal, not installed): batches whose offsets are
// committed, per (tag, mode) key, handed out ID by ID, with the policy that decides when the
// fetch thread should claim more and which batch to give up when a waiter needs room.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kleaf/batch.h"

namespace kleaf::client {

struct BatchKey {
  std::string tag;
  IdBatch::Mode mode = IdBatch::Mode::kSegment;
  auto operator<=>(const BatchKey&) const = default;
};

// Not thread-safe: BatchConsumer guards it with its mutex. Every batch in it is claimed (its
// offset committed), so it belongs to this process alone; dropping one only leaves a gap.
class BatchBuffer {
 public:
  struct Limits {
    int max_batches = 16;     // claimed batches held at most, all keys together
    int prefetch_batches = 1;  // batches claimed ahead of the current one of an active key
  };
  explicit BatchBuffer(Limits limits) : limits_(limits) {}

  // A claimed batch (non-empty).
  void Add(IdBatch batch);
  // The next ID of `key`, if one is buffered. Marks the key active (it gets prefetched).
  std::optional<int64_t> Next(const BatchKey& key);
  // Up to `n` IDs of `key`, appended to `out`; how many were appended. Marks the key active.
  // Take: a 64-bit key's IDs; TakeText: any key's IDs as text (IdBatch::text_at).
  int64_t Take(const BatchKey& key, int64_t n, std::vector<int64_t>& out);
  int64_t TakeText(const BatchKey& key, int64_t n, std::vector<std::string>& out);
  // The rest of the oldest claimed batch, any key. Marks generic use (prefetched too).
  std::optional<IdBatch> TakeBatch();

  // Callers blocked on a key (or on any batch): eviction never picks their keys.
  void AddWaiter(const BatchKey& key, int delta);
  void AddGenericWaiter(int delta);

  // Whether the fetch thread should claim another batch now: someone waits and nothing of their
  // key (any key, for a generic waiter) is buffered, or an active key (or generic use) has fewer
  // than 1 + prefetch_batches batches and there is room.
  bool WantsMore() const;
  bool Full() const { return total_ >= limits_.max_batches; }
  // How many more batches it wants now: up to the prefetch depth of the key (or generic use)
  // that is shortest of it, within the bound; 0 if none.
  int Room() const;
  // Makes room for a waiter with nothing of its key buffered by dropping the newest batch of the
  // key with the most batches that nobody waits for. False if there is no such waiter (a waiter
  // whose batch came in is served when it wakes) or no such batch.
  bool EvictForWaiter();
  // A waiter whose key (any key, for a generic one) has nothing buffered.
  bool StarvedWaiter() const;

  int total_batches() const { return total_; }
  int64_t buffered_ids(const BatchKey& key) const;
  int64_t dropped_batches() const { return dropped_; }

 private:
  struct Entry {
    uint64_t seq = 0;  // claim order
    IdBatch batch;
    int64_t used = 0;  // IDs of `batch` already handed out
  };
  void PopFront(std::deque<Entry>& q, const BatchKey& key);
  // Take and TakeText: `append(batch, i)` hands out ID i of a batch.
  template <typename Append>
  int64_t TakeWith(const BatchKey& key, int64_t n, Append append);

  Limits limits_;
  std::map<BatchKey, std::deque<Entry>> batches_;
  std::set<BatchKey> active_;
  std::map<BatchKey, int> waiters_;
  int generic_waiters_ = 0;
  bool generic_active_ = false;
  int total_ = 0;
  uint64_t next_seq_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace kleaf::client
