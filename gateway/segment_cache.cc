#include "gateway/segment_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/metrics.h"
#include "base/mutex.h"

namespace kleaf::gateway {

namespace {

metrics::Counter& FetchErrors(Code code) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_segment_fetch_errors_total",
      "Segment fetches that failed, per error code (not_found: a tag the allocators do not know).",
      {{"code", std::string(CodeName(code))}});
}

}  // namespace

struct SegmentCache::Received {
  Mutex mu;
  std::unordered_map<std::string, int64_t> end KLEAF_GUARDED_BY(mu);
  metrics::Counter& regressions = metrics::Registry::Default().GetCounter(
      "kleaf_segment_regressions_total",
      "Segments an allocator handed out that start below the end of an earlier segment of the "
      "same tag this gateway received: the cluster's state went back, IDs may repeat. Never "
      "served.");

  // kInternal when `s` starts below what this gateway already received of its tag.
  [[nodiscard]] Result<void> Admit(const allocator::Segment& s) {
    MutexLock lock(mu);
    int64_t& high = end[s.tag];
    if (s.start < high) {
      regressions.Inc();
      return Fail(Code::kInternal,
                  "the allocators handed out IDs [" + std::to_string(s.start) + ", " +
                      std::to_string(s.end) + ") of tag '" + s.tag + "', below " +
                      std::to_string(high) +
                      ", the end of what this gateway already received: the cluster's state went "
                      "back (state-topic records lost?), so IDs may repeat; not serving them (see "
                      "docs/operations.md, \"Segment regressions\")");
    }
    high = s.end;
    return {};
  }
};

SegmentCache::SegmentCache(allocator::SegmentSource& allocator, Clock& clock,
                           SegmentBuffer::Options options)
    : allocator_(allocator),
      clock_(clock),
      options_(options),
      received_(std::make_shared<Received>()) {
  // Every code from the first scrape, at 0: alerts on increase() need the start.
  for (int c = 0; c <= static_cast<int>(Code::kInternal); ++c) FetchErrors(static_cast<Code>(c));
}

std::shared_ptr<SegmentBuffer> SegmentCache::Get(const std::string& tag) {
  {
    ReaderMutexLock lock(mu_);
    auto it = buffers_.find(tag);
    if (it != buffers_.end()) return it->second;
  }
  WriterMutexLock lock(mu_);
  auto& slot = buffers_[tag];
  if (!slot) {
    allocator::SegmentSource* allocator = &allocator_;
    Clock* clock = &clock_;
    auto& registry = metrics::Registry::Default();
    metrics::Histogram* latency = &registry.GetHistogram(
        "kleaf_segment_fetch_seconds",
        "Time from asking the allocator for a segment to the segment (or an error) arriving.");
    slot = SegmentBuffer::Create(
        tag,
        [allocator, clock, latency, tag, received = received_](
            int64_t step, allocator::Callback<allocator::Segment> done) {
          const int64_t asked = clock->MonotonicNs();
          allocator->AllocateSegment(
              tag, step,
              [clock, latency, asked, received,
               done = std::move(done)](Result<allocator::Segment> r) {
                latency->Observe(static_cast<double>(clock->MonotonicNs() - asked) / 1e9);
                if (r) {
                  if (auto admitted = received->Admit(*r); !admitted) {
                    spdlog::error("[gateway] {}", admitted.error().message);
                    r = std::unexpected(admitted.error());
                  }
                }
                if (!r) FetchErrors(r.error().code).Inc();
                done(std::move(r));
              });
        },
        clock_, options_);
  }
  return slot;
}

void SegmentCache::Forget(const std::string& tag, const SegmentBuffer* buffer) {
  WriterMutexLock lock(mu_);
  auto it = buffers_.find(tag);
  if (it != buffers_.end() && (buffer == nullptr || it->second.get() == buffer)) buffers_.erase(it);
}

std::vector<SegmentBuffer::Snapshot> SegmentCache::Snapshots() const {
  std::vector<std::shared_ptr<SegmentBuffer>> all;
  {
    ReaderMutexLock lock(mu_);
    for (const auto& [tag, buffer] : buffers_) all.push_back(buffer);
  }
  std::vector<SegmentBuffer::Snapshot> out;
  for (const auto& b : all) out.push_back(b->snapshot());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.tag < b.tag; });
  return out;
}

std::vector<std::pair<std::string, std::vector<IdRange>>> SegmentCache::Drain() {
  std::vector<std::shared_ptr<SegmentBuffer>> all;
  {
    ReaderMutexLock lock(mu_);
    for (const auto& [tag, buffer] : buffers_) all.push_back(buffer);
  }
  std::vector<std::pair<std::string, std::vector<IdRange>>> out;
  for (const auto& b : all) {
    auto ranges = b->Drain();
    if (!ranges.empty()) out.emplace_back(b->tag(), std::move(ranges));
  }
  return out;
}

size_t SegmentCache::size() const {
  ReaderMutexLock lock(mu_);
  return buffers_.size();
}

}  // namespace kleaf::gateway
