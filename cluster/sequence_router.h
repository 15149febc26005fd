// The sequence side of the gateway's allocator client (docs/architecture.md, "I5 in the cluster"):
// the space records it routes with, and NextSeq and CurrentSeq sent to the partitions of their
// keys' sections, with the values put back in the caller's order.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocator/operations.h"
#include "allocator/worker_registry.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "state/records.h"

namespace kleaf::cluster {

// One request to the owner of one partition of the requests topic: all SequenceRouter needs of a
// transport. KafkaAllocatorClient sends it over Kafka request/reply; unit tests answer by hand.
class PartitionCaller {
 public:
  virtual ~PartitionCaller() = default;
  // The partition that owns `route_key` (a space's name, a section's SectionRouteKey).
  virtual int32_t PartitionOf(std::string_view route_key) const = 0;
  // Sends the operation to `partition` with record key `route_key` and completes `done` once with
  // its answer, on any thread, possibly before returning.
  virtual void Call(int32_t partition, std::string route_key, allocator::op::GetSpace get,
                    allocator::Callback<state::SpaceRecord> done) = 0;
  virtual void Call(int32_t partition, std::string route_key, allocator::op::NextSeq next,
                    allocator::Callback<std::vector<uint64_t>> done) = 0;
  virtual void Call(int32_t partition, std::string route_key, allocator::op::CurrentSeq current,
                    allocator::Callback<uint64_t> done) = 0;
};

// Routes a gateway's sequence calls. Owned by its KafkaAllocatorClient, which it sends through as
// a PartitionCaller. Thread-safe; callbacks run on the thread that completes the PartitionCaller's
// calls (the client's reply thread), or on the caller's for a refused key count.
//
// A space's record lives in the partition of its name; this node keeps each record it read or
// wrote (KeepSpace) for kSpaceFreshNs and goes on using it while it reads it again (section_size
// never changes; a new step or a deletion reaches this node within that time). Concurrent calls
// of a space not kept wait for one read of it. NextSeq sends each key to the partition of its
// section (SectionRouteKey) with the space's section_size and step (the shape a caller gives is
// replaced), and coalesces: the keys of one space and partition that arrive while kSeqInFlight
// requests of them are in flight travel together in the next request. A call's values come back
// in the order of its keys; a call fails, with the error of one of its partitions, when any
// request that carried its keys failed. CurrentSeq goes to the partition of its key's section,
// with the space's section_size.
class SequenceRouter {
 public:
  // How long a space's record read from its partition is used before it is read again (in the
  // background: the old one serves meanwhile). Bounds how late a gateway sees a new step or a
  // deletion; section_size never changes.
  static constexpr int64_t kSpaceFreshNs = 5'000'000'000;
  // NextSeq requests of one space to one partition in flight at a time; keys arriving meanwhile
  // wait and go together in the next request (one round trip for all of them).
  static constexpr int kSeqInFlight = 2;

  // `caller` and `clock` outlive the router, and every call it made through `caller` is completed
  // (or dropped with the caller) before it goes.
  SequenceRouter(PartitionCaller& caller, Clock& clock) : caller_(caller), clock_(clock) {}

  void Route(allocator::op::NextSeq next, allocator::Callback<std::vector<uint64_t>> done);
  void Route(allocator::op::CurrentSeq current, allocator::Callback<uint64_t> done);

  // Keeps (or, with nullopt, drops) what this node knows of a space after it wrote or read it.
  void KeepSpace(const std::string& space, const std::optional<state::SpaceRecord>& record);

 private:
  // Keys of one NextSeq call bound for one partition, and where their values go.
  struct SeqPart {
    std::vector<uint64_t> keys;
    allocator::Callback<std::vector<uint64_t>> done;
  };
  // The requests of one space to one partition: how many are in flight, and the parts waiting.
  struct SeqLane {
    state::SpaceRecord space;
    int in_flight = 0;
    std::deque<SeqPart> waiting;
  };
  struct KnownSpace {
    state::SpaceRecord record;
    int64_t read_ns = 0;
  };

  // Completes `then` with the record of `space`: the one kept if any (read again in the
  // background once it is kSpaceFreshNs old), else read from its partition.
  void WithSpace(const std::string& space, allocator::Callback<state::SpaceRecord> then);
  void LookUpSpace(const std::string& space);
  // Sends `part` on its lane, or leaves it waiting when kSeqInFlight requests are in flight.
  void SubmitSeq(const state::SpaceRecord& space, int32_t partition, SeqPart part);
  // One NextSeq with the keys of `parts`, each part answered with the values of its keys.
  void SendSeq(const state::SpaceRecord& space, int32_t partition, std::vector<SeqPart> parts);
  // Frees the lane's slot, or fills it with the parts waiting.
  void OnSeqAnswered(const std::string& space, int32_t partition);
  // The partition of `space`'s section `section` (its SectionRouteKey).
  int32_t SectionPartition(const state::SpaceRecord& space, uint64_t section) const;

  PartitionCaller& caller_;
  Clock& clock_;
  Mutex mu_;  // never held while calling `caller_` or a callback
  std::unordered_map<std::string, KnownSpace> spaces_ KLEAF_GUARDED_BY(mu_);
  // Lookups of a space's record under way, with the calls waiting for it (none: a refresh).
  std::unordered_map<std::string, std::vector<allocator::Callback<state::SpaceRecord>>> lookups_
      KLEAF_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int32_t>, SeqLane> lanes_ KLEAF_GUARDED_BY(mu_);
};

}  // namespace kleaf::cluster
