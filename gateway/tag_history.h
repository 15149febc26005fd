// The last minutes of each buffered tag's IDs/s and segment-fetch latency, kept on the node so
// that the monitoring page plots them as soon as it opens (/api/v1/status, "history").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"

namespace kleaf::gateway {

// What a tag's buffer has counted since it was created; cumulative, so a sample needs no reset.
struct TagCounters {
  std::string tag;
  uint64_t issued = 0;   // IDs handed to clients
  uint64_t fetches = 0;  // segment fetches completed (failed ones included)
  int64_t fetch_ns = 0;  // their total time, asking to answer
};

// A ring of kPoints points per tag, one per Sample: the IDs/s and the mean fetch latency of the
// interval since the tag's previous sample. Owned by the Monitor. Thread-safe: one sampler thread
// calls Sample (app/serve.cc runs it every `http.status_history_interval_ms`; tests call it with
// explicit times), HTTP threads read Series.
//
// At most kMaxTags tags have a ring: the first ones sampled (in order of first sample, in the order
// given within one: the Monitor gives them by name), until one of them is gone from a sample (its
// buffer was dropped: a deleted or unknown tag), which frees its slot for the next tag sampled. The
// others are counted (untracked()) and keep only their last counters, so that their rate is right
// from the sample that gives them a slot.
class TagHistory {
 public:
  static constexpr size_t kPoints = 60;
  static constexpr size_t kMaxTags = 32;

  struct Point {
    int64_t time_ms = 0;  // the sample that closed the interval
    double ids_per_s = 0;
    std::optional<double> fetch_ms;  // mean of the fetches completed in the interval; none: none
  };

  // `interval_ms`: the sampling period; the rate's divisor when a sample's time does not follow
  // its tag's previous one (the first sample of a tag, a wall clock that went back).
  explicit TagHistory(int64_t interval_ms);

  // Adds one point to each tracked tag of `tags` at `now_ms`. A tag sampled for the first time
  // counts from zero (its buffer started within the interval); a counter below the previous
  // sample's was reset (the buffer was dropped and created again) and counts from zero too.
  void Sample(int64_t now_ms, const std::vector<TagCounters>& tags);

  // The points of `tag`, oldest first: none yet for a tag not sampled yet while a ring is free;
  // nullopt when it has no ring (kMaxTags others have).
  std::optional<std::vector<Point>> Series(const std::string& tag) const;
  // Tags seen at the last sample without a ring (beyond kMaxTags).
  size_t untracked() const;
  int64_t interval_ms() const { return interval_ms_; }

 private:
  struct Tag {
    TagCounters last;         // the counters at the previous sample
    int64_t last_ms = 0;      // its time
    bool tracked = false;     // has a ring
    std::vector<Point> ring;  // kPoints once tracked; untracked tags keep only `last`
    size_t head = 0;          // where the next point goes
    size_t size = 0;          // points held (at most kPoints)
  };

  const int64_t interval_ms_;
  mutable Mutex mu_;
  // Every tag of the last sample; `tracked` for at most kMaxTags of them.
  std::map<std::string, Tag> tags_ KLEAF_GUARDED_BY(mu_);
  size_t tracked_ KLEAF_GUARDED_BY(mu_) = 0;
};

}  // namespace kleaf::gateway
