#include "client/batch_buffer.h"

#include <algorithm>
#include <utility>

namespace kleaf::client {

void BatchBuffer::Add(IdBatch batch) {
  if (batch.size() <= 0) return;
  BatchKey key{batch.tag, batch.mode};
  batches_[key].push_back(Entry{next_seq_++, std::move(batch), 0});
  ++total_;
}

void BatchBuffer::PopFront(std::deque<Entry>& q, const BatchKey& key) {
  q.pop_front();
  --total_;
  if (q.empty()) batches_.erase(key);
}

std::optional<int64_t> BatchBuffer::Next(const BatchKey& key) {
  active_.insert(key);
  auto it = batches_.find(key);
  if (it == batches_.end()) return std::nullopt;
  Entry& e = it->second.front();
  int64_t id = e.batch.at(e.used++);
  if (e.used == e.batch.size()) PopFront(it->second, key);
  return id;
}

template <typename Append>
int64_t BatchBuffer::TakeWith(const BatchKey& key, int64_t n, Append append) {
  active_.insert(key);
  int64_t taken = 0;
  while (taken < n) {
    auto it = batches_.find(key);
    if (it == batches_.end()) break;
    Entry& e = it->second.front();
    int64_t k = std::min(n - taken, e.batch.size() - e.used);
    for (int64_t i = 0; i < k; ++i) append(e.batch, e.used + i);
    e.used += k;
    taken += k;
    if (e.used == e.batch.size()) PopFront(it->second, key);
  }
  return taken;
}

int64_t BatchBuffer::Take(const BatchKey& key, int64_t n, std::vector<int64_t>& out) {
  return TakeWith(key, n, [&out](const IdBatch& b, int64_t i) { out.push_back(b.at(i)); });
}

int64_t BatchBuffer::TakeText(const BatchKey& key, int64_t n, std::vector<std::string>& out) {
  return TakeWith(key, n, [&out](const IdBatch& b, int64_t i) { out.push_back(b.text_at(i)); });
}

std::optional<IdBatch> BatchBuffer::TakeBatch() {
  generic_active_ = true;
  auto oldest = batches_.end();
  for (auto it = batches_.begin(); it != batches_.end(); ++it) {
    if (oldest == batches_.end() || it->second.front().seq < oldest->second.front().seq) oldest = it;
  }
  if (oldest == batches_.end()) return std::nullopt;
  Entry e = std::move(oldest->second.front());
  PopFront(oldest->second, BatchKey(oldest->first));
  IdBatch rest = std::move(e.batch);
  if (e.used > 0) {
    if (rest.mode == IdBatch::Mode::kSegment && rest.ids.empty()) {
      rest.start += e.used;
    } else if (Is128Bit(rest.mode)) {
      rest.texts.erase(rest.texts.begin(), rest.texts.begin() + e.used);
    } else {
      rest.ids.erase(rest.ids.begin(), rest.ids.begin() + e.used);
    }
  }
  return rest;
}

void BatchBuffer::AddWaiter(const BatchKey& key, int delta) {
  active_.insert(key);
  if ((waiters_[key] += delta) <= 0) waiters_.erase(key);
}

void BatchBuffer::AddGenericWaiter(int delta) {
  generic_active_ = true;
  generic_waiters_ += delta;
}

bool BatchBuffer::StarvedWaiter() const {
  if (generic_waiters_ > 0 && total_ == 0) return true;
  return std::ranges::any_of(
      waiters_, [this](const auto& waiter) { return !batches_.contains(waiter.first); });
}

bool BatchBuffer::WantsMore() const {
  if (StarvedWaiter()) return true;
  if (Full()) return false;
  const int depth = 1 + limits_.prefetch_batches;
  if (generic_active_ && total_ < depth) return true;
  for (const BatchKey& key : active_) {
    auto it = batches_.find(key);
    if (it == batches_.end() || static_cast<int>(it->second.size()) < depth) return true;
  }
  return false;
}

int BatchBuffer::Room() const {
  const int depth = 1 + limits_.prefetch_batches;
  int want = 0;
  if (generic_active_ || generic_waiters_ > 0) want = std::max(want, depth - total_);
  for (const BatchKey& key : active_) {
    auto it = batches_.find(key);
    int have = it == batches_.end() ? 0 : static_cast<int>(it->second.size());
    want = std::max(want, depth - have);
  }
  return std::max(0, std::min(want, limits_.max_batches - total_));
}

bool BatchBuffer::EvictForWaiter() {
  if (!StarvedWaiter()) return false;  // each waiter is served when it wakes: evicting loses
  auto victim = batches_.end();
  for (auto it = batches_.begin(); it != batches_.end(); ++it) {
    if (waiters_.contains(it->first)) continue;
    if (victim == batches_.end() || it->second.size() > victim->second.size()) victim = it;
  }
  if (victim == batches_.end()) return false;
  victim->second.pop_back();
  --total_;
  ++dropped_;
  if (victim->second.empty()) batches_.erase(victim);
  return true;
}

int64_t BatchBuffer::buffered_ids(const BatchKey& key) const {
  auto it = batches_.find(key);
  if (it == batches_.end()) return 0;
  int64_t n = 0;
  for (const Entry& e : it->second) n += e.batch.size() - e.used;
  return n;
}

}  // namespace kleaf::client
