// Segments of a tag, as their consumers see them: all that a segment buffer (gateway/
// segment_cache.h) or an ID producer (producer/ids_producer.h) needs of the allocators. The
// Allocator (allocator.h) serves it as op::Allocate.
#pragma once

#include <cstdint>
#include <string>

#include "allocator/allocation.h"
#include "allocator/worker_registry.h"  // Callback

namespace kleaf::allocator {

// Returns at once and completes `done` exactly once, on a thread of the implementation's choosing
// (never the caller's I/O thread for blocking work).
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  // A new segment of `tag`; `step` is the size the caller would like (0: the tag's own step).
  virtual void AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) = 0;
};

}  // namespace kleaf::allocator
