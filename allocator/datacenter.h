// How more than one datacenter, each with its own cluster on its own Kafka, never hand out the
// same ID: datacenter `index` of `count` leases snowflake worker ids only from its own slice of
// the worker-id space, and maps segment counters to its own residue class modulo `count`
// (tinyid's delta/remainder). Pure code; the layout topic records the pair (cluster.h).
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace kleaf::allocator {

// Datacenter `index` of `count` (0 <= index < count). {0, 1}, the default, is a single datacenter:
// worker ids and segment IDs exactly as without datacenters.
struct Datacenter {
  int64_t index = 0;
  int64_t count = 1;
  bool single() const { return count == 1; }
  bool operator==(const Datacenter&) const = default;
  // "datacenter 1 of 2"
  std::string Describe() const;
};

// Fails with kInvalidArgument naming datacenter.index / datacenter.count when the pair is not one.
[[nodiscard]] Result<void> CheckDatacenter(const Datacenter& dc, int worker_bits);

// The worker ids [first, last] of `dc` among the 2^worker_bits of the snowflake layout:
// [index * 2^bits / count, (index + 1) * 2^bits / count - 1]. The slices of the `count`
// datacenters are disjoint and cover every id.
struct WorkerRange {
  int64_t first = 0;
  int64_t last = 0;
  bool Contains(int64_t worker_id) const { return worker_id >= first && worker_id <= last; }
  int64_t size() const { return last - first + 1; }
};
WorkerRange WorkerRangeOf(const Datacenter& dc, int worker_bits);
// The datacenter whose slice holds `worker_id` (decode: which datacenter issued a snowflake ID).
int64_t DatacenterOfWorker(int64_t worker_id, int64_t count, int worker_bits);

// Segment IDs of `dc`: counter c becomes c * count + index, so no two datacenters' IDs are equal
// whatever their counters, and each datacenter's IDs grow with its counters. The largest counter
// that still maps to a positive int64.
int64_t MaxSegmentCounter(const Datacenter& dc);
inline int64_t SegmentIdOf(const Datacenter& dc, int64_t counter) {
  return counter * dc.count + dc.index;
}

}  // namespace kleaf::allocator
