// Everything a kleaf cluster writes to Kafka besides the state records (state/records.h), in one
// place: the allocation requests and their replies, the layout record, and the consumed position
// of a requests partition. JSON lives here and nowhere else in cluster/; the operations and their
// results are typed (allocator/operations.h) on both sides of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// The value of a RequestsOffsetKey record (cluster/restore.h): the next offset, decimal.
std::string EncodeRequestsOffset(int64_t next);
std::optional<int64_t> DecodeRequestsOffset(std::string_view value);

}  // namespace kleaf::cluster::wire
