#include "producer/top_up.h"

#include <algorithm>
#include <utility>

namespace kleaf::producer {

void TopUpLedger::Observe(int32_t p, int64_t offset, size_t stream, const std::string& value) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& e) {
    return e.partition == p && e.stream == stream && e.value == value;
  });
  if (it != pending_.end()) {
    pending_.erase(it);
    --ahead_.at(stream);
  }
  read_[p].push_back({offset, stream});
  ++ahead_.at(stream);
}

void TopUpLedger::AddPending(int32_t p, size_t stream, std::string value, int64_t now_ms,
                             int64_t at_most) {
  pending_.push_back({p, stream, std::move(value), now_ms, at_most});
  ++ahead_.at(stream);
}

void TopUpLedger::ExpirePending(int64_t before_ms) {
  std::erase_if(pending_, [&](const Pending& e) {
    if (e.at_ms >= before_ms) return false;
    --ahead_.at(e.stream);
    return true;
  });
}

void TopUpLedger::SetCommitted(int32_t p, int64_t committed) {
  if (committed < 0) return;
  std::erase_if(pending_, [&](const Pending& e) {
    if (e.partition != p || e.at_most >= committed) return false;
    --ahead_.at(e.stream);
    return true;
  });
  auto it = read_.find(p);
  if (it == read_.end()) return;
  auto& batches = it->second;
  while (!batches.empty() && batches.front().offset < committed) {
    --ahead_.at(batches.front().stream);
    batches.pop_front();
  }
}

}  // namespace kleaf::producer
