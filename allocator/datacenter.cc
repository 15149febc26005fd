#include "allocator/datacenter.h"

#include <limits>

namespace kleaf::allocator {

std::string Datacenter::Describe() const {
  return "datacenter " + std::to_string(index) + " of " + std::to_string(count);
}

Result<void> CheckDatacenter(const Datacenter& dc, int worker_bits) {
  if (dc.count < 1 || dc.count > (int64_t{1} << worker_bits)) {
    return Fail(Code::kInvalidArgument,
                "datacenter.count: must be between 1 and 2^snowflake.worker_bits = " +
                    std::to_string(int64_t{1} << worker_bits) + ", got " +
                    std::to_string(dc.count));
  }
  if (dc.index < 0 || dc.index >= dc.count) {
    return Fail(Code::kInvalidArgument, "datacenter.index: must be between 0 and " +
                                            std::to_string(dc.count - 1) + ", got " +
                                            std::to_string(dc.index));
  }
  return {};
}

WorkerRange WorkerRangeOf(const Datacenter& dc, int worker_bits) {
  const int64_t ids = int64_t{1} << worker_bits;
  return {dc.index * ids / dc.count, (dc.index + 1) * ids / dc.count - 1};
}

int64_t DatacenterOfWorker(int64_t worker_id, int64_t count, int worker_bits) {
  // The slices are floor(i * ids / count): start from the estimate and step to the slice.
  int64_t i = worker_id * count / (int64_t{1} << worker_bits);
  while (i > 0 && !WorkerRangeOf({i, count}, worker_bits).Contains(worker_id) &&
         WorkerRangeOf({i, count}, worker_bits).first > worker_id) {
    --i;
  }
  while (i + 1 < count && WorkerRangeOf({i, count}, worker_bits).last < worker_id) ++i;
  return i;
}

int64_t MaxSegmentCounter(const Datacenter& dc) {
  return (std::numeric_limits<int64_t>::max() - dc.index) / dc.count;
}

}  // namespace kleaf::allocator
