// Everything a kleaf cluster writes to Kafka besides the state records (state/records.h), in one
// place: the allocation requests and their replies, the layout record, and the consumed position
// of a requests partition. JSON lives here and nowhere else in cluster/; the operations and their
// results are typed (allocator/operations.h) on both sides of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/operations.h"
#include "base/error.h"
#include "cluster/topics.h"

namespace kleaf::cluster::wire {

// A request as it travels: the operation, and the partition count its sender routed it with
// (0: not said; an allocator with another count refuses it, CheckRoute).
struct Envelope {
  allocator::Request request;
  int32_t partitions = 0;
};
std::string EncodeRequest(const Envelope& envelope);
// kInvalidArgument for a request that is not one (malformed JSON, unknown op).
[[nodiscard]] Result<Envelope> DecodeRequest(std::string_view json);

// The reply to an operation: its result or its error. The type of the result says which
// operation's reply it is, so a reply is decoded as the result the sender asked for.
std::string EncodeReply(const Result<allocator::Segment>& reply);
std::string EncodeReply(const Result<state::TagRecord>& reply);
std::string EncodeReply(const Result<std::vector<state::TagRecord>>& reply);
std::string EncodeReply(const Result<allocator::WorkerLeaseInfo>& reply);
std::string EncodeReply(const Result<allocator::WorkerCounts>& reply);
std::string EncodeReply(const Result<state::SpaceRecord>& reply);
std::string EncodeReply(const Result<std::vector<state::SpaceRecord>>& reply);
std::string EncodeReply(const Result<std::vector<uint64_t>>& reply);  // NextSeq's values
std::string EncodeReply(
    const Result<uint64_t>& reply);  // CurrentSeq's value, RaiseSection's maximum
// A reply that is only an error (a request that could not be decoded or routed).
std::string EncodeError(const Error& error);
// kInternal for a reply that is not one; the allocator's error as it sent it.
template <typename T>
[[nodiscard]] Result<T> DecodeReply(std::string_view json);

std::string EncodeLayout(const ClusterLayout& layout);
[[nodiscard]] Result<ClusterLayout> DecodeLayout(std::string_view json);

// The owner hop's calls (docs/operations.md, "Sequence leases"). One call for one partition is the
// envelope alone (POST /internal/v1/seq/<p>); calls of several partitions of one owner travel in
// one POST /internal/v1/seq as parts "<partition> <length>\n<envelope>", and come back as answers
// "<status> <generation> <length>\n<reply>" in the same order.
struct HopCall {
  int32_t partition = 0;
  std::string request;  // EncodeRequest's
};
struct HopReply {
  int status = 200;
  std::string body;         // EncodeReply's JSON, or EncodeError's
  uint64_t generation = 0;  // R8: the generation of the partition's lease at the owner (0: none)
};
// At most this many parts in one call (a call of more is refused whole).
inline constexpr size_t kMaxHopCalls = 1024;
std::string EncodeHopCalls(const std::vector<HopCall>& calls);
// kInvalidArgument for a body that is not one, or of more than kMaxHopCalls parts.
[[nodiscard]] Result<std::vector<HopCall>> DecodeHopCalls(std::string_view body);
std::string EncodeHopReplies(const std::vector<HopReply>& replies);
// kInternal for a body that is not one.
[[nodiscard]] Result<std::vector<HopReply>> DecodeHopReplies(std::string_view body);

// The value of a RequestsOffsetKey record (cluster/restore.h): the next offset, decimal.
std::string EncodeRequestsOffset(int64_t next);
std::optional<int64_t> DecodeRequestsOffset(std::string_view value);

}  // namespace kleaf::cluster::wire
