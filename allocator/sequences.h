// Strictly increasing sequences per key (WeChat seqsvr's model; docs/architecture.md, "I5:
// sequences only go up"): the rules of a space's record, where a key's section lives, and the
// owner's in-memory counters of one partition. Pure: no I/O besides the loader a caller passes.
//
// A space's keys are unsigned 64-bit integers, never stored one record per key. Keys are grouped
// in sections of `section_size` consecutive keys; each section has one persisted maximum (a
// state::SectionRecord): every value ever handed out for a key of the section is at most that
// maximum. The owner keeps each active key's value in memory and raises the maximum, durably and
// before any value above the old one is handed out, when a key's next value would pass it. A new
// owner starts every key of a section at the persisted maximum: above everything handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocator/offset_table.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// Offsets within a section are 32-bit, and OffsetTable keeps 0xFFFFFFFF for a free slot.
inline constexpr int64_t kMaxSectionSize = 0xFFFFFFFF;
// The largest step of a space. A failover moves every key of a section up to the section's
// maximum, which runs up to `step` ahead of the busiest key: step bounds that jump. It also keeps
// rebases (SequenceCounters) rare: a section rebases when its maximum passes base + 2^32 - 1, at
// least 4294 raises of the largest step.
inline constexpr int64_t kMaxSequenceStep = 1'000'000;
// The most keys one NextSeq may ask for (the HTTP fan-out call's limit).
inline constexpr size_t kMaxSeqKeys = 1000;
// A next_seq of `keys` keys: 1 to kMaxSeqKeys, else kInvalidArgument saying so (the one check of
// the gateway's client and of the allocator).
[[nodiscard]] Result<void> CheckSeqKeyCount(size_t keys);

// What PUT /api/v1/spaces/{space} asks for.
struct SpaceUpdate {
  std::optional<int64_t> section_size;
  std::optional<int64_t> step;
  std::optional<std::string> description;
};

struct SpaceRules {
  int64_t default_section_size = 100000;
  int64_t default_step = 10000;
  int64_t max_step = kMaxSequenceStep;  // at most kMaxSequenceStep
};

// A space's name follows the tag rules (base/tag.h); kInvalidArgument naming them otherwise.
[[nodiscard]] Result<void> ValidateSpaceName(std::string_view space);

// Applies an admin update to an existing record (or creates one). section_size is in
// [1, kMaxSectionSize] and never changes once the space exists, deleted or not
// (kFailedPrecondition naming the field): keys would move to other sections, whose maxima do not
// cover the values they had. A re-created deleted space keeps its section_size (its sections keep
// their maxima) and starts again from the default step and an empty description.
[[nodiscard]] Result<state::SpaceRecord> ApplySpaceUpdate(
    const std::optional<state::SpaceRecord>& existing, std::string_view space,
    const SpaceUpdate& update, const SpaceRules& rules, int64_t now_ms);

// The section of `key` (section_size >= 1), and the key's offset within it (< section_size).
uint64_t SectionOf(uint64_t key, uint64_t section_size);
uint32_t OffsetInSection(uint64_t key, uint64_t section_size);

// The route key of a section, "<space>#<section>" (section in decimal): the partition that owns a
// section, its counters and its SectionRecord is PartitionFor(route key) (cluster/, as a tag's is
// PartitionFor(tag)). '#' is no tag character, so no route key of a section equals a tag's, a
// space's or the worker registry's. The sections of one space spread over every partition.
std::string SectionRouteKey(std::string_view space, uint64_t section);

// Reads the persisted record of section `section` of the space being served (the store, or the
// store plus a batch's staged writes): nullopt when there is none (its maximum is 0). It must see
// every record a committed plan wrote.
using SectionLoader = std::function<Result<std::optional<state::SectionRecord>>(uint64_t section)>;

class SequenceCounters;

namespace detail {
// One section as SequenceCounters holds it.
struct CountedSection {
  uint64_t base = 0;  // every key of the section starts here
  uint64_t max = 0;   // the persisted maximum
  OffsetTable table;  // offset -> the key's last value - base
};
}  // namespace detail

// The values of one transaction (a batch of requests), computed by SequenceCounters::Next and not
// yet handed out. Its Raises() go into the transaction; once that has committed, Commit(plan)
// makes the counters remember the values; dropping the plan instead (an aborted transaction)
// leaves the counters as they were, and the next plan computes the same values again, which is
// right because none of them was handed out. Move-only; one open plan per SequenceCounters at a
// time, and a plan must not outlive its counters.
class SeqPlan {
 public:
  SeqPlan() = default;
  SeqPlan(SeqPlan&& other) noexcept;
  SeqPlan& operator=(SeqPlan&& other) noexcept;
  SeqPlan(const SeqPlan&) = delete;
  SeqPlan& operator=(const SeqPlan&) = delete;
  ~SeqPlan();  // an uncommitted plan is dropped: its counters may begin another

  // The section records to write in the plan's transaction: each section whose maximum this plan
  // raises, with its new maximum; ordered by space and section.
  std::vector<state::SectionRecord> Raises() const;
  // Still to be committed or dropped.
  bool open() const { return owner_ != nullptr; }

 private:
  friend class SequenceCounters;
  struct Section {
    uint64_t base = 0;           // every key of the section not in the counters' table is here
    uint64_t persisted_max = 0;  // the maximum the store holds
    uint64_t max = 0;            // the maximum after this plan
    // The counters' entry, valid while the plan's epoch is the counters' (checked before every
    // use); null: loaded by this plan, Commit adds it.
    const detail::CountedSection* counted = nullptr;
    std::unordered_map<uint32_t, uint64_t> values;  // offset -> the key's last value in the plan
    // Raised by Raise: every key restarts at base (the raised maximum); the counters' values of
    // the section are dropped on Commit.
    bool rebased = false;
  };
  struct Space {
    int64_t section_size = 0;
    std::unordered_map<uint64_t, Section> sections;  // node-based: Next keeps pointers to entries
  };
  void Close();

  SequenceCounters* owner_ = nullptr;
  uint64_t id_ = 0;
  uint64_t epoch_ = 0;  // the counters' epoch at Begin
  std::map<std::string, Space, std::less<>> spaces_;
};

// The owner's in-memory counters for one partition: for each section seen since the partition was
// taken over, `base` (the persisted maximum when the section was loaded or last rebased: every key
// starts there), `max` (the persisted maximum now) and an OffsetTable from a key's offset to its
// delta over base. A section whose max runs more than `max_delta` past its base is rebased
// (base = max, table cleared): every key restarts at the persisted maximum, still above
// everything handed out, and every delta fits 32 bits. Not thread-safe: the partition's thread
// calls it (MemoryBytes too; publish the figure to a gauge from there).
class SequenceCounters {
 public:
  // `max_delta`: 2^32 - 1 (what a table holds); tests lower it to reach a rebase without 2^32
  // calls.
  explicit SequenceCounters(uint32_t max_delta = 0xFFFFFFFF) : max_delta_(max_delta) {}
  SequenceCounters(const SequenceCounters&) = delete;
  SequenceCounters& operator=(const SequenceCounters&) = delete;

  // A new plan; kFailedPrecondition while another is open (two plans computed from the same
  // state would hand out the same values, and the later write could lower a maximum).
  [[nodiscard]] Result<SeqPlan> Begin();

  // The next value of each of `keys` of `space`, in order, on top of the counters and of what
  // `plan` holds already; a key listed twice gets two increasing values. Sections neither counted
  // nor in the plan are read with `load` (a missing record: maximum 0). A value above a section's
  // maximum raises the plan's maximum of it to value + step - 1, so the key that passed can take
  // step - 1 more values without a write. Changes only the plan; a failure gives it no value (it
  // may keep sections it loaded, which are as persisted).
  // kFailedPrecondition: a stale or closed plan, or a section_size that differs from the one the
  // space's sections were counted or written with; kResourceExhausted: a key would pass 2^64 - 1.
  [[nodiscard]] Result<std::vector<uint64_t>> Next(SeqPlan& plan, const state::SpaceRecord& space,
                                                   std::span<const uint64_t> keys,
                                                   const SectionLoader& load) const;

  // Raises the maximum of section `section` of `space` to `max_seq` in `plan` (never lowers it:
  // a maximum as high or higher is kept), for `kleaf state import`. A raised section is rebased in
  // the plan: every key of it, counted or not, continues above `max_seq`, as after a restart, so
  // no key hands out a value at or below the restored maximum. Answers the section's maximum after
  // the plan. Errors as Next's (a section_size other than the section's is kFailedPrecondition).
  [[nodiscard]] Result<uint64_t> Raise(SeqPlan& plan, const state::SpaceRecord& space,
                                       uint64_t section, uint64_t max_seq,
                                       const SectionLoader& load) const;

  // After `plan`'s Raises() are durable with its replies: the counters take its values. The plan is
  // consumed whatever happens. A plan begun before a Clear or Forget is refused
  // (kFailedPrecondition) and its sections are forgotten, so they reload at their persisted
  // maximum, which is above every value of the plan; forgetting is always safe.
  [[nodiscard]] Result<void> Commit(SeqPlan&& plan);

  // The highest value handed out for `key` as far as this owner knows: its value in the counters,
  // or the section's persisted maximum (read with `load`) when the section is not counted. Never
  // below a value handed out; the key's next value is above it.
  [[nodiscard]] Result<uint64_t> Current(const state::SpaceRecord& space, uint64_t key,
                                         const SectionLoader& load) const;

  // A deleted space's sections, or (Clear) every section, e.g. when the partition is revoked. Any
  // open plan becomes stale.
  void Forget(std::string_view space);
  void Clear();

  // Heap and object bytes held, counting the allocator's per-block overhead: for the metric and the
  // 16-bytes-per-key budget.
  size_t MemoryBytes() const;
  // Keys with a value above their section's base, and sections counted.
  size_t TrackedKeys() const;
  size_t Sections() const;

 private:
  friend class SeqPlan;
  using Section = detail::CountedSection;
  struct Space {
    int64_t section_size = 0;
    std::unordered_map<uint64_t, Section> sections;
  };

  [[nodiscard]] Result<void> CheckPlan(const SeqPlan& plan) const;
  [[nodiscard]] Result<SeqPlan::Space*> PlanSpace(SeqPlan& plan,
                                                  const state::SpaceRecord& space) const;
  [[nodiscard]] Result<std::vector<SeqPlan::Section*>> Touch(SeqPlan::Space& planned,
                                                             const state::SpaceRecord& space,
                                                             std::span<const uint64_t> keys,
                                                             const SectionLoader& load) const;
  [[nodiscard]] Result<SeqPlan::Section> Loaded(const state::SpaceRecord& space, uint64_t section,
                                                const SectionLoader& load) const;
  [[nodiscard]] Result<SeqPlan::Section> Entry(const state::SpaceRecord& space, uint64_t section,
                                               const SectionLoader& load) const;
  const Section* Counted(std::string_view space, uint64_t section) const;
  static uint64_t ValueOf(const SeqPlan::Section& planned, uint32_t offset);
  [[nodiscard]] static Result<void> CheckRoom(const state::SpaceRecord& space,
                                              std::span<const uint64_t> keys,
                                              std::span<SeqPlan::Section* const> sections);
  void Apply(std::string_view space, int64_t section_size, uint64_t section,
             const SeqPlan::Section& planned);

  uint32_t max_delta_;
  uint64_t epoch_ = 0;      // bumped by every Commit, Forget and Clear
  uint64_t last_plan_ = 0;  // ids of plans
  uint64_t open_plan_ = 0;  // the open plan's id; 0: none
  std::map<std::string, Space, std::less<>> spaces_;
};

}  // namespace kleaf::allocator
