#include "gateway/tag_history.h"

#include <algorithm>
#include <set>

namespace kleaf::gateway {

TagHistory::TagHistory(int64_t interval_ms) : interval_ms_(interval_ms > 0 ? interval_ms : 1) {}

void TagHistory::Sample(int64_t now_ms, const std::vector<TagCounters>& tags) {
  MutexLock lock(mu_);
  std::set<std::string> seen;
  for (const auto& c : tags) seen.insert(c.tag);
  // Tags gone since the last sample free their slots before new ones take them.
  for (auto it = tags_.begin(); it != tags_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    if (it->second.tracked) --tracked_;
    it = tags_.erase(it);
  }
  for (const auto& c : tags) {
    auto [it, fresh] = tags_.try_emplace(c.tag);
    Tag& t = it->second;
    if (fresh) {
      t.last = TagCounters{c.tag, 0, 0, 0};
      t.last_ms = now_ms - interval_ms_;
    }
    if (!t.tracked && tracked_ < kMaxTags) {
      t.tracked = true;
      t.ring.resize(kPoints);
      ++tracked_;
    }
    const bool reset = c.issued < t.last.issued || c.fetches < t.last.fetches;
    const uint64_t issued = reset ? c.issued : c.issued - t.last.issued;
    const uint64_t fetches = reset ? c.fetches : c.fetches - t.last.fetches;
    const int64_t fetch_ns =
        reset ? c.fetch_ns : std::max<int64_t>(0, c.fetch_ns - t.last.fetch_ns);
    const int64_t elapsed_ms = now_ms > t.last_ms ? now_ms - t.last_ms : interval_ms_;
    if (t.tracked) {
      Point& p = t.ring[t.head];
      p.time_ms = now_ms;
      p.ids_per_s = static_cast<double>(issued) * 1000.0 / static_cast<double>(elapsed_ms);
      p.fetch_ms = fetches > 0 ? std::optional<double>(static_cast<double>(fetch_ns) / 1e6 /
                                                       static_cast<double>(fetches))
                               : std::nullopt;
      t.head = (t.head + 1) % kPoints;
      if (t.size < kPoints) ++t.size;
    }
    t.last = c;
    t.last_ms = now_ms;
  }
}

std::optional<std::vector<TagHistory::Point>> TagHistory::Series(const std::string& tag) const {
  MutexLock lock(mu_);
  auto it = tags_.find(tag);
  if (it == tags_.end()) {  // not sampled yet: gets a ring at the next sample if one is free
    if (tracked_ < kMaxTags) return std::vector<Point>{};
    return std::nullopt;
  }
  if (!it->second.tracked) return std::nullopt;
  const Tag& t = it->second;
  std::vector<Point> out;
  out.reserve(t.size);
  for (size_t i = 0; i < t.size; ++i)
    out.push_back(t.ring[(t.head + kPoints - t.size + i) % kPoints]);
  return out;
}

size_t TagHistory::untracked() const {
  MutexLock lock(mu_);
  return tags_.size() - tracked_;
}

}  // namespace kleaf::gateway
