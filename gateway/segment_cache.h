// The gateway's segment buffers, one per tag, created on first use.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator/segment_source.h"
#include "base/mutex.h"
#include "gateway/segment_buffer.h"

namespace kleaf::gateway {

// Thread-safe map tag -> SegmentBuffer. Buffers of tags the allocator does not know are dropped
// again (Forget) so that requests for made-up tags cannot grow it.
//
// It also checks what I1 promises it: an allocator never hands out a segment of a tag that starts
// below the end of one it handed out before (max_id only grows; it cannot even be lowered by an
// admin). A segment that does is never served: the fetch fails with kInternal, naming both
// ranges, an error is logged and kleaf_segment_regressions_total counts it. It means the
// cluster's state went back (state-topic records lost, an allocator restored from an old copy),
// and other gateways may be handing out IDs this one already served. The check covers the
// segments this process received (it keeps the highest end per tag, also across Forget).
// kleaf_segment_fetch_errors_total{code} counts every fetch that failed, that one included.
class SegmentCache {
 public:
  SegmentCache(allocator::SegmentSource& allocator, Clock& clock, SegmentBuffer::Options options);

  // The buffer of `tag`, created (empty; its first draw starts a fetch) when missing.
  std::shared_ptr<SegmentBuffer> Get(const std::string& tag);
  // Drops `tag`'s buffer if it is still `buffer` (or any buffer when `buffer` is null).
  void Forget(const std::string& tag, const SegmentBuffer* buffer = nullptr);
  std::vector<SegmentBuffer::Snapshot> Snapshots() const;
  // Drains every buffer (SegmentBuffer::Drain): the unused IDs per tag, for keeping them across a
  // graceful restart. Later requests find no IDs.
  std::vector<std::pair<std::string, std::vector<IdRange>>> Drain();
  size_t size() const;

 private:
  allocator::SegmentSource& allocator_;
  Clock& clock_;
  const SegmentBuffer::Options options_;
  mutable SharedMutex mu_;
  std::unordered_map<std::string, std::shared_ptr<SegmentBuffer>> buffers_ KLEAF_GUARDED_BY(mu_);
  struct Received;  // the end of the highest segment received per tag, shared with the fetches
  std::shared_ptr<Received> received_;
};

}  // namespace kleaf::gateway
