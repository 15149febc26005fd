#include "cluster/sequence_router.h"

#include <cstddef>
#include <memory>

namespace kleaf::cluster {
namespace {

namespace op = allocator::op;
using allocator::Callback;

}  // namespace

void SequenceRouter::KeepSpace(const std::string& space,
                               const std::optional<state::SpaceRecord>& record) {
  MutexLock lock(mu_);
  if (record) {
    spaces_[space] = KnownSpace{*record, clock_.MonotonicNs()};
  } else {
    spaces_.erase(space);
  }
}

void SequenceRouter::WithSpace(const std::string& space, Callback<state::SpaceRecord> then) {
  std::optional<state::SpaceRecord> known;
  bool look_up = false;
  {
    MutexLock lock(mu_);
    if (auto it = spaces_.find(space); it != spaces_.end()) {
      known = it->second.record;
      // Stale: read it again, and meanwhile go on with it (its section_size cannot have changed).
      look_up = clock_.MonotonicNs() - it->second.read_ns >= kSpaceFreshNs &&
                lookups_.try_emplace(space).second;
    } else {
      auto& waiting = lookups_[space];
      waiting.push_back(then);
      look_up = waiting.size() == 1;
    }
  }
  if (look_up) LookUpSpace(space);
  if (known) then(std::move(*known));
}

void SequenceRouter::LookUpSpace(const std::string& space) {
  // The partition of GetSpace's route key, the space's name (allocator::RouteKey).
  caller_.Call(caller_.PartitionOf(space), space, op::GetSpace{space},
               Callback<state::SpaceRecord>([this, space](Result<state::SpaceRecord> r) {
                 // Kept as the answer to any GetSpace is (KafkaAllocatorClient::Route).
                 if (r) KeepSpace(space, *r);
                 if (!r && r.error().code == Code::kNotFound) KeepSpace(space, std::nullopt);
                 std::vector<Callback<state::SpaceRecord>> waiting;
                 {
                   MutexLock lock(mu_);
                   if (auto it = lookups_.find(space); it != lookups_.end()) {
                     waiting = std::move(it->second);
                     lookups_.erase(it);
                   }
                 }
                 for (auto& then : waiting) then(r);
               }));
}

int32_t SequenceRouter::SectionPartition(const state::SpaceRecord& space, uint64_t section) const {
  return caller_.PartitionOf(allocator::SectionRouteKey(space.space, section));
}

void SequenceRouter::Route(op::NextSeq next, Callback<std::vector<uint64_t>> done) {
  if (auto count = allocator::CheckSeqKeyCount(next.keys.size()); !count) {
    return done(std::unexpected(count.error()));
  }
  WithSpace(
      next.space,
      Callback<state::SpaceRecord>([this, keys = std::move(next.keys),
                                    done = std::move(done)](Result<state::SpaceRecord> space) {
        if (!space) return done(std::unexpected(space.error()));
        // The keys of each partition, in the caller's order (a key's values must rise in it).
        // A fan-out's keys fall in few sections: each section's partition is hashed once.
        std::map<int32_t, std::vector<size_t>> by_partition;
        std::unordered_map<uint64_t, int32_t> partition_of_section;
        for (size_t i = 0; i < keys.size(); ++i) {
          const uint64_t section =
              allocator::SectionOf(keys[i], static_cast<uint64_t>(space->section_size));
          auto [it, fresh] = partition_of_section.try_emplace(section, 0);
          if (fresh) it->second = SectionPartition(*space, section);
          by_partition[it->second].push_back(i);
        }
        if (by_partition.size() == 1) {
          return SubmitSeq(*space, by_partition.begin()->first, SeqPart{keys, done});
        }
        // The answers of every partition, each value put back at its key's position; the call
        // fails when any of them failed (the values of the others are dropped: their keys' next
        // values still rise above them).
        struct Gather {
          Mutex mu;
          std::vector<uint64_t> values KLEAF_GUARDED_BY(mu);
          size_t left KLEAF_GUARDED_BY(mu) = 0;
          std::optional<Error> error KLEAF_GUARDED_BY(mu);
          Callback<std::vector<uint64_t>> done;
        };
        auto g = std::make_shared<Gather>();
        {
          MutexLock lock(g->mu);
          g->values.resize(keys.size());
          g->left = by_partition.size();
        }
        g->done = done;
        for (auto& [p, positions] : by_partition) {
          std::vector<uint64_t> part_keys;
          part_keys.reserve(positions.size());
          for (size_t i : positions) part_keys.push_back(keys[i]);
          SubmitSeq(*space, p,
                    SeqPart{std::move(part_keys), [g, positions](Result<std::vector<uint64_t>> r) {
                              std::optional<Result<std::vector<uint64_t>>> all;
                              {
                                MutexLock lock(g->mu);
                                if (!r) {
                                  g->error = r.error();
                                } else {
                                  for (size_t j = 0; j < positions.size(); ++j) {
                                    g->values[positions[j]] = (*r)[j];
                                  }
                                }
                                if (--g->left > 0) return;
                                if (g->error) {
                                  all = std::unexpected(*g->error);
                                } else {
                                  all = std::move(g->values);
                                }
                              }
                              g->done(std::move(*all));
                            }});
        }
      }));
}

void SequenceRouter::SubmitSeq(const state::SpaceRecord& space, int32_t partition, SeqPart part) {
  {
    MutexLock lock(mu_);
    SeqLane& lane = lanes_[{space.space, partition}];
    lane.space = space;
    if (lane.in_flight >= kSeqInFlight) {
      lane.waiting.push_back(std::move(part));
      return;
    }
    ++lane.in_flight;
  }
  std::vector<SeqPart> parts;
  parts.push_back(std::move(part));
  SendSeq(space, partition, std::move(parts));
}

void SequenceRouter::SendSeq(const state::SpaceRecord& space, int32_t partition,
                             std::vector<SeqPart> parts) {
  op::NextSeq next{space.space, {}, op::SpaceShape{space.section_size, space.step}};
  for (const auto& part : parts)
    next.keys.insert(next.keys.end(), part.keys.begin(), part.keys.end());
  const uint64_t section =
      allocator::SectionOf(next.keys.front(), static_cast<uint64_t>(space.section_size));
  auto shared = std::make_shared<std::vector<SeqPart>>(std::move(parts));
  caller_.Call(
      partition, allocator::SectionRouteKey(space.space, section), std::move(next),
      Callback<std::vector<uint64_t>>(
          [this, name = space.space, partition, shared](Result<std::vector<uint64_t>> r) {
            size_t total = 0;
            for (const auto& part : *shared) total += part.keys.size();
            if (r && r->size() != total) {
              r = Fail(Code::kInternal, "the allocator answered " + std::to_string(r->size()) +
                                            " values for " + std::to_string(total) + " keys");
            }
            size_t at = 0;
            for (auto& part : *shared) {
              if (!r) {
                part.done(std::unexpected(r.error()));
                continue;
              }
              const auto from = r->begin() + static_cast<std::ptrdiff_t>(at);
              at += part.keys.size();
              part.done(std::vector<uint64_t>(from, r->begin() + static_cast<std::ptrdiff_t>(at)));
            }
            OnSeqAnswered(name, partition);
          }));
}

void SequenceRouter::OnSeqAnswered(const std::string& space, int32_t partition) {
  std::vector<SeqPart> next;
  state::SpaceRecord record;
  {
    MutexLock lock(mu_);
    auto it = lanes_.find({space, partition});
    if (it == lanes_.end()) return;
    SeqLane& lane = it->second;
    --lane.in_flight;
    size_t keys = 0;
    // Every part fits in one request (a call has at most kMaxSeqKeys keys).
    while (!lane.waiting.empty() &&
           (next.empty() || keys + lane.waiting.front().keys.size() <= allocator::kMaxSeqKeys)) {
      keys += lane.waiting.front().keys.size();
      next.push_back(std::move(lane.waiting.front()));
      lane.waiting.pop_front();
    }
    if (next.empty()) {
      if (lane.in_flight == 0) lanes_.erase(it);
      return;
    }
    ++lane.in_flight;
    record = lane.space;
  }
  SendSeq(record, partition, std::move(next));
}

void SequenceRouter::Route(op::CurrentSeq current, Callback<uint64_t> done) {
  WithSpace(current.space,
            Callback<state::SpaceRecord>([this, key = current.key, done = std::move(done)](
                                             Result<state::SpaceRecord> space) {
              if (!space) return done(std::unexpected(space.error()));
              const uint64_t section =
                  allocator::SectionOf(key, static_cast<uint64_t>(space->section_size));
              caller_.Call(SectionPartition(*space, section),
                           allocator::SectionRouteKey(space->space, section),
                           op::CurrentSeq{space->space, key, space->section_size}, done);
            }));
}

}  // namespace kleaf::cluster
