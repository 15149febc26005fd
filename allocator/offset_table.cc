#include "allocator/offset_table.h"

#include <cassert>

namespace kleaf::allocator {
namespace {

constexpr size_t kFirstCapacity = 8;

uint64_t Slot(uint32_t offset, uint32_t delta) { return (uint64_t{offset} << 32) | delta; }
uint32_t OffsetIn(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
uint32_t DeltaIn(uint64_t slot) { return static_cast<uint32_t>(slot); }

const uint64_t kFreeSlot = Slot(OffsetTable::kFree, 0);

}  // namespace

size_t OffsetTable::SlotOf(uint32_t offset) const {
  // Fibonacci hashing spreads consecutive offsets (dense keys) apart; multiplying by the capacity
  // and keeping the high half maps onto any capacity, not only powers of two, which is what lets
  // tables grow by 4/3.
  const uint64_t h = static_cast<uint32_t>(offset * 0x9E3779B1u);
  return static_cast<size_t>((h * slots_.size()) >> 32);
}

uint32_t OffsetTable::Get(uint32_t offset) const {
  if (direct()) return offset < direct_.size() ? direct_[offset] : 0;
  if (slots_.empty()) return 0;
  for (size_t i = SlotOf(offset);; i = (i + 1 == slots_.size() ? 0 : i + 1)) {
    const uint64_t s = slots_[i];
    if (OffsetIn(s) == offset) return DeltaIn(s);
    if (s == kFreeSlot) return 0;
  }
}

void OffsetTable::Prefetch(uint32_t offset) const {
  if (direct()) {
    if (offset < direct_.size()) __builtin_prefetch(&direct_[offset]);
  } else if (!slots_.empty()) {
    __builtin_prefetch(&slots_[SlotOf(offset)]);
  }
}

void OffsetTable::Set(uint32_t offset, uint32_t delta) {
  assert(offset < span_ && delta >= 1);
  if (direct()) {
    if (direct_[offset] == 0) ++size_;
    direct_[offset] = delta;
    return;
  }
  if (!slots_.empty()) {
    for (size_t i = SlotOf(offset);; i = (i + 1 == slots_.size() ? 0 : i + 1)) {
      if (OffsetIn(slots_[i]) == offset) {
        slots_[i] = Slot(offset, delta);
        return;
      }
      if (slots_[i] == kFreeSlot) break;
    }
  }
  // A new offset: keep the hashed table at most 3/4 full.
  if ((size_ + 1) * 4 > slots_.size() * 3) {
    Grow();
    if (direct()) {
      direct_[offset] = delta;
      ++size_;
      return;
    }
  }
  InsertHashed(offset, delta);
  ++size_;
}

void OffsetTable::InsertHashed(uint32_t offset, uint32_t delta) {
  size_t i = SlotOf(offset);
  while (slots_[i] != kFreeSlot) i = (i + 1 == slots_.size() ? 0 : i + 1);
  slots_[i] = Slot(offset, delta);
}

void OffsetTable::Grow() {
  const size_t capacity = slots_.empty() ? kFirstCapacity : slots_.size() + (slots_.size() + 2) / 3;
  std::vector<uint64_t> old;
  old.swap(slots_);
  if (capacity * sizeof(uint64_t) >= size_t{span_} * sizeof(uint32_t)) {
    direct_.assign(span_, 0);  // vector(n) and assign(n) allocate exactly n: memory is known
    for (uint64_t s : old) {
      if (s != kFreeSlot) direct_[OffsetIn(s)] = DeltaIn(s);
    }
    return;
  }
  slots_.assign(capacity, kFreeSlot);
  for (uint64_t s : old) {
    if (s != kFreeSlot) InsertHashed(OffsetIn(s), DeltaIn(s));
  }
}

void OffsetTable::Clear() {
  std::vector<uint64_t>().swap(slots_);
  std::vector<uint32_t>().swap(direct_);
  size_ = 0;
}

size_t OffsetTable::MemoryBytes() const {
  return slots_.capacity() * sizeof(uint64_t) + direct_.capacity() * sizeof(uint32_t);
}

}  // namespace kleaf::allocator
