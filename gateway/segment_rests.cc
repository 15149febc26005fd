#include "gateway/segment_rests.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "base/await.h"

namespace kleaf::gateway {

void ResumeSegmentRests(state::Store& store, allocator::Allocator& allocator,
                        SegmentCache& segments, const std::string& scope) {
  auto rests = store.TakeSegmentRests();
  if (!rests) {
    spdlog::warn("[segment] cannot read the kept segment rests: {}", rests.error().message);
    return;
  }
  std::map<std::string, std::vector<IdRange>> by_tag;
  for (const auto& r : *rests) {
    if (r.scope != scope) {
      spdlog::warn("[segment] dropping the kept rest [{}, {}) of tag {}: it belongs to {}, not {}",
                   r.start, r.end, r.tag, r.scope, scope);
      continue;
    }
    by_tag[r.tag].push_back({r.start, r.end});
  }
  // Ask about every tag at once; one deadline for all, so many tags cannot stretch startup.
  // A tag without an answer by then keeps its rest.
  std::map<std::string, PendingCall<state::TagRecord>> answers;
  for (const auto& [tag, ranges] : by_tag)
    allocator.Run(allocator::op::GetTag{tag}, answers[tag].Callback());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& [tag, ranges] : by_tag) {
    auto answer = answers.at(tag).Wait(deadline, "no answer");
    if (!answer && answer.error().code == Code::kNotFound) {
      spdlog::info("[segment] tag {} was deleted; dropping its kept rest", tag);
      continue;
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    int64_t ids = 0;
    for (const auto& r : ranges) ids += r.size();
    segments.Get(tag)->Seed(ranges);
    spdlog::info("[segment] tag {}: resuming {} IDs from [{}, {}) kept at the last shutdown", tag,
                 ids, ranges.front().start, ranges.back().end);
  }
}

void KeepSegmentRests(state::Store& store, SegmentCache& segments, const std::string& scope) {
  std::vector<state::Store::SegmentRest> rests;
  int64_t ids = 0;
  for (const auto& [tag, ranges] : segments.Drain()) {
    for (const auto& r : ranges) {
      rests.push_back({scope, tag, r.start, r.end});
      ids += r.size();
    }
  }
  if (rests.empty()) return;
  if (auto r = store.PutSegmentRests(rests); !r) {
    spdlog::warn("[segment] could not keep the unused segment rests (a gap): {}",
                 r.error().message);
    return;
  }
  spdlog::info("[segment] kept {} unused IDs in {} ranges for the next start", ids, rests.size());
}

}  // namespace kleaf::gateway
