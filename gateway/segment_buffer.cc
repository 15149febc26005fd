#include "gateway/segment_buffer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kleaf::gateway {
namespace {
constexpr int64_t kPreloadRetryDelayNs = 200'000'000;
constexpr int64_t kChunkCapDivisor = 16;  // a chunk takes at most 1/16 of the active segment
std::atomic<uint64_t> next_serial{1};
}  // namespace

std::shared_ptr<SegmentBuffer> SegmentBuffer::Create(std::string tag, FetchFn fetch, Clock& clock,
                                                     Options options) {
  return std::shared_ptr<SegmentBuffer>(
      new SegmentBuffer(std::move(tag), std::move(fetch), clock, options));
}

SegmentBuffer::SegmentBuffer(std::string tag, FetchFn fetch, Clock& clock, Options options)
    : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      tag_(std::move(tag)),
      fetch_(std::move(fetch)),
      clock_(clock),
      options_(options) {}

int64_t SegmentBuffer::Draw(int64_t count, int64_t* start, const allocator::IdFormat** format) {
  const uint64_t gen = gen_.load(std::memory_order_acquire);
  if (gen & 1) return 0;
  const int64_t v = next_.fetch_add(count, std::memory_order_relaxed);
  if (draw_hook_) [[unlikely]] draw_hook_();
  const int64_t end = end_.load(std::memory_order_relaxed);
  const int64_t preload_at = preload_at_.load(std::memory_order_relaxed);
  const allocator::IdFormat* f = format_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (gen_.load(std::memory_order_relaxed) != gen) return 0;  // raced an install: drop (a gap)
  if (v >= end) return 0;
  const int64_t got = std::min(count, end - v);
  if (v + got > preload_at && !preload_started_.load(std::memory_order_relaxed) &&
      clock_.MonotonicNs() >= preload_not_before_ns_.load(std::memory_order_relaxed)) {
    StartPreload();
  }
  *start = v;
  *format = f;
  return got;
}

std::optional<int64_t> SegmentBuffer::TryNext() {
  int64_t id = 0;
  const allocator::IdFormat* format = nullptr;
  if (Draw(1, &id, &format) == 1 && format == nullptr) return id;
  std::vector<IdRange> one;
  if (format != nullptr) {
    one.push_back({id, id + 1, format});
  } else if (TryTake(1, one) != 1) {
    return std::nullopt;
  }
  std::vector<int64_t> ids;
  if (!AppendIds(one, ids)) return std::nullopt;
  return ids.front();
}

Result<void> SegmentBuffer::AppendIds(const std::vector<IdRange>& ranges,
                                      std::vector<int64_t>& out) const {
  const int64_t now_ms = clock_.NowMs();
  for (const auto& r : ranges) {
    for (int64_t c = r.start; c < r.end; ++c) {
      if (r.format == nullptr) {
        out.push_back(c);
        continue;
      }
      auto id = r.format->Map(c, now_ms);
      if (!id) return std::unexpected(id.error());
      out.push_back(*id);
    }
  }
  return {};
}

std::optional<int64_t> SegmentBuffer::TryNextChunked() {
  // Trivially constructed: plain thread-local storage, no guard, nothing to destroy. The slots hold
  // only numbers, so a buffer freed meanwhile leaves nothing dangling: its serial never returns.
  static thread_local ThreadChunk slots[kThreadChunkSlots];
  ThreadChunk& chunk = slots[serial_ % kThreadChunkSlots];
  if (chunk.serial == serial_ && chunk.next < chunk.end &&
      chunk.epoch == epoch_.load(std::memory_order_acquire)) [[likely]] {
    return chunk.next++;
  }
  return NextFromNewChunk(chunk);
}

std::optional<int64_t> SegmentBuffer::NextFromNewChunk(ThreadChunk& chunk) {
  // A non-countable tag's IDs are mapped through its format, which a chunk does not keep: they are
  // drawn one at a time.
  if (format_.load(std::memory_order_relaxed) != nullptr) return TryNext();
  // A new occupant of the slot starts small: a thread drawing rarely wastes little.
  int64_t size = 1;
  if (chunk.serial == serial_) {
    const bool used_up = chunk.next >= chunk.end;
    size =
        used_up ? std::min(chunk.size * 2, kMaxThreadChunk) : std::max<int64_t>(chunk.size / 2, 1);
  }
  while (true) {
    // Read before the draw: a chunk cut from a segment installed later carries an older epoch and
    // is dropped at the next draw (a gap), never kept past a switch it did not see.
    const uint64_t epoch = epoch_.load(std::memory_order_acquire);
    const int64_t want = std::min(size, chunk_cap_.load(std::memory_order_relaxed));
    int64_t start = 0;
    const allocator::IdFormat* format = nullptr;
    const int64_t got = Draw(want, &start, &format);
    if (got > 0 && format != nullptr) {
      // A formatted segment was installed since the check above: its first ID, mapped; the rest
      // of this draw is a gap.
      std::vector<int64_t> ids;
      if (!AppendIds({{start, start + 1, format}}, ids)) return std::nullopt;
      return ids.front();
    }
    if (got > 0) {
      chunk = {
          .serial = serial_, .epoch = epoch, .next = start + 1, .end = start + got, .size = want};
      return start;
    }
    if (!Advance()) return std::nullopt;  // the slot stays as it was
  }
}

int64_t SegmentBuffer::TryTake(int64_t count, std::vector<IdRange>& out) {
  int64_t taken = 0;
  while (taken < count) {
    int64_t start = 0;
    const allocator::IdFormat* format = nullptr;
    int64_t got = Draw(count - taken, &start, &format);
    if (got > 0) {
      if (!out.empty() && out.back().end == start && out.back().format == format) {
        out.back().end += got;
      } else {
        out.push_back({start, start + got, format});
      }
      taken += got;
      continue;
    }
    if (!Advance()) break;
  }
  return taken;
}

Result<std::vector<IdRange>> SegmentBuffer::Take(int64_t count,
                                                 std::chrono::steady_clock::time_point deadline) {
  std::vector<IdRange> out;
  int64_t taken = TryTake(count, out);
  while (taken < count) {
    MutexLock lock(mu_);
    const uint64_t seen = completions_;
    if (standby_ || !ActiveUsedUpLocked()) {
      lock.Unlock();
      taken += TryTake(count - taken, out);
      continue;
    }
    if (auto step = PrepareFetchLocked(count - taken)) {
      lock.Unlock();
      IssueFetch(*step);
      lock.Lock();
    }
    bool woke = cv_.WaitUntil(lock, deadline, [&]() KLEAF_REQUIRES(mu_) {
      return completions_ != seen || standby_.has_value() || !ActiveUsedUpLocked();
    });
    if (!woke) {
      return Fail(Code::kUnavailable, "no segment of tag '" + tag_ + "' ready in time; retry");
    }
    if (completions_ != seen && last_error_ && !standby_ && ActiveUsedUpLocked()) {
      return std::unexpected(*last_error_);
    }
    lock.Unlock();
    taken += TryTake(count - taken, out);
  }
  return out;
}

bool SegmentBuffer::ActiveUsedUpLocked() const {
  return next_.load(std::memory_order_relaxed) >= end_.load(std::memory_order_relaxed);
}

const allocator::IdFormat* SegmentBuffer::InternFormatLocked(
    const std::shared_ptr<const allocator::IdFormat>& format) {
  if (!format) return nullptr;
  for (const auto& f : formats_) {
    if (*f == *format) return f.get();
  }
  formats_.push_back(format);
  return format.get();
}

void SegmentBuffer::Install(const allocator::Segment& s) {
  const uint64_t gen = gen_.load(std::memory_order_relaxed);
  gen_.store(gen + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  next_.store(s.start, std::memory_order_relaxed);
  end_.store(s.end, std::memory_order_relaxed);
  preload_at_.store(s.start + s.size() * options_.preload_percent / 100, std::memory_order_relaxed);
  preload_started_.store(false, std::memory_order_relaxed);
  chunk_cap_.store(std::max<int64_t>(s.size() / kChunkCapDivisor, 1), std::memory_order_relaxed);
  format_.store(InternFormatLocked(s.format), std::memory_order_relaxed);
  gen_.store(gen + 2, std::memory_order_release);
  // After the new segment is visible: a thread that reads the new epoch draws from it (or later).
  epoch_.fetch_add(1, std::memory_order_release);
  active_ = s;
}

bool SegmentBuffer::Advance() {
  MutexLock lock(mu_);
  if (!ActiveUsedUpLocked()) return true;  // another thread switched already
  if (standby_) {
    Install(*standby_);
    standby_.reset();
    return true;
  }
  if (auto step = PrepareFetchLocked()) {
    lock.Unlock();
    IssueFetch(*step);
    lock.Lock();  // the fetch may have completed already (an in-process source)
    return !ActiveUsedUpLocked() || standby_.has_value();
  }
  return false;
}

void SegmentBuffer::StartPreload() {
  MutexLock lock(mu_);
  preload_started_.store(true, std::memory_order_relaxed);
  if (auto step = PrepareFetchLocked()) {
    lock.Unlock();
    IssueFetch(*step);
  }
}

std::optional<int64_t> SegmentBuffer::PrepareFetchLocked(int64_t demand) {
  if (fetching_ || standby_ || drained_) return std::nullopt;
  fetching_ = true;
  fetch_asked_mono_ns_ = clock_.MonotonicNs();
  int64_t step = 0;  // first fetch: the tag's own step
  if (last_fetch_mono_ns_ >= 0) {
    auto lasted = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(clock_.MonotonicNs() - last_fetch_mono_ns_));
    step = allocator::NextStep(step_, min_step_, options_.max_step, lasted);
  }
  if (demand > step) step = std::min(demand, options_.max_step);  // the allocator clamps to the tag's step
  return step;
}

void SegmentBuffer::IssueFetch(int64_t step) {
  std::weak_ptr<SegmentBuffer> weak = weak_from_this();
  fetch_(step, [weak](Result<allocator::Segment> result) {
    if (auto self = weak.lock()) self->OnFetched(std::move(result));
  });
}

void SegmentBuffer::OnFetched(Result<allocator::Segment> result) {
  {
    MutexLock lock(mu_);
    fetching_ = false;
    ++completions_;
    fetch_ns_total_ += std::max<int64_t>(0, clock_.MonotonicNs() - fetch_asked_mono_ns_);
    if (result && drained_) {
      // Arrived after the drain: nobody will serve it, and it is not in the kept rests (a gap).
    } else if (result) {
      last_error_.reset();
      min_step_ = result->min_step;
      if (step_ != 0 && result->size() != step_) {
        spdlog::info("[segment] tag {}: step changed from {} to {}", tag_, step_, result->size());
      }
      spdlog::info("[segment] tag {}: fetched [{}, {}) ({} IDs)", tag_, result->start, result->end,
                   result->size());
      step_ = result->size();
      last_fetch_mono_ns_ = clock_.MonotonicNs();
      if (ActiveUsedUpLocked()) {
        Install(*result);
      } else if (active_ && active_->format == nullptr && result->format != nullptr) {
        // The tag left plain since the active segment was reserved (docs/architecture.md, "Changing
        // the mode of a live tag"): serving the plain rest would go on handing out countable IDs.
        // Dropped, a gap: those counters are below the tag's id_base and never reserved again.
        spdlog::info("[segment] tag {}: no longer plain: the plain rest [{}, {}) is dropped", tag_,
                     std::min(next_.load(std::memory_order_relaxed), active_->end), active_->end);
        Install(*result);
      } else {
        standby_ = std::move(*result);
      }
    } else {
      // An unknown tag is the client's mistake, not an event of this node: debug only.
      spdlog::log(result.error().code == Code::kNotFound ? spdlog::level::debug : spdlog::level::warn,
                  "[segment] tag {}: fetching a segment failed: {}", tag_, result.error().message);
      last_error_ = std::move(result.error());
      // Let a later draw start the preload again, after a pause (the allocators may be away).
      preload_not_before_ns_.store(clock_.MonotonicNs() + kPreloadRetryDelayNs,
                                   std::memory_order_relaxed);
      preload_started_.store(false, std::memory_order_relaxed);
    }
  }
  cv_.NotifyAll();
}

std::vector<IdRange> SegmentBuffer::Drain() {
  MutexLock lock(mu_);
  drained_ = true;
  std::vector<IdRange> out;
  // The exchange splits the active segment cleanly: a draw whose fetch_add came earlier keeps its
  // IDs (they are below `next`); one that comes later starts at `end` and gets nothing.
  const int64_t end = end_.load(std::memory_order_relaxed);
  const int64_t next = next_.exchange(end, std::memory_order_acq_rel);
  epoch_.fetch_add(1, std::memory_order_release);  // chunks threads hold are dropped (a gap)
  if (next < end && format_.load(std::memory_order_relaxed) == nullptr) out.push_back({next, end});
  if (standby_ && !standby_->format) out.push_back({standby_->start, standby_->end});
  standby_.reset();
  return out;
}

void SegmentBuffer::Seed(const std::vector<IdRange>& ranges) {
  MutexLock lock(mu_);
  if (ranges.empty() || drained_) return;
  Install({tag_, ranges[0].start, ranges[0].end, 0});
  if (ranges.size() > 1) standby_ = allocator::Segment{tag_, ranges[1].start, ranges[1].end, 0};
}

void SegmentBuffer::CountIssued(int64_t n) {
  metrics::Counter* counter = issued_.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &metrics::Registry::Default().GetCounter("kleaf_ids_issued_total",
                                                       "IDs handed to clients, per tag and mode.",
                                                       {{"tag", tag_}, {"mode", "segment"}});
    issued_.store(counter, std::memory_order_release);
  }
  counter->Inc(static_cast<uint64_t>(n));
  issued_count_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
}

SegmentBuffer::Snapshot SegmentBuffer::snapshot() const {
  MutexLock lock(mu_);
  Snapshot s;
  s.tag = tag_;
  s.active = active_;
  s.next = active_ ? std::min(next_.load(std::memory_order_relaxed), active_->end) : 0;
  s.standby = standby_;
  s.step = step_;
  s.min_step = min_step_;
  s.fetching = fetching_;
  s.last_error = last_error_;
  s.issued = issued_count_.load(std::memory_order_relaxed);
  s.fetches = completions_;
  s.fetch_ns = fetch_ns_total_;
  return s;
}

}  // namespace kleaf::gateway
