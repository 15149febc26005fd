// An ID batch as it travels on its stream's topic (StreamTopic below, key = tag): a segment range
// {"tag","mode":"segment","start","end"}, a list {"tag","mode":"snowflake","ids":[…]} of 64-bit
// IDs, or a list {"tag","mode":"uuid7"|"ulid","ids":[…]} of 128-bit IDs in canonical text.
// 64-bit IDs are JSON strings (as in the HTTP API: JavaScript readers lose precision above 2^53);
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
  // kSegment and kSnowflake carry 64-bit integer IDs; kUuid7 (RFC 9562 UUIDv7) and kUlid carry
  // 128-bit IDs as text (Is128Bit).
  enum class Mode { kSegment, kSnowflake, kUuid7, kUlid };
  std::string tag;
  Mode mode = Mode::kSegment;
  int64_t start = 0;  // kSegment: IDs [start, end), unless `ids` lists them
  int64_t end = 0;
  // kSnowflake: IDs in issue order. kSegment from a cluster of more than one datacenter: its IDs,
  // increasing (one residue class, not consecutive), with start and end unused.
  std::vector<int64_t> ids = {};
  // kUuid7: lowercase 8-4-4-4-12 hex; kUlid: 26 uppercase Crockford base32 characters. In issue
  // order (increasing, as numbers and as text).
  std::vector<std::string> texts = {};
  // The consumer group the producer publishes the batch for (producer.group): a consumer of
  // another group must not claim it (docs/ids-topic.md, "One group per stream"). Empty in batches
  // of producers before it was written; those are checked by nothing.
  std::string group = {};

  KLEAF_CLIENT_API int64_t size() const;
  // The i-th ID of a 64-bit batch (kSegment, kSnowflake), 0 <= i < size().
  KLEAF_CLIENT_API int64_t at(int64_t i) const;
  // The i-th ID of any batch as text: a 128-bit ID as it is, a 64-bit one in decimal.
  KLEAF_CLIENT_API std::string text_at(int64_t i) const;
};

// "segment", "snowflake", "uuid7" or "ulid": the batch's "mode" field and the topic's part.
KLEAF_CLIENT_API std::string_view ModeName(IdBatch::Mode mode);
// The mode of a name ModeName gives; false for anything else.
KLEAF_CLIENT_API bool ParseMode(std::string_view name, IdBatch::Mode& mode);
// Whether the mode's IDs are 128-bit text (kUuid7, kUlid) rather than 64-bit integers.
KLEAF_CLIENT_API bool Is128Bit(IdBatch::Mode mode);
// Whether `text` is the canonical text of an ID of the 128-bit `mode`: a UUIDv7 (version 7,
// RFC 9562 variant) in lowercase 8-4-4-4-12 hex, or a ULID in 26 uppercase Crockford base32
// characters (the first at most '7'). One spelling per ID, so that equal IDs are equal strings.
KLEAF_CLIENT_API bool IsCanonical128(IdBatch::Mode mode, std::string_view text);

// The topic that carries the batches of stream (tag, mode) of the ids topic `ids_topic`:
// "<ids_topic>.<mode>.<tag>", e.g. "kleaf.ids.segment.order". Kafka allows only [A-Za-z0-9._-]
// in topic names, so the tag is written with '_' as "__" and ':' as "_c": two streams never
// share a topic. Kafka refuses names longer than 249 characters.
KLEAF_CLIENT_API std::string StreamTopic(std::string_view ids_topic, std::string_view tag,
                                         IdBatch::Mode mode);

KLEAF_CLIENT_API std::string EncodeBatch(const IdBatch& batch);
// Rejects anything that is not a well-formed batch: unknown mode, empty or reversed range,
// negative IDs, missing tag, a 128-bit ID not in canonical text (IsCanonical128). The error says
// which field is wrong.
KLEAF_CLIENT_API std::expected<IdBatch, std::string> DecodeBatch(std::string_view json);

}  // namespace kleaf
