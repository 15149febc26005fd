// Leaf's monitor views (/cache, /db) as JSON, for Leaf users' tools (docs/migrating-from-leaf.md):
// Leaf's field names over kleaf's segment buffers and tag records.
#pragma once

#include <string>
#include <vector>

#include "gateway/segment_buffer.h"
#include "state/records.h"

namespace kleaf::gateway {

// /cache: Leaf's SegmentBufferView of each buffered tag, by tag:
// {"<tag>":{"key","initOk","nextReady","pos","value0","max0","step0","value1","max1","step1"}}.
// kleaf keeps the active and the standby segment, not Leaf's two slots that swap: segment 0 is the
// active one (so `pos` is always 0), segment 1 the standby. value: the next ID the segment hands
// out; max: its end (exclusive, as Leaf's); step: its size. A segment kleaf does not hold reads 0.
std::string LeafCacheJson(const std::vector<SegmentBuffer::Snapshot>& buffers);

// /db: the tag records as Leaf's leaf_alloc rows, in the table's column names:
// {"items":[{"biz_tag","max_id","step","description","update_time"}]} (update_time: FormatUtcMs).
std::string LeafDbJson(const std::vector<state::TagRecord>& tags);

}  // namespace kleaf::gateway
