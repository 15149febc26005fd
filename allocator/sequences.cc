#include "allocator/sequences.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "allocator/allocation.h"
#include "base/tag.h"

namespace kleaf::allocator {

Result<void> CheckSeqKeyCount(size_t keys) {
  if (keys >= 1 && keys <= kMaxSeqKeys) return {};
  return Fail(Code::kInvalidArgument, "a next_seq asks for 1 to " + std::to_string(kMaxSeqKeys) +
                                          " keys, not " + std::to_string(keys));
}
namespace {

constexpr uint64_t kMaxValue = std::numeric_limits<uint64_t>::max();

// The fields of `update`, checked and set on r. `existing`: the record before the update, if any.
[[nodiscard]] Result<void> ApplySpaceFields(state::SpaceRecord& r,
                                            const std::optional<state::SpaceRecord>& existing,
                                            const SpaceUpdate& update, int64_t max_step) {
  if (update.section_size) {
    if (*update.section_size < 1 || *update.section_size > kMaxSectionSize) {
      return Fail(Code::kInvalidArgument,
                  "section_size: must be between 1 and " + std::to_string(kMaxSectionSize));
    }
    if (existing && *update.section_size != existing->section_size) {
      return Fail(Code::kFailedPrecondition,
                  "section_size: cannot change from " + std::to_string(existing->section_size) +
                      " to " + std::to_string(*update.section_size) +
                      " (keys would move to sections whose maxima do not cover their values); "
                      "use a new space");
    }
    r.section_size = *update.section_size;
  }
  if (update.step) {
    if (*update.step < 1 || *update.step > max_step) {
      return Fail(Code::kInvalidArgument,
                  "step: must be between 1 and " + std::to_string(max_step));
    }
    r.step = *update.step;
  }
  return ApplyDescription(update.description, r.description);
}

// A space as a request names it: a valid name, a section_size that OffsetTable can index and a
// step that moves.
[[nodiscard]] Result<void> CheckSpace(const state::SpaceRecord& space) {
  if (auto v = ValidateSpaceName(space.space); !v) return v;
  if (space.section_size < 1 || space.section_size > kMaxSectionSize || space.step < 1) {
    return Fail(Code::kInvalidArgument, "space '" + space.space + "': section_size " +
                                            std::to_string(space.section_size) + " or step " +
                                            std::to_string(space.step) + " out of range");
  }
  return {};
}

Error OtherSectionSize(const state::SpaceRecord& space, int64_t known, const char* where) {
  return Error{Code::kFailedPrecondition, "space '" + space.space + "': asked with section_size " +
                                              std::to_string(space.section_size) +
                                              ", but its sections were " + where + " with " +
                                              std::to_string(known) +
                                              " (every node must map keys to sections alike)"};
}

Error NotOpen() {
  return Error{Code::kFailedPrecondition,
               "the sequence plan is not open on these counters (committed, dropped or another "
               "partition's)"};
}

// v + step - 1, or the largest value when that would wrap.
uint64_t RaisedMax(uint64_t v, int64_t step) {
  const auto extra = static_cast<uint64_t>(step - 1);
  return v > kMaxValue - extra ? kMaxValue : v + extra;
}

}  // namespace

Result<void> ValidateSpaceName(std::string_view space) {
  if (IsValidTag(space)) return {};
  return Fail(Code::kInvalidArgument,
              "invalid space: a space name is 1-128 characters of [A-Za-z0-9_.:-]");
}

Result<state::SpaceRecord> ApplySpaceUpdate(const std::optional<state::SpaceRecord>& existing,
                                            std::string_view space, const SpaceUpdate& update,
                                            const SpaceRules& rules, int64_t now_ms) {
  if (auto v = ValidateSpaceName(space); !v) return std::unexpected(v.error());
  state::SpaceRecord r;
  if (existing) {
    r = *existing;
  } else {
    r.space = std::string(space);
    r.section_size = rules.default_section_size;
    r.step = rules.default_step;
  }
  if (existing && existing->deleted) {
    // A re-created space keeps section_size (its sections' maxima stay valid), nothing else.
    r.step = rules.default_step;
    r.description.clear();
  }
  r.deleted = false;
  if (auto fields = ApplySpaceFields(r, existing, update, rules.max_step); !fields) {
    return std::unexpected(fields.error());
  }
  r.update_time_ms = now_ms;
  return r;
}

uint64_t SectionOf(uint64_t key, uint64_t section_size) { return key / section_size; }

uint32_t OffsetInSection(uint64_t key, uint64_t section_size) {
  return static_cast<uint32_t>(key % section_size);
}

std::string SectionRouteKey(std::string_view space, uint64_t section) {
  return std::string(space) + "#" + std::to_string(section);
}

// ---------------------------------------------------------------------------------------------
// SeqPlan

SeqPlan::SeqPlan(SeqPlan&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      id_(other.id_),
      epoch_(other.epoch_),
      spaces_(std::move(other.spaces_)) {}

SeqPlan& SeqPlan::operator=(SeqPlan&& other) noexcept {
  if (this != &other) {
    Close();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = other.id_;
    epoch_ = other.epoch_;
    spaces_ = std::move(other.spaces_);
  }
  return *this;
}

SeqPlan::~SeqPlan() { Close(); }

void SeqPlan::Close() {
  if (owner_ && owner_->open_plan_ == id_) owner_->open_plan_ = 0;
  owner_ = nullptr;
}

std::vector<state::SectionRecord> SeqPlan::Raises() const {
  std::vector<state::SectionRecord> raises;
  for (const auto& [name, space] : spaces_) {
    for (const auto& [section, s] : space.sections) {
      if (s.max > s.persisted_max) {
        raises.push_back(state::SectionRecord{name, section, space.section_size, s.max});
      }
    }
  }
  std::sort(raises.begin(), raises.end(), [](const auto& a, const auto& b) {
    return std::tie(a.space, a.section) < std::tie(b.space, b.section);
  });
  return raises;
}

// ---------------------------------------------------------------------------------------------
// SequenceCounters: planning

Result<SeqPlan> SequenceCounters::Begin() {
  if (open_plan_ != 0) {
    return Fail(Code::kFailedPrecondition,
                "a sequence plan is open: commit or drop it before beginning another");
  }
  SeqPlan plan;
  plan.owner_ = this;
  plan.id_ = ++last_plan_;
  plan.epoch_ = epoch_;
  open_plan_ = plan.id_;
  return plan;
}

Result<void> SequenceCounters::CheckPlan(const SeqPlan& plan) const {
  if (plan.owner_ != this || plan.id_ != open_plan_) {
    return std::unexpected(NotOpen());
  }
  if (plan.epoch_ != epoch_) {
    return Fail(Code::kFailedPrecondition,
                "the sequence plan was begun before the counters were cleared; begin another");
  }
  return {};
}

// The plan's entry for `space`, created on first use; refuses a section_size other than the one
// the counters or the plan know the space by.
Result<SeqPlan::Space*> SequenceCounters::PlanSpace(SeqPlan& plan,
                                                    const state::SpaceRecord& space) const {
  if (auto counted = spaces_.find(space.space);
      counted != spaces_.end() && counted->second.section_size != space.section_size) {
    return std::unexpected(OtherSectionSize(space, counted->second.section_size, "counted"));
  }
  auto [it, created] = plan.spaces_.try_emplace(space.space);
  if (created) it->second.section_size = space.section_size;
  if (it->second.section_size != space.section_size) {
    return std::unexpected(OtherSectionSize(space, it->second.section_size, "planned"));
  }
  return &it->second;
}

const SequenceCounters::Section* SequenceCounters::Counted(std::string_view space,
                                                           uint64_t section) const {
  auto s = spaces_.find(space);
  if (s == spaces_.end()) return nullptr;
  auto it = s->second.sections.find(section);
  return it == s->second.sections.end() ? nullptr : &it->second;
}

// A section the counters do not hold, as its persisted record says (maximum 0 without one).
Result<SeqPlan::Section> SequenceCounters::Loaded(const state::SpaceRecord& space, uint64_t section,
                                                  const SectionLoader& load) const {
  auto record = load(section);
  if (!record) return std::unexpected(record.error());
  SeqPlan::Section s;
  if (*record) {
    const state::SectionRecord& r = **record;
    if (r.space != space.space || r.section != section) {
      return Fail(Code::kInternal, "space '" + space.space + "': the loader answered section " +
                                       std::to_string(section) + " with '" + r.space + "' " +
                                       std::to_string(r.section));
    }
    if (r.section_size != space.section_size) {
      return std::unexpected(OtherSectionSize(space, r.section_size, "written"));
    }
    s.base = s.persisted_max = s.max = r.max_seq;
  }
  return s;
}

// A section's entry in a plan: from the counters, else as persisted.
Result<SeqPlan::Section> SequenceCounters::Entry(const state::SpaceRecord& space, uint64_t section,
                                                 const SectionLoader& load) const {
  const Section* counted = Counted(space.space, section);
  if (!counted) return Loaded(space, section, load);
  SeqPlan::Section s;
  s.base = counted->base;
  s.persisted_max = s.max = counted->max;
  s.counted = counted;
  return s;
}

// Puts every section of `keys` into the plan and answers each key's plan section. A failure may
// leave some loaded: harmless, a loaded section is the persisted one.
Result<std::vector<SeqPlan::Section*>> SequenceCounters::Touch(SeqPlan::Space& planned,
                                                               const state::SpaceRecord& space,
                                                               std::span<const uint64_t> keys,
                                                               const SectionLoader& load) const {
  const auto size = static_cast<uint64_t>(space.section_size);
  std::vector<SeqPlan::Section*> sections;
  sections.reserve(keys.size());
  for (uint64_t key : keys) {
    const uint64_t section = SectionOf(key, size);
    auto it = planned.sections.find(section);
    if (it == planned.sections.end()) {
      auto entry = Entry(space, section, load);
      if (!entry) return std::unexpected(entry.error());
      it = planned.sections.emplace(section, std::move(*entry)).first;
    }
    sections.push_back(&it->second);
  }
  return sections;
}

// The value `offset`'s key is at: its last value in the plan, else in the counters (unless the
// plan rebased the section), else base.
uint64_t SequenceCounters::ValueOf(const SeqPlan::Section& planned, uint32_t offset) {
  if (auto it = planned.values.find(offset); it != planned.values.end()) return it->second;
  if (planned.counted && !planned.rebased) {
    return planned.counted->base + planned.counted->table.Get(offset);
  }
  return planned.base;
}

Result<void> SequenceCounters::CheckRoom(const state::SpaceRecord& space,
                                         std::span<const uint64_t> keys,
                                         std::span<SeqPlan::Section* const> sections) {
  // A key is never above its section's maximum: only a section near the top can run out.
  const auto size = static_cast<uint64_t>(space.section_size);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (sections[i]->max <= kMaxValue - keys.size()) continue;
    const uint64_t left = kMaxValue - ValueOf(*sections[i], OffsetInSection(keys[i], size));
    if (left < static_cast<uint64_t>(std::count(keys.begin(), keys.end(), keys[i]))) {
      return Fail(Code::kResourceExhausted,
                  "space '" + space.space + "': key " + std::to_string(keys[i]) +
                      " has reached the largest sequence value; use a new key or space");
    }
  }
  return {};
}

Result<std::vector<uint64_t>> SequenceCounters::Next(SeqPlan& plan, const state::SpaceRecord& space,
                                                     std::span<const uint64_t> keys,
                                                     const SectionLoader& load) const {
  if (auto ok = CheckPlan(plan); !ok) return std::unexpected(ok.error());
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  auto planned = PlanSpace(plan, space);
  if (!planned) return std::unexpected(planned.error());
  auto sections = Touch(**planned, space, keys, load);
  if (!sections) {
    // A space of the plan with no value yet (e.g. this call was refused for another
    // section_size) leaves it, with the sections it only loaded: the batch's later requests with
    // the right section_size are served.
    const bool valued = std::any_of((*planned)->sections.begin(), (*planned)->sections.end(),
                                    [](const auto& entry) { return !entry.second.values.empty(); });
    if (!valued) plan.spaces_.erase(space.space);
    return std::unexpected(sections.error());
  }
  // Checked first, so that a failure changes no value.
  if (auto room = CheckRoom(space, keys, *sections); !room) return std::unexpected(room.error());
  const auto size = static_cast<uint64_t>(space.section_size);
  std::vector<uint64_t> values;
  values.reserve(keys.size());
  // The counters' slots of the keys a few places ahead are fetched while this one is counted.
  constexpr size_t kAhead = 8;
  auto prefetch = [&](size_t i) {
    const SeqPlan::Section& s = *(*sections)[i];
    if (s.counted && !s.rebased) s.counted->table.Prefetch(OffsetInSection(keys[i], size));
  };
  for (size_t i = 0; i < std::min(kAhead, keys.size()); ++i) prefetch(i);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kAhead < keys.size()) prefetch(i + kAhead);
    SeqPlan::Section& s = *(*sections)[i];
    const uint32_t offset = OffsetInSection(keys[i], size);
    const uint64_t v = ValueOf(s, offset) + 1;
    s.values[offset] = v;
    if (v > s.max) s.max = RaisedMax(v, space.step);
    values.push_back(v);
  }
  return values;
}

Result<uint64_t> SequenceCounters::Raise(SeqPlan& plan, const state::SpaceRecord& space,
                                         uint64_t section, uint64_t max_seq,
                                         const SectionLoader& load) const {
  if (auto ok = CheckPlan(plan); !ok) return std::unexpected(ok.error());
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  auto planned = PlanSpace(plan, space);
  if (!planned) return std::unexpected(planned.error());
  auto it = (*planned)->sections.find(section);
  if (it == (*planned)->sections.end()) {
    auto entry = Entry(space, section, load);
    if (!entry) {
      if ((*planned)->sections.empty()) plan.spaces_.erase(space.space);
      return std::unexpected(entry.error());
    }
    it = (*planned)->sections.emplace(section, std::move(*entry)).first;
  }
  SeqPlan::Section& s = it->second;
  if (max_seq <= s.max) return s.max;  // never lowered
  // Every value handed out so far, in the counters or in this plan, is <= the old maximum <
  // max_seq: restarting every key at max_seq keeps each key increasing.
  s.max = max_seq;
  s.base = max_seq;
  s.values.clear();
  s.rebased = true;
  return s.max;
}

// ---------------------------------------------------------------------------------------------
// SequenceCounters: committing and the rest

void SequenceCounters::Apply(std::string_view space, int64_t section_size, uint64_t section,
                             const SeqPlan::Section& planned) {
  auto it = spaces_.find(space);
  if (it == spaces_.end()) {
    it = spaces_.emplace(std::string(space), Space{section_size, {}}).first;
  }
  auto [entry, created] = it->second.sections.try_emplace(
      section,
      Section{planned.base, planned.max, OffsetTable(static_cast<uint32_t>(section_size))});
  Section& s = entry->second;
  s.max = std::max(s.max, planned.max);
  if (planned.rebased && !created) {
    // Raised by an import: every key restarts at the raised maximum.
    s.base = planned.base;
    s.table.Clear();
  }
  if (s.max - s.base > max_delta_) {
    // Rebase: every key restarts at the persisted maximum, which covers every value handed out.
    s.base = s.max;
    s.table.Clear();
    return;
  }
  for (const auto& [offset, v] : planned.values) {
    s.table.Set(offset, static_cast<uint32_t>(v - s.base));
  }
}

Result<void> SequenceCounters::Commit(SeqPlan&& plan) {
  SeqPlan p = std::move(plan);  // consumed, and closed when this returns
  if (p.owner_ != this || p.id_ != open_plan_) {
    return std::unexpected(NotOpen());
  }
  if (p.epoch_ != epoch_) {
    for (const auto& [name, space] : p.spaces_) {
      auto counted = spaces_.find(name);
      if (counted == spaces_.end()) continue;
      for (const auto& entry : space.sections) counted->second.sections.erase(entry.first);
    }
    return Fail(Code::kFailedPrecondition,
                "the sequence plan was begun before the counters were cleared: its sections are "
                "forgotten and reload at their persisted maximum");
  }
  for (const auto& [name, space] : p.spaces_) {
    for (const auto& [section, s] : space.sections) Apply(name, space.section_size, section, s);
  }
  ++epoch_;
  return {};
}

Result<uint64_t> SequenceCounters::Current(const state::SpaceRecord& space, uint64_t key,
                                           const SectionLoader& load) const {
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  if (auto counted = spaces_.find(space.space);
      counted != spaces_.end() && counted->second.section_size != space.section_size) {
    return std::unexpected(OtherSectionSize(space, counted->second.section_size, "counted"));
  }
  const auto size = static_cast<uint64_t>(space.section_size);
  const uint64_t section = SectionOf(key, size);
  if (const Section* s = Counted(space.space, section)) {
    return s->base + s->table.Get(OffsetInSection(key, size));
  }
  auto loaded = Loaded(space, section, load);
  if (!loaded) return std::unexpected(loaded.error());
  return loaded->base;
}

void SequenceCounters::Forget(std::string_view space) {
  if (auto it = spaces_.find(space); it != spaces_.end()) spaces_.erase(it);
  ++epoch_;
}

void SequenceCounters::Clear() {
  spaces_.clear();
  ++epoch_;
}

namespace {

// What glibc's malloc takes for a block of n bytes: an 8-byte header, 16-byte granules, 32 at
// least.
size_t BlockBytes(size_t n) { return n == 0 ? 0 : std::max<size_t>(32, (n + 8 + 15) / 16 * 16); }

}  // namespace

size_t SequenceCounters::MemoryBytes() const {
  using SpaceNode = std::pair<const std::string, Space>;
  using SectionNode = std::pair<const uint64_t, Section>;
  size_t bytes = sizeof(*this);
  for (const auto& [name, space] : spaces_) {
    bytes += BlockBytes(4 * sizeof(void*) + sizeof(SpaceNode));  // a red-black tree node
    if (name.capacity() > 15) bytes += BlockBytes(name.capacity() + 1);
    bytes += BlockBytes(space.sections.bucket_count() * sizeof(void*));
    for (const auto& entry : space.sections) {
      bytes += BlockBytes(sizeof(void*) + sizeof(SectionNode));  // a hash node: next + value
      const size_t table = entry.second.table.MemoryBytes();
      bytes += table == 0 ? 0 : BlockBytes(table);
    }
  }
  return bytes;
}

size_t SequenceCounters::TrackedKeys() const {
  size_t keys = 0;
  for (const auto& entry : spaces_) {
    for (const auto& section : entry.second.sections) keys += section.second.table.size();
  }
  return keys;
}

size_t SequenceCounters::Sections() const {
  size_t n = 0;
  for (const auto& entry : spaces_) n += entry.second.sections.size();
  return n;
}

}  // namespace kleaf::allocator
