// Segment rests: the IDs a gateway's buffers still held at a graceful shutdown, kept in the local
// store and handed out first at the next start of the same node.
#pragma once

#include <string>

#include "allocator/allocator.h"
#include "gateway/segment_cache.h"
#include "state/store.h"

namespace kleaf::gateway {

// Seeds the buffers with the segment rests this node kept at its last graceful shutdown. The
// store deletes them before they are served, so a crash now cannot hand them out twice. Rests of
// another ID space (scope) or of a tag deleted meanwhile are dropped (a gap).
// `scope` names the ID space ("standalone", "cluster:<topic prefix>"). Waits at most 5 s for the
// allocator's answers about the tags. Called once at startup, before the HTTP server starts.
void ResumeSegmentRests(state::Store& store, allocator::Allocator& allocator,
                        SegmentCache& segments, const std::string& scope);

// Keeps what the buffers hold but never handed out for the next start of this node.
// Drains `segments`: call after the HTTP server and the waits stopped.
void KeepSegmentRests(state::Store& store, SegmentCache& segments, const std::string& scope);

}  // namespace kleaf::gateway
