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

// The fraction of a step below which a section is raised ahead of need (R6; config
// sequence.raise_ahead_percent / 100).
inline constexpr double kDefaultRaiseAhead = 0.5;

struct SpaceRules {
  int64_t default_section_size = 100000;
  int64_t default_step = 10000;
  int64_t max_step = kMaxSequenceStep;  // at most kMaxSequenceStep
  double raise_ahead = kDefaultRaiseAhead;  // SequenceCounters' raise_ahead
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

// Reads the committed record of section `section` of the space being served: nullopt when there
// is none (its maximum is 0). It must see every record a committed transaction (standalone: a
// synced write) wrote, and nothing staged that may still abort (docs/architecture.md, R6): a
// section loaded from a raise that then aborted would let values pass a maximum nobody keeps.
using SectionLoader = std::function<Result<std::optional<state::SectionRecord>>(uint64_t section)>;

namespace detail {
// One section as SequenceCounters holds it.
struct CountedSection {
  uint64_t base = 0;       // every key of the section starts here
  uint64_t committed = 0;  // the committed maximum: no value is computed above it (R1 (iv))
  uint64_t high = 0;       // the highest value computed (0: none since loaded or rebased)
  int64_t step = 1;        // the space's step when last asked for a value
  uint64_t wanted = 0;     // a raise to ask for: the maximum it should reach (0: none)
  uint64_t in_flight = 0;  // the maximum of the raise in the transaction under way (0: none)
  uint64_t rebase_to = 0;  // a raise_section's maximum: the keys restart there once it commits
  bool queued = false;     // listed in SequenceCounters::queued_ (wanted or rebase_to set)
  bool at_need = false;    // `wanted` was asked for by a value that needed it, not ahead
  // Scratch of one Next call: the call's id, the highest value its keys start from and how many
  // of its keys fall in the section (a bound on the values it needs).
  uint64_t call = 0;
  uint64_t call_high = 0;
  uint64_t call_keys = 0;
  OffsetTable table;  // offset -> the key's last value - base
};
}  // namespace detail

// The answer of SequenceCounters::Next: the values, or none and `needs_raise` when some section's
// committed maximum is below what the keys need; the raise is then wanted, and the caller commits
// SequenceCounters::TakeRaises() and asks again.
struct SeqNext {
  std::vector<uint64_t> values;
  bool needs_raise = false;
};

// The owner's in-memory counters for one partition (docs/architecture.md, "I5 with a lease", R1 and
// R6). For each section seen since the partition was taken over: `base` (every key starts there),
// the *committed* maximum, raises wanted and in flight, and an OffsetTable from a key's offset to
// its delta over base. Next computes values only up to the committed maximum and keeps every value
// it computes at once, whether or not its answer is ever seen (an aborted batch leaves a gap); a
// value that would pass the maximum is not computed: the raise is wanted instead, ahead of need
// too once less than `raise_ahead` of a step is left. The caller puts TakeRaises() into its next
// durable write and settles them (Settle) when it knows the outcome; only a committed raise moves
// the committed maximum. A section whose committed maximum runs more than `max_delta` past its base
// is rebased (base = maximum, table cleared): every key restarts at the committed maximum, still
// above everything computed, and every delta fits 32 bits. Not thread-safe: one caller at a time
// (the partition's critical section).
class SequenceCounters {
 public:
  // `raise_ahead`: 0 raises only at need; `max_delta`: 2^32 - 1 (what a table holds); tests lower
  // it to reach a rebase without 2^32 calls.
  explicit SequenceCounters(double raise_ahead = kDefaultRaiseAhead,
                            uint32_t max_delta = 0xFFFFFFFF)
      : raise_ahead_(raise_ahead), max_delta_(max_delta) {}
  SequenceCounters(const SequenceCounters&) = delete;
  SequenceCounters& operator=(const SequenceCounters&) = delete;

  // The next value of each of `keys` of `space`, in order; a key listed twice gets two increasing
  // values. Sections not counted are read with `load` (committed records only; a missing record:
  // maximum 0) and counted from then on. All or nothing: when a value would pass its section's
  // committed maximum, no value is computed, the raise (to the highest value needed + step - 1) is
  // wanted and the answer says needs_raise.
  // kFailedPrecondition: a section_size that differs from the one the space's sections were counted
  // or written with; kResourceExhausted: a key would pass 2^64 - 1.
  [[nodiscard]] Result<SeqNext> Next(const state::SpaceRecord& space,
                                     std::span<const uint64_t> keys, const SectionLoader& load);

  // `kleaf state import`'s raise of section `section` of `space` to `max_seq`: wanted, so the next
  // TakeRaises() writes it, and once Settle says it committed every key of the section, counted or
  // not, continues above it, as after a restart. Never lowers a maximum. Answers the section's
  // maximum once the raise is committed. Errors as Next's.
  [[nodiscard]] Result<uint64_t> Raise(const state::SpaceRecord& space, uint64_t section,
                                       uint64_t max_seq, const SectionLoader& load);

  // The raises to write now: each wanted section's maximum, ordered by space and section; each is
  // in flight until Settle. A section with a raise in flight waits for the next call.
  std::vector<state::SectionRecord> TakeRaises();
  // The outcome of `raises` (TakeRaises' answer): committed, each moves its committed maximum
  // (and rebases the section when a raise_section asked for it); otherwise they are dropped, and
  // what is still needed is wanted again by the next Next. Sections forgotten meanwhile are
  // skipped.
  void Settle(std::span<const state::SectionRecord> raises, bool committed);

  // The highest value computed for `key` as far as this owner knows: its value in the counters,
  // or the section's committed maximum (read with `load`) when the section is not counted. Never
  // below a value computed; the key's next value is above it; never above the committed maximum.
  [[nodiscard]] Result<uint64_t> Current(const state::SpaceRecord& space, uint64_t key,
                                         const SectionLoader& load) const;

  // A deleted space's sections, or (Clear) every section, e.g. when the partition is revoked.
  // Raises in flight of them are skipped by Settle.
  void Forget(std::string_view space);
  void Clear();

  // Raises TakeRaises handed out so far: asked for by a value that needed them, or ahead of need
  // (for kleaf_sequence_raises_total{ahead}).
  uint64_t RaisesAtNeed() const { return raises_at_need_; }
  uint64_t RaisesAhead() const { return raises_ahead_; }

  // Heap and object bytes held, counting the allocator's per-block overhead: for the metric and the
  // 16-bytes-per-key budget.
  size_t MemoryBytes() const;
  // Keys with a value above their section's base, and sections counted.
  size_t TrackedKeys() const;
  size_t Sections() const;

 private:
  using Section = detail::CountedSection;
  struct Space {
    int64_t section_size = 0;
    std::unordered_map<uint64_t, Section> sections;  // node-based: Next keeps pointers to entries
  };

  [[nodiscard]] Result<Space*> SpaceFor(const state::SpaceRecord& space);
  [[nodiscard]] Result<Section*> SectionFor(Space& counted, const state::SpaceRecord& space,
                                            uint64_t section, const SectionLoader& load);
  [[nodiscard]] Result<std::optional<uint64_t>> LoadMax(const state::SpaceRecord& space,
                                                        uint64_t section,
                                                        const SectionLoader& load) const;
  Section* Find(std::string_view space, uint64_t section);
  const Section* Find(std::string_view space, uint64_t section) const;
  // The highest value the keys of this call that fall in `s` need, exactly (the rare path).
  static uint64_t ExactNeed(const Section& s, std::span<const uint64_t> keys,
                            std::span<Section* const> sections, uint64_t section_size);
  void Want(const std::string& space, uint64_t section, Section& s, uint64_t max);
  static uint64_t ValueOf(const Section& s, uint32_t offset);

  double raise_ahead_;
  uint32_t max_delta_;
  uint64_t calls_ = 0;
  uint64_t raises_at_need_ = 0;
  uint64_t raises_ahead_ = 0;
  std::map<std::string, Space, std::less<>> spaces_;
  // Sections with a raise wanted or a rebase pending, for TakeRaises (may name forgotten ones).
  std::vector<std::pair<std::string, uint64_t>> queued_;
};

}  // namespace kleaf::allocator
