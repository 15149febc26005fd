// SegmentBuffer under many threads: no duplicate, no ID outside a granted range, no lost wake-up,
// preload at the configured use, Leaf's dynamic step.
#include "gateway/segment_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/worker_pool.h"

namespace kleaf::gateway {
namespace {

using allocator::Callback;
using allocator::Segment;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Hands out consecutive ranges of one tag, like an allocator would, and records every request.
// Completion is inline, on a worker thread, or held until Release().
class FakeSource {
 public:
  enum class Mode { kInline, kThreaded, kHeld };
  explicit FakeSource(Mode mode, int64_t min_step = 10) : mode_(mode), min_step_(min_step) {}

  SegmentBuffer::FetchFn Fn() {
    return [this](int64_t step, Callback<Segment> done) { Fetch(step, std::move(done)); };
  }
  void Fetch(int64_t step, Callback<Segment> done) {
    Result<Segment> seg;
    {
      std::lock_guard lock(mu_);
      requested_.push_back(step);
      if (fail_) {
        seg = std::unexpected(*fail_);
      } else {
        int64_t size = step == 0 ? min_step_ : step;
        seg = Segment{"t", next_, next_ + size, min_step_};
        granted_.push_back(*seg);
        next_ += size + gap_;
      }
      if (mode_ == Mode::kHeld) {
        held_.emplace_back(std::move(done), std::move(seg));
        return;
      }
    }
    if (mode_ == Mode::kInline) return done(std::move(seg));
    pool_.Post([done = std::move(done), seg = std::move(seg)]() mutable { done(std::move(seg)); });
  }
  void ReleaseAll() {
    std::deque<std::pair<Callback<Segment>, Result<Segment>>> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto& [done, seg] : held) done(std::move(seg));
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  std::vector<int64_t> requested() {
    std::lock_guard lock(mu_);
    return requested_;
  }
  std::vector<Segment> granted() {
    std::lock_guard lock(mu_);
    return granted_;
  }
  void FailWith(Error e) {
    std::lock_guard lock(mu_);
    fail_ = std::move(e);
  }
  void set_gap(int64_t gap) { gap_ = gap; }
  void Stop() { pool_.Stop(); }

 private:
  Mode mode_;
  int64_t min_step_;
  int64_t gap_ = 0;  // IDs between ranges that belong to someone else
  std::mutex mu_;
  int64_t next_ = 1;
  std::vector<int64_t> requested_;
  std::vector<Segment> granted_;
  std::optional<Error> fail_;
  std::deque<std::pair<Callback<Segment>, Result<Segment>>> held_;
  WorkerPool pool_{1, "fake-source"};
};

bool InGrantedRange(int64_t id, const std::vector<Segment>& granted) {
  for (const auto& s : granted) {
    if (id >= s.start && id < s.end) return true;
  }
  return false;
}

// Runs `threads` threads on `buffer` until each has seen `per_thread` IDs: the first `drawers` of
// them draw one ID at a time with `draw`, the others take batches of 3 ranges (waiting up to 2 s).
// What each thread saw, in order.
std::vector<std::vector<int64_t>> DrawConcurrently(
    SegmentBuffer& buffer, int threads, int per_thread, int drawers,
    const std::function<std::optional<int64_t>()>& draw) {
  std::vector<std::vector<int64_t>> seen(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      auto& mine = seen[t];
      while (static_cast<int>(mine.size()) < per_thread) {
        if (t < drawers) {
          if (auto id = draw()) mine.push_back(*id);
        } else {
          auto r = buffer.Take(3, steady_clock::now() + milliseconds(2000));
          ASSERT_TRUE(r.has_value()) << r.error().message;
          for (auto range : *r) {
            for (int64_t id = range.start; id < range.end; ++id) mine.push_back(id);
          }
        }
      }
    });
  }
  for (auto& t : running) t.join();
  return seen;
}

TEST(SegmentBufferTest, FirstDrawStartsAFetchAndInlineFetchServesAtOnce) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {});
  auto first = buffer->TryNext();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*buffer->TryNext(), 2);
  ASSERT_FALSE(source.requested().empty());
  EXPECT_EQ(source.requested().front(), 0) << "the first fetch asks for the tag's own step";
}

TEST(SegmentBufferTest, EmptyBufferNeverBlocksTryTake) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {});
  std::vector<IdRange> out;
  EXPECT_EQ(buffer->TryTake(5, out), 0);
  EXPECT_FALSE(buffer->TryNext().has_value());
  EXPECT_EQ(source.held(), 1u) << "exactly one fetch in flight, however often we ask";
  source.ReleaseAll();
  EXPECT_EQ(buffer->TryTake(5, out), 5);
  EXPECT_EQ(out.front().start, 1);
}

TEST(SegmentBufferTest, PreloadsStandbyAtConfiguredUseAndSwitchesWithoutWaiting) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 1000, .preload_percent = 10});
  std::vector<IdRange> out;
  buffer->TryTake(1, out);
  source.ReleaseAll();  // active = [1, 101)
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(buffer->TryNext().has_value());
  EXPECT_EQ(source.held(), 0u) << "10 of 100 used: not past the preload point yet";
  ASSERT_TRUE(buffer->TryNext().has_value());
  EXPECT_EQ(source.held(), 1u) << "past 10%: the standby segment is being fetched";
  source.ReleaseAll();
  auto snap = buffer->snapshot();
  ASSERT_TRUE(snap.standby.has_value());
  // Use up the active segment; the next draw switches to the standby without any fetch.
  out.clear();
  EXPECT_EQ(buffer->TryTake(89, out), 89);
  auto next = buffer->TryNext();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, snap.standby->start);
}

TEST(SegmentBufferTest, ManyThreadsNeverSeeDuplicatesOrIdsOutsideGrantedRanges) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kThreaded, /*min_step=*/7);
  source.set_gap(3);  // ranges are not contiguous: an ID in a gap would be someone else's
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 50, .preload_percent = 10});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  // Four threads draw one ID at a time, four take batches beside them.
  auto seen = DrawConcurrently(*buffer, kThreads, kPerThread, /*drawers=*/4,
                               [&] { return buffer->TryNext(); });
  source.Stop();
  auto granted = source.granted();
  std::unordered_set<int64_t> all;
  for (const auto& mine : seen) {
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end())) << "each thread sees increasing IDs";
    for (int64_t id : mine) {
      ASSERT_TRUE(all.insert(id).second) << "duplicate ID " << id;
      ASSERT_TRUE(InGrantedRange(id, granted)) << "ID " << id << " was never granted";
    }
  }
  EXPECT_GT(granted.size(), 100u) << "the test must exercise many switches";
}

// A drawer that took IDs from a used-up segment just as the next segment is installed must not
// keep them: they are overshoot past the old end, possibly inside the new range or in a gap.
TEST(SegmentBufferTest, DrawRacingAnInstallNeverReturnsAnUngrantedOrDuplicateId) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld, /*min_step=*/10);
  source.set_gap(3);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 10, .preload_percent = 50});
  std::vector<IdRange> out;
  ASSERT_EQ(buffer->TryTake(1, out), 0);
  source.ReleaseAll();  // active [1, 11)
  ASSERT_EQ(buffer->TryTake(10, out), 10);
  ASSERT_EQ(buffer->snapshot().next, 11) << "the active segment is used up";
  ASSERT_EQ(source.held(), 1u) << "the standby fetch is in flight";

  std::mutex mu;
  std::condition_variable cv;
  bool parked = false, go = false;
  std::thread::id racer_id;
  buffer->SetDrawHookForTest([&] {
    std::unique_lock lock(mu);
    if (std::this_thread::get_id() != racer_id) return;
    if (parked) return;  // park only the first draw
    parked = true;
    cv.notify_all();
    cv.wait(lock, [&] { return go; });
  });
  std::optional<int64_t> racer_got;
  std::unique_lock start_lock(mu);  // the racer's first draw waits until racer_id is set
  std::thread racer([&] { racer_got = buffer->TryNext(); });
  racer_id = racer.get_id();
  start_lock.unlock();
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return parked; });
  }
  source.ReleaseAll();  // installs [14, 24) while the racer holds an overshoot draw of the old one
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_all();
  racer.join();
  std::vector<IdRange> rest;
  buffer->TryTake(5, rest);
  auto granted = source.granted();
  std::unordered_set<int64_t> all;
  if (racer_got) {
    EXPECT_TRUE(InGrantedRange(*racer_got, granted)) << "ID " << *racer_got << " was never granted";
    all.insert(*racer_got);
  }
  for (auto r : rest) {
    for (int64_t id = r.start; id < r.end; ++id) EXPECT_TRUE(all.insert(id).second) << "duplicate " << id;
  }
}

TEST(SegmentBufferTest, WaitersWakeWhenTheSegmentArrives) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld, /*min_step=*/1000);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {});
  constexpr int kWaiters = 16;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto r = buffer->Take(10, steady_clock::now() + std::chrono::seconds(30));
      EXPECT_TRUE(r.has_value());
      done.fetch_add(1);
    });
  }
  // Release once the fetch is in flight; every waiter must then finish long before its deadline.
  while (source.held() == 0) std::this_thread::yield();
  auto released = steady_clock::now();
  source.ReleaseAll();
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), kWaiters);
  EXPECT_LT(steady_clock::now() - released, std::chrono::seconds(10)) << "a waiter missed its wake-up";
}

TEST(SegmentBufferTest, TakeTimesOutWithUnavailableWhenNoSegmentComes) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {});
  auto r = buffer->Take(1, steady_clock::now() + milliseconds(20));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kUnavailable);
  source.ReleaseAll();
  EXPECT_TRUE(buffer->TryNext().has_value()) << "the late segment is still used";
}

TEST(SegmentBufferTest, FailedFetchIsReportedToTheWaiter) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kThreaded);
  source.FailWith(Error{Code::kNotFound, "unknown tag 't'"});
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {});
  auto r = buffer->Take(1, steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kNotFound);
  source.Stop();
}

TEST(SegmentBufferTest, FailedPreloadIsRetriedAfterAPauseWhileTheActiveSegmentServes) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 100, .preload_percent = 10});
  std::vector<IdRange> out;
  buffer->TryTake(1, out);
  source.ReleaseAll();  // active [1, 101)
  source.FailWith(Error{Code::kUnavailable, "allocators away"});
  ASSERT_EQ(buffer->TryTake(20, out), 20);  // past 10%: the preload starts, and fails
  ASSERT_EQ(source.held(), 1u);
  source.ReleaseAll();
  EXPECT_EQ(buffer->TryTake(5, out), 5) << "the active segment keeps serving";
  EXPECT_EQ(source.held(), 0u) << "no retry during the pause";
  clock.Advance(std::chrono::milliseconds(250));
  EXPECT_EQ(buffer->TryTake(1, out), 1);
  EXPECT_EQ(source.held(), 1u) << "after the pause a draw starts the preload again";
}

TEST(SegmentBufferTest, DynamicStepDoublesWhenFastAndHalvesWhenSlow) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 800, .preload_percent = 10});
  auto use_all = [&] {
    auto snap = buffer->snapshot();
    std::vector<IdRange> out;
    // Draw the whole active segment plus one ID, which switches to the standby.
    buffer->TryTake(snap.active->end - snap.next + 1, out);
  };
  buffer->TryNext();  // first segment: the tag's step
  for (int i = 0; i < 5; ++i) {
    clock.Advance(std::chrono::minutes(1));  // segments last a minute: < 15 min
    use_all();
  }
  auto steps = source.requested();
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps[0], 0);
  EXPECT_EQ(steps[1], 200);
  EXPECT_EQ(steps[2], 400);
  EXPECT_EQ(steps[3], 800);
  EXPECT_EQ(steps.back(), 800) << "capped at max_step";
  size_t before = steps.size();
  for (int i = 0; i < 3; ++i) {
    clock.Advance(std::chrono::minutes(45));  // > 30 min: halve
    use_all();
  }
  steps = source.requested();
  ASSERT_GT(steps.size(), before);
  EXPECT_LT(steps.back(), 800);
  EXPECT_GE(steps.back(), 100) << "never below the tag's step";
}


TEST(SegmentBufferTest, DrainReturnsTheUnusedRestAndStandbyAndStopsServing) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 1000, .preload_percent = 10});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(buffer->TryNext().has_value());  // 1..20, standby loaded
  ASSERT_TRUE(buffer->snapshot().standby.has_value());
  auto rest = buffer->Drain();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].start, 21);
  EXPECT_EQ(rest[0].end, 101);
  EXPECT_EQ(rest[1].start, buffer->snapshot().active->end);
  const size_t fetches = source.requested().size();
  EXPECT_FALSE(buffer->TryNext().has_value()) << "a drained buffer hands out nothing";
  EXPECT_EQ(source.requested().size(), fetches) << "and starts no fetch";
  auto late = buffer->Take(1, steady_clock::now() + milliseconds(10));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, Code::kUnavailable);
}

TEST(SegmentBufferTest, DrawRacingTheDrainKeepsItsIdsAndTheRestExcludesThem) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 1000, .preload_percent = 100});
  ASSERT_EQ(*buffer->TryNext(), 1);
  std::vector<IdRange> rest;
  bool drained = false;
  buffer->SetDrawHookForTest([&] {
    if (!drained) {
      drained = true;
      rest = buffer->Drain();  // between the draw's fetch_add and its validation
    }
  });
  std::vector<IdRange> got;
  EXPECT_EQ(buffer->TryTake(5, got), 5);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].start, 2);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].start, 7) << "the rest starts after the IDs the racing draw kept";
  EXPECT_EQ(rest[0].end, 101);
}

TEST(SegmentBufferTest, SeededRestsAreServedFirstThenTheTagsOwnStep) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/100);
  auto buffer = SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 1000, .preload_percent = 50});
  buffer->Seed({{5000, 5004}, {6000, 6002}});
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*buffer->TryNext());
  EXPECT_EQ(ids, (std::vector<int64_t>{5000, 5001, 5002, 5003, 6000, 6001}));
  EXPECT_TRUE(source.requested().empty() || source.requested().front() == 0)
      << "the first fetch after seeding asks for the tag's own step";
  EXPECT_EQ(*buffer->TryNext(), 1) << "then IDs of a new segment";
}

// Chunked draws (TryNextChunked) ----------------------------------------------------------------

// Spins until `buffer` has no fetch in flight; false after 10 s.
bool NoFetchInFlight(SegmentBuffer& buffer) {
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (buffer.snapshot().fetching) {
    if (steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// The maximal runs of IDs of `s` that are in neither `accounted` set: the gaps of one segment.
std::vector<IdRange> MissingRuns(const Segment& s, const std::unordered_set<int64_t>& accounted) {
  std::vector<IdRange> runs;
  for (int64_t id = s.start; id < s.end; ++id) {
    if (accounted.contains(id)) continue;
    if (!runs.empty() && runs.back().end == id) {
      ++runs.back().end;
    } else {
      runs.push_back({id, id + 1});
    }
  }
  return runs;
}

TEST(SegmentBufferTest, ChunkedDrawsOfManyThreadsAcrossSwitchesLeaveOnlyChunkTailsAsGaps) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kThreaded, /*min_step=*/200);
  source.set_gap(3);  // an ID in a gap between ranges would be someone else's
  auto buffer =
      SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 2000, .preload_percent = 10});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 30000;
  // Six threads draw chunks, two take batches beside them.
  auto seen = DrawConcurrently(*buffer, kThreads, kPerThread, /*drawers=*/6,
                               [&] { return buffer->TryNextChunked(); });
  ASSERT_TRUE(NoFetchInFlight(*buffer));  // so every granted range reached the buffer
  const auto rest = buffer->Drain();
  source.Stop();
  const auto granted = source.granted();
  ASSERT_GT(granted.size(), 20u) << "the test must exercise many switches";

  std::unordered_set<int64_t> issued;
  for (const auto& mine : seen) {
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end())) << "IDs increase per thread";
    for (int64_t id : mine) {
      ASSERT_TRUE(issued.insert(id).second) << "duplicate ID " << id;
      ASSERT_TRUE(InGrantedRange(id, granted)) << "ID " << id << " was never granted";
    }
  }
  std::unordered_set<int64_t> accounted = issued;
  for (auto r : rest) {
    for (int64_t id = r.start; id < r.end; ++id) {
      ASSERT_TRUE(accounted.insert(id).second) << "the drained rest holds issued ID " << id;
    }
  }
  // What is neither issued nor in the rest is a gap: per segment at most one dropped chunk tail
  // per drawing thread and the overshoot of draws that raced an install (at most two per thread),
  // each no longer than a chunk.
  size_t gaps = 0;
  for (const auto& s : granted) {
    const auto runs = MissingRuns(s, accounted);
    EXPECT_LE(runs.size(), 3u * kThreads) << "segment [" << s.start << ", " << s.end << ")";
    for (auto r : runs) {
      EXPECT_LE(r.size(), SegmentBuffer::kMaxThreadChunk)
          << "gap [" << r.start << ", " << r.end << ") longer than any chunk";
      gaps += r.size();
    }
  }
  int64_t granted_ids = 0;
  for (const auto& s : granted) granted_ids += s.size();
  EXPECT_EQ(static_cast<int64_t>(accounted.size() + gaps), granted_ids);
}

TEST(SegmentBufferTest, ChunkLeftoverIsDroppedWhenTheSegmentSwitches) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/2000);
  auto buffer =
      SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 2000, .preload_percent = 90});
  // Chunks of 1, 2, 4, 8, 16 and 32: 63 IDs drawn, then the 64th starts a chunk of 64.
  for (int64_t want = 1; want <= 64; ++want) ASSERT_EQ(*buffer->TryNextChunked(), want);
  const int64_t chunk_end = buffer->snapshot().next;
  ASSERT_EQ(chunk_end, 128) << "this thread holds [65, 128) of the active segment [1, 2001)";
  std::vector<IdRange> out;
  ASSERT_EQ(buffer->TryTake(2001 - chunk_end, out), 2001 - chunk_end);  // uses the segment up
  std::vector<IdRange> one;
  ASSERT_EQ(buffer->TryTake(1, one), 1);  // switches to the standby segment [2001, 4001)
  ASSERT_EQ(one.front().start, 2001);
  const auto next = buffer->TryNextChunked();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, 2002) << "drawn from the new segment, not from the dropped chunk";
  for (int i = 0; i < 200; ++i) {
    const int64_t id = *buffer->TryNextChunked();
    EXPECT_GT(id, 2002) << "the rest of the old chunk never comes back";
  }
}

TEST(SegmentBufferTest, DrainDropsTheChunksThreadsHoldAndTheRestExcludesThem) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kInline, /*min_step=*/2000);
  auto buffer =
      SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 2000, .preload_percent = 100});
  for (int64_t want = 1; want <= 64; ++want) ASSERT_EQ(*buffer->TryNextChunked(), want);
  const auto rest = buffer->Drain();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].start, 128) << "this thread's chunk [65, 128) is not in the kept rest";
  EXPECT_EQ(rest[0].end, 2001);
  EXPECT_FALSE(buffer->TryNextChunked().has_value()) << "a drained buffer hands out nothing";
}

// A thread parked inside a chunk's draw while the next segment is installed: the overshoot it took
// from the used-up segment is dropped, and what it draws next is its own.
TEST(SegmentBufferTest, ChunkDrawRacingAnInstallNeverReturnsAnUngrantedOrDuplicateId) {
  ManualClock clock(1'700'000'000'000);
  FakeSource source(FakeSource::Mode::kHeld, /*min_step=*/64);
  source.set_gap(3);
  auto buffer =
      SegmentBuffer::Create("t", source.Fn(), clock, {.max_step = 64, .preload_percent = 50});
  std::vector<IdRange> out;
  ASSERT_EQ(buffer->TryTake(1, out), 0);
  source.ReleaseAll();  // active [1, 65)

  std::mutex mu;
  std::condition_variable cv;
  bool used_up = false, parked = false, go = false;
  std::thread::id racer_id;
  buffer->SetDrawHookForTest([&] {
    std::unique_lock lock(mu);
    if (std::this_thread::get_id() != racer_id || !used_up || parked) return;
    parked = true;  // park the racer's first draw after the segment is used up
    cv.notify_all();
    cv.wait(lock, [&] { return go; });
  });
  std::vector<int64_t> racer_ids;
  bool racer_drew = false;
  std::unique_lock start_lock(mu);  // the racer's first draw waits until racer_id is set
  std::thread racer([&] {
    for (int i = 0; i < 7; ++i) racer_ids.push_back(*buffer->TryNextChunked());  // chunks 1, 2, 4
    {
      std::unique_lock lock(mu);
      racer_drew = true;
      cv.notify_all();
      cv.wait(lock, [&] { return used_up; });
    }
    for (int i = 0; i < 20; ++i) {
      if (auto id = buffer->TryNextChunked()) racer_ids.push_back(*id);
    }
  });
  racer_id = racer.get_id();
  cv.wait(start_lock, [&] { return racer_drew; });
  start_lock.unlock();
  ASSERT_EQ(buffer->TryTake(64 - 7, out), 64 - 7);  // uses the active segment up
  ASSERT_EQ(source.held(), 1u) << "the standby fetch is in flight";
  {
    std::unique_lock lock(mu);
    used_up = true;
    cv.notify_all();
    cv.wait(lock, [&] { return parked; });
  }
  source.ReleaseAll();  // installs [68, 132) while the racer holds an overshoot of the old one
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_all();
  racer.join();
  source.ReleaseAll();
  std::vector<IdRange> rest;
  buffer->TryTake(40, rest);
  const auto granted = source.granted();
  std::unordered_set<int64_t> all;
  EXPECT_TRUE(std::is_sorted(racer_ids.begin(), racer_ids.end()));
  EXPECT_GT(racer_ids.size(), 7u) << "the racer drew from the new segment";
  for (int64_t id : racer_ids) {
    EXPECT_TRUE(InGrantedRange(id, granted)) << "ID " << id << " was never granted";
    EXPECT_TRUE(all.insert(id).second) << "duplicate " << id;
  }
  for (const auto& ranges : {out, rest}) {
    for (auto r : ranges) {
      for (int64_t id = r.start; id < r.end; ++id) {
        EXPECT_TRUE(all.insert(id).second) << "duplicate " << id;
      }
    }
  }
}

// Tags deleted and created again while threads draw, more tags than a thread has chunk slots: a
// thread never serves a buffer's ID from a chunk of another buffer (one freed meanwhile, perhaps at
// the same address), and no ID is handed out twice.
TEST(SegmentBufferTest, ChunkedDrawsStayWithTheirBufferWhileTagsAreDeletedAndCreated) {
  ManualClock clock(1'700'000'000'000);
  struct Incarnation {
    Mutex mu;
    std::vector<Segment> granted KLEAF_GUARDED_BY(mu);
  };
  auto next_id = std::make_shared<std::atomic<int64_t>>(1);
  std::vector<std::unique_ptr<Incarnation>> incarnations;  // every buffer ever made, by index
  incarnations.reserve(10000);
  auto make = [&](int index) {
    Incarnation* record = incarnations[index].get();
    return SegmentBuffer::Create("t",
                                 [record, next_id](int64_t step, Callback<Segment> done) {
                                   const int64_t size = step == 0 ? 64 : step;
                                   const int64_t start =
                                       next_id->fetch_add(size + 5);  // gaps between ranges
                                   Segment s{"t", start, start + size, 64};
                                   {
                                     MutexLock lock(record->mu);
                                     record->granted.push_back(s);
                                   }
                                   done(s);
                                 },
                                 clock, {.max_step = 256, .preload_percent = 50});
  };
  constexpr int kTags = SegmentBuffer::kThreadChunkSlots + 9;
  std::mutex tags_mu;
  std::vector<std::pair<int, std::shared_ptr<SegmentBuffer>>> tags;  // guarded by tags_mu
  for (int i = 0; i < kTags; ++i) {
    incarnations.push_back(std::make_unique<Incarnation>());
    tags.emplace_back(i, make(i));
  }
  // Thread 0 also deletes and creates a tag every 10 rounds; whichever thread drops a buffer's
  // last reference frees it.
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::vector<std::pair<int, int64_t>>> seen(kThreads);  // (incarnation, ID)
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::pair<int, std::shared_ptr<SegmentBuffer>> tag;
        std::shared_ptr<SegmentBuffer> deleted;
        {
          std::lock_guard lock(tags_mu);
          if (t == 0 && round % 10 == 0) {
            const int index = static_cast<int>(incarnations.size());
            incarnations.push_back(std::make_unique<Incarnation>());
            deleted = std::exchange(tags[(round / 10 * 7) % kTags], {index, make(index)}).second;
          }
          tag = tags[(round * (t + 1)) % kTags];
        }
        for (int i = 0; i < 1 + round % 40; ++i) {
          if (auto id = tag.second->TryNextChunked()) seen[t].emplace_back(tag.first, *id);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::unordered_set<int64_t> all;
  size_t drawn = 0;
  for (const auto& mine : seen) {
    for (auto [index, id] : mine) {
      ++drawn;
      ASSERT_TRUE(all.insert(id).second) << "duplicate ID " << id;
      Incarnation& record = *incarnations[index];
      MutexLock lock(record.mu);  // uncontended: the threads have ended
      ASSERT_TRUE(InGrantedRange(id, record.granted))
          << "ID " << id << " was never granted to the buffer that served it";
    }
  }
  EXPECT_EQ(incarnations.size(), static_cast<size_t>(kTags + kRounds / 10));
  EXPECT_GT(drawn, static_cast<size_t>(kThreads * kRounds)) << "most draws found IDs";
}

}  // namespace
}  // namespace kleaf::gateway
