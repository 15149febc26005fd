// The double buffer of one tag in segment mode: the segment IDs are drawn from, a standby segment
// fetched in advance, and Leaf's dynamic step.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/metrics.h"
#include "base/mutex.h"

namespace kleaf::gateway {

// Counters [start, end) handed to one caller. With a format (a tag with an obfuscated id_mode)
// the IDs are the format's images of the counters (SegmentBuffer::AppendIds); without one, the
// counters themselves. `format` is owned by the buffer the range came from and lives as long.
struct IdRange {
  int64_t start = 0;
  int64_t end = 0;
  const allocator::IdFormat* format = nullptr;
  int64_t size() const { return end - start; }
};

// One tag's buffer, owned by a shared_ptr (fetch callbacks hold weak references). Thread-safe:
// any number of threads draw IDs concurrently.
//
// Drawing is lock-free: the active segment lives in atomics guarded by a sequence lock (gen_ odd
// while a new segment is being installed). A drawer fetch_adds next_ and keeps the IDs only when
// the generation was even and unchanged around the draw, so an ID is returned at most once and
// only from a range this buffer was handed (docs/architecture.md, "I1: a range is handed to at
// most one buffer"). IDs drawn across a switch are dropped (a gap, never a duplicate). mu_
// serializes installs and guards the standby segment, fetch state and step.
//
// Two ways to draw one ID, with different orders (segment IDs only grow: docs/architecture.md,
// "Invariants"):
// - TryNext: one fetch_add on the shared counter per ID, so the IDs of a buffer increase in the
//   order the draws happen, whichever thread draws. Threads drawing at once contend on that one
//   cache line: two threads draw fewer IDs per second in total than one.
// - TryNextChunked (opt-in): the calling thread cuts a chunk of IDs from the active segment with
//   one fetch_add and hands them out from thread-local memory, so draws scale with threads. IDs
//   then increase per thread only: an ID drawn later on another thread may be smaller.
class SegmentBuffer : public std::enable_shared_from_this<SegmentBuffer> {
 public:
  // Asks the allocator for a segment of `step` IDs (0: the tag's own step).
  using FetchFn = std::function<void(int64_t step, allocator::Callback<allocator::Segment>)>;
  struct Options {
    int64_t max_step = 1000000;
    int preload_percent = 10;  // fetch the standby segment once this much of the active one is used
  };
  struct Snapshot {
    std::string tag;
    std::optional<allocator::Segment> active;  // with `next` the next ID to hand out
    int64_t next = 0;
    std::optional<allocator::Segment> standby;
    int64_t step = 0;
    int64_t min_step = 0;
    bool fetching = false;
    std::optional<Error> last_error;
    // Since the buffer was created: IDs counted by CountIssued, fetches completed (failed ones
    // too) and their total time from asking to the answer (TagHistory's rates and latencies).
    uint64_t issued = 0;
    uint64_t fetches = 0;
    int64_t fetch_ns = 0;
  };

  static std::shared_ptr<SegmentBuffer> Create(std::string tag, FetchFn fetch, Clock& clock,
                                               Options options);

  // Never blocks: the next ID of the active segment (mapped through its format), or nullopt when
  // it is used up (a switch to the standby segment or a fetch is then needed: use TryTake or
  // Take) or its format refuses.
  std::optional<int64_t> TryNext();
  // Never blocks: like TryNext, for many threads drawing from one buffer at once. The first draw of
  // a thread cuts a chunk of 1 ID from the active segment; each chunk the thread uses up makes its
  // next one twice as large, up to kMaxThreadChunk and 1/16 of the segment. IDs increase per
  // calling thread (among its TryNextChunked draws), not across threads. A chunk is dropped, the
  // rest of it a gap, when the buffer switches segments, is drained, or another buffer takes the
  // thread's slot (kThreadChunkSlots per thread, by buffer); the next chunk after a drop is half as
  // large. Threads keep no pointer to the buffer: only its serial number, never reused.
  std::optional<int64_t> TryNextChunked();
  static constexpr int64_t kMaxThreadChunk = 1024;
  static constexpr int kThreadChunkSlots = 16;
  // Never blocks on a fetch: appends up to `count` IDs to `out`, switching to the standby segment
  // when the active one runs out, and returns how many it appended. Starts a fetch when needed.
  int64_t TryTake(int64_t count, std::vector<IdRange>& out);
  // Like TryTake but waits until `deadline` for fetches to bring `count` IDs. On timeout
  // kUnavailable; on a failed fetch that fetch's error (e.g. kNotFound for an unknown tag).
  [[nodiscard]] Result<std::vector<IdRange>> Take(int64_t count,
                                                  std::chrono::steady_clock::time_point deadline);

  // Appends the IDs of `ranges` (drawn from this buffer) to `out`: the counters of plain ranges,
  // the format's images of the others at this buffer's clock. On a format's refusal (an
  // obfuscated_time clock before its tag's switch, say) its error, and the drawn IDs are a gap.
  [[nodiscard]] Result<void> AppendIds(const std::vector<IdRange>& ranges,
                                       std::vector<int64_t>& out) const;

  // Graceful shutdown: stops this buffer for good (later draws find nothing and start no fetch)
  // and returns the IDs it holds but never handed out: the rest of the active segment and the
  // standby segment, ascending. A draw racing the drain keeps its IDs; the ranges exclude them.
  // Only plain segments are returned: the rests of obfuscated ones are a gap (their format, with
  // its key, is not kept on the gateway's disk), and a counter gap there is invisible anyway.
  std::vector<IdRange> Drain();
  // Startup, before any draw: installs `ranges` (the rests kept by this node's previous run,
  // ascending) as the active and the standby segment. More than two are dropped (a gap).
  void Seed(const std::vector<IdRange>& ranges);

  Snapshot snapshot() const;
  const std::string& tag() const { return tag_; }

  // Adds `n` to the tag's kleaf_ids_issued_total{mode="segment"}; whoever hands IDs to a client
  // counts them here. The series is looked up once, at the first IDs issued (so made-up tags,
  // which never get a segment, create none).
  void CountIssued(int64_t n);

  // Tests only: called inside the lock-free draw, between taking IDs and validating them, to force
  // an install into that window. Set before any other thread uses the buffer.
  void SetDrawHookForTest(std::function<void()> hook) { draw_hook_ = std::move(hook); }

 private:
  SegmentBuffer(std::string tag, FetchFn fetch, Clock& clock, Options options);

  // A thread's chunk of one buffer's IDs: [next, end) are its own (a Draw validated them).
  struct ThreadChunk {
    uint64_t serial = 0;  // the buffer's serial_; 0: an empty slot
    uint64_t epoch = 0;   // the buffer's epoch_ before the chunk was cut
    int64_t next = 0;
    int64_t end = 0;
    int64_t size = 0;  // the size asked for this chunk: the next one doubles or halves it
  };

  // Draws up to `count` IDs from the active segment without locking; 0 when it is used up or a
  // switch raced the draw.
  int64_t Draw(int64_t count, int64_t* start, const allocator::IdFormat** format);
  // TryNextChunked's slow path: cuts a new chunk into the calling thread's slot `chunk`.
  std::optional<int64_t> NextFromNewChunk(ThreadChunk& chunk);
  void Install(const allocator::Segment& s) KLEAF_REQUIRES(mu_);
  // The buffer's own copy of `format` (null for plain), kept in formats_.
  const allocator::IdFormat* InternFormatLocked(
      const std::shared_ptr<const allocator::IdFormat>& format) KLEAF_REQUIRES(mu_);
  bool ActiveUsedUpLocked() const KLEAF_REQUIRES(mu_);
  // Decides whether a fetch must start and with which step; the caller issues it after
  // unlocking with IssueFetch. `demand`: IDs a waiting request still needs; the step is at least
  // that (up to max_step), so a big batch does not wait for many small segments.
  std::optional<int64_t> PrepareFetchLocked(int64_t demand = 0) KLEAF_REQUIRES(mu_);
  void IssueFetch(int64_t step);
  void OnFetched(Result<allocator::Segment> result);
  // Switches to the standby segment when the active one is used up; starts a fetch when neither
  // has IDs. True when drawing again may succeed.
  bool Advance();
  void StartPreload();

  const uint64_t serial_;  // unique in the process, never reused: names this buffer in thread slots
  const std::string tag_;
  const FetchFn fetch_;
  Clock& clock_;
  const Options options_;
  std::function<void()> draw_hook_;
  std::atomic<metrics::Counter*> issued_{nullptr};
  std::atomic<uint64_t> issued_count_{0};  // this buffer's share of issued_, for snapshots

  // Active segment, read lock-free under the sequence lock gen_.
  alignas(64) std::atomic<uint64_t> gen_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> end_{0};
  std::atomic<int64_t> preload_at_{0};
  std::atomic<bool> preload_started_{true};
  std::atomic<int64_t> preload_not_before_ns_{0};  // after a failed fetch, preloads pause a moment
  std::atomic<const allocator::IdFormat*> format_{nullptr};  // the active segment's; in formats_

  // Bumped after each install and by Drain: the chunks threads cut before are dropped. On a line of
  // its own, written only then, so the chunked draws' check reads it from their own cache.
  alignas(64) std::atomic<uint64_t> epoch_{1};
  std::atomic<int64_t> chunk_cap_{1};  // 1/16 of the active segment's size (at least 1)

  alignas(64) mutable Mutex mu_;
  CondVar cv_;
  std::optional<allocator::Segment> active_ KLEAF_GUARDED_BY(mu_);  // for snapshots
  std::optional<allocator::Segment> standby_ KLEAF_GUARDED_BY(mu_);
  bool fetching_ KLEAF_GUARDED_BY(mu_) = false;
  uint64_t completions_ KLEAF_GUARDED_BY(mu_) = 0;         // fetches completed so far
  std::optional<Error> last_error_ KLEAF_GUARDED_BY(mu_);  // of the last fetch, if it failed
  int64_t step_ KLEAF_GUARDED_BY(mu_) = 0;                 // size of the last segment fetched
  int64_t min_step_ KLEAF_GUARDED_BY(mu_) = 0;             // the tag's configured step
  int64_t last_fetch_mono_ns_ KLEAF_GUARDED_BY(mu_) = -1;
  int64_t fetch_asked_mono_ns_ KLEAF_GUARDED_BY(mu_) = 0;  // when the fetch in flight started
  int64_t fetch_ns_total_ KLEAF_GUARDED_BY(mu_) = 0;       // of the completions_ so far
  bool drained_ KLEAF_GUARDED_BY(mu_) = false;  // Drain() ran; no more fetches
  // Every format a segment of this buffer had (a tag has at most one besides plain, in
  // practice): kept for the buffer's life so that IdRange::format stays valid.
  std::vector<std::shared_ptr<const allocator::IdFormat>> formats_ KLEAF_GUARDED_BY(mu_);
};

}  // namespace kleaf::gateway
