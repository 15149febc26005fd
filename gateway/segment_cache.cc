#include "gateway/segment_cache.h"

#include <algorithm>
#include <mutex>

#include "base/metrics.h"

namespace kleaf::gateway {

SegmentCache::SegmentCache(allocator::Allocator& allocator, Clock& clock,
                           SegmentBuffer::Options options)
    : allocator_(allocator), clock_(clock), options_(options) {}

std::shared_ptr<SegmentBuffer> SegmentCache::Get(const std::string& tag) {
  {
    std::shared_lock lock(mu_);
    auto it = buffers_.find(tag);
    if (it != buffers_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  auto& slot = buffers_[tag];
  if (!slot) {
    allocator::Allocator* allocator = &allocator_;
    Clock* clock = &clock_;
    auto& registry = metrics::Registry::Default();
    metrics::Histogram* latency = &registry.GetHistogram(
        "kleaf_segment_fetch_seconds",
        "Time from asking the allocator for a segment to the segment (or an error) arriving.");
    slot = SegmentBuffer::Create(
        tag,
        [allocator, clock, latency, tag](int64_t step,
                                         allocator::Callback<allocator::Segment> done) {
          const int64_t asked = clock->MonotonicNs();
          allocator->AllocateSegment(
              tag, step,
              [clock, latency, asked, done = std::move(done)](Result<allocator::Segment> r) {
                latency->Observe(static_cast<double>(clock->MonotonicNs() - asked) / 1e9);
                done(std::move(r));
              });
        },
        clock_, options_);
  }
  return slot;
}

void SegmentCache::Forget(const std::string& tag, const SegmentBuffer* buffer) {
  std::unique_lock lock(mu_);
  auto it = buffers_.find(tag);
  if (it != buffers_.end() && (buffer == nullptr || it->second.get() == buffer)) buffers_.erase(it);
}

std::vector<SegmentBuffer::Snapshot> SegmentCache::Snapshots() const {
  std::vector<std::shared_ptr<SegmentBuffer>> all;
  {
    std::shared_lock lock(mu_);
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
    std::shared_lock lock(mu_);
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
  std::shared_lock lock(mu_);
  return buffers_.size();
}

}  // namespace kleaf::gateway
