// An ID batch as it travels on its stream's topic (StreamTopic below, key = tag): a segment range
// {"tag","mode":"segment","start","end"} or a list {"tag","mode":"snowflake","ids":[…]}.
// IDs are JSON strings (as in the HTTP API: JavaScript readers lose precision above 2^53);
// the decoder also accepts numbers. Part of the installed client library.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "kleaf/export.h"

namespace kleaf {

struct IdBatch {
  enum class Mode { kSegment, kSnowflake };
  std::string tag;
  Mode mode = Mode::kSegment;
  int64_t start = 0;          // kSegment: IDs [start, end)
  int64_t end = 0;
  std::vector<int64_t> ids;   // kSnowflake: IDs in issue order

  KLEAF_CLIENT_API int64_t size() const;
  // The i-th ID of the batch, 0 <= i < size().
  KLEAF_CLIENT_API int64_t at(int64_t i) const;
};

KLEAF_CLIENT_API std::string_view ModeName(IdBatch::Mode mode);  // "segment" or "snowflake"

// The topic that carries the batches of stream (tag, mode) of the ids topic `ids_topic`:
// "<ids_topic>.<mode>.<tag>", e.g. "kleaf.ids.segment.order". Kafka allows only [A-Za-z0-9._-]
// in topic names, so the tag is written with '_' as "__" and ':' as "_c": two streams never
// share a topic. Kafka refuses names longer than 249 characters.
KLEAF_CLIENT_API std::string StreamTopic(std::string_view ids_topic, std::string_view tag,
                                         IdBatch::Mode mode);

KLEAF_CLIENT_API std::string EncodeBatch(const IdBatch& batch);
// Rejects anything that is not a well-formed batch: unknown mode, empty or reversed range,
// negative IDs, missing tag. The error says which field is wrong.
KLEAF_CLIENT_API std::expected<IdBatch, std::string> DecodeBatch(std::string_view json);

}  // namespace kleaf
