// The compact map SequenceCounters (sequences.h) keeps per section: from a key's offset within its
// section to how far the key has gone above the section's base. Sized for ten million active keys
// on one allocator: at most 16 bytes per key once a section holds more than a few keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kleaf::allocator {

// Offset (uint32) -> delta (uint32, >= 1); an offset never set reads as delta 0.
//
// Two layouts, switched on growth, never back (until Clear):
//  - hashed: open addressing with linear probing, one 8-byte slot per entry (offset in the high
//    half, delta in the low half; offset 0xFFFFFFFF marks a free slot, which is why offsets, and so
//    section sizes, stay below 2^32 - 1). Grown by 4/3 when 3/4 full, so between 9/16 and 3/4
//    full: 10.7 to 14.3 bytes per entry.
//  - direct: one uint32 delta per offset of the section, 4 bytes times the section size, chosen as
//    soon as it is no larger than the next hashed table (so it costs at most the 14.3 bytes per
//    entry of the hashed layout it replaces, and 4 bytes per key in a full section).
class OffsetTable {
 public:
  // The offset that marks a free slot: never a valid offset.
  static constexpr uint32_t kFree = 0xFFFFFFFF;

  // Offsets are below `span` (the section size, at most kFree).
  explicit OffsetTable(uint32_t span) : span_(span) {}

  // 0 when `offset` was never set.
  uint32_t Get(uint32_t offset) const;
  // Asks the CPU to bring `offset`'s slot into its cache, so that a Get or Set of it a few keys
  // later does not wait for memory (a fan-out's keys are scattered over tables of megabytes).
  void Prefetch(uint32_t offset) const;
  // Sets `offset`'s delta (>= 1; offset < span).
  void Set(uint32_t offset, uint32_t delta);
  // Every offset back to 0, memory released.
  void Clear();

  size_t size() const { return size_; }
  bool direct() const { return !direct_.empty(); }
  // Heap bytes held (the tables themselves, not this object).
  size_t MemoryBytes() const;

 private:
  size_t SlotOf(uint32_t offset) const;
  // Room for one more entry: a larger hashed table or the direct layout.
  void Grow();
  void InsertHashed(uint32_t offset, uint32_t delta);

  uint32_t span_;
  size_t size_ = 0;
  std::vector<uint64_t> slots_;   // hashed layout
  std::vector<uint32_t> direct_;  // direct layout: delta by offset
};

}  // namespace kleaf::allocator
