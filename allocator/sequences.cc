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
// SequenceCounters

const SequenceCounters::Section* SequenceCounters::Find(std::string_view space,
                                                        uint64_t section) const {
  auto s = spaces_.find(space);
  if (s == spaces_.end()) return nullptr;
  auto it = s->second.sections.find(section);
  return it == s->second.sections.end() ? nullptr : &it->second;
}

SequenceCounters::Section* SequenceCounters::Find(std::string_view space, uint64_t section) {
  return const_cast<Section*>(std::as_const(*this).Find(space, section));
}

// The counters' entry for `space`, created on first use; refuses a section_size other than the
// one its sections were counted with.
Result<SequenceCounters::Space*> SequenceCounters::SpaceFor(const state::SpaceRecord& space) {
  if (auto ok = CheckSpace(space); !ok) return std::unexpected(ok.error());
  auto [it, created] = spaces_.try_emplace(space.space);
  if (created) it->second.section_size = space.section_size;
  if (it->second.section_size != space.section_size) {
    return std::unexpected(OtherSectionSize(space, it->second.section_size, "counted"));
  }
  return &it->second;
}

// A section's committed maximum as its record says (nullopt without one: 0).
Result<std::optional<uint64_t>> SequenceCounters::LoadMax(const state::SpaceRecord& space,
                                                          uint64_t section,
                                                          const SectionLoader& load) const {
  auto record = load(section);
  if (!record) return std::unexpected(record.error());
  if (!*record) return std::optional<uint64_t>();
  const state::SectionRecord& r = **record;
  if (r.space != space.space || r.section != section) {
    return Fail(Code::kInternal, "space '" + space.space + "': the loader answered section " +
                                     std::to_string(section) + " with '" + r.space + "' " +
                                     std::to_string(r.section));
  }
  if (r.section_size != space.section_size) {
    return std::unexpected(OtherSectionSize(space, r.section_size, "written"));
  }
  return std::optional<uint64_t>(r.max_seq);
}

// The counted section, loaded at its committed maximum if it was not counted yet.
Result<SequenceCounters::Section*> SequenceCounters::SectionFor(Space& counted,
                                                                const state::SpaceRecord& space,
                                                                uint64_t section,
                                                                const SectionLoader& load) {
  if (auto it = counted.sections.find(section); it != counted.sections.end()) return &it->second;
  auto max = LoadMax(space, section, load);
  if (!max) return std::unexpected(max.error());
  const uint64_t committed = max->value_or(0);
  return &counted.sections
              .emplace(section,
                       Section{.base = committed,
                               .committed = committed,
                               .step = space.step,
                               .table = OffsetTable(static_cast<uint32_t>(space.section_size))})
              .first->second;
}

uint64_t SequenceCounters::ValueOf(const Section& s, uint32_t offset) {
  return s.base + s.table.Get(offset);
}

uint64_t SequenceCounters::ExactNeed(const Section& s, std::span<const uint64_t> keys,
                                     std::span<Section* const> sections, uint64_t section_size) {
  std::unordered_map<uint32_t, uint64_t> last;
  uint64_t need = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (sections[i] != &s) continue;
    const uint32_t offset = OffsetInSection(keys[i], section_size);
    auto [it, created] = last.try_emplace(offset, 0);
    if (created) it->second = ValueOf(s, offset);
    need = std::max(need, ++it->second);
  }
  return need;
}

void SequenceCounters::Want(const std::string& space, uint64_t section, Section& s, uint64_t max) {
  if (max <= s.committed || max <= s.wanted) return;
  s.wanted = max;
  if (!s.queued) {
    s.queued = true;
    queued_.emplace_back(space, section);
  }
}

Result<SeqNext> SequenceCounters::Next(const state::SpaceRecord& space,
                                       std::span<const uint64_t> keys, const SectionLoader& load) {
  auto counted = SpaceFor(space);
  if (!counted) return std::unexpected(counted.error());
  const auto size = static_cast<uint64_t>(space.section_size);
  const uint64_t call = ++calls_;
  // Each key's section, loaded where needed, and per section a bound on what this call needs: the
  // highest value its keys start from plus the number of its keys.
  std::vector<Section*> sections;
  sections.reserve(keys.size());
  std::vector<std::pair<uint64_t, Section*>> touched;  // in first-use order
  for (uint64_t key : keys) {
    const uint64_t section = SectionOf(key, size);
    auto s = SectionFor(**counted, space, section, load);
    if (!s) {
      // A space with no section counted (e.g. this call's section_size was refused) is not
      // kept: a later call with the right section_size is served.
      if ((*counted)->sections.empty()) spaces_.erase(space.space);
      return std::unexpected(s.error());
    }
    Section& entry = **s;
    if (entry.call != call) {
      entry.call = call;
      entry.call_high = 0;
      entry.call_keys = 0;
      entry.step = space.step;
      touched.emplace_back(section, &entry);
    }
    entry.call_high = std::max(entry.call_high, ValueOf(entry, OffsetInSection(key, size)));
    ++entry.call_keys;
    sections.push_back(&entry);
  }
  // A key is never above its section's maximum: only a section near the top can run out.
  for (const auto& [section, s] : touched) {
    if (s->call_high <= kMaxValue - s->call_keys) continue;
    std::unordered_map<uint32_t, uint64_t> at;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (sections[i] != s) continue;
      const uint32_t offset = OffsetInSection(keys[i], size);
      auto [it, created] = at.try_emplace(offset, 0);
      if (created) it->second = ValueOf(*s, offset);
      if (it->second == kMaxValue) {
        return Fail(Code::kResourceExhausted,
                    "space '" + space.space + "': key " + std::to_string(keys[i]) +
                        " has reached the largest sequence value; use a new key or space");
      }
      ++it->second;
    }
  }
  // All or nothing: every section must hold what its keys need under its committed maximum.
  bool needs_raise = false;
  for (const auto& [section, s] : touched) {
    // The bound fits: no exact count. (Written so that nothing wraps near 2^64 - 1: a key's value
    // is never above the committed maximum.)
    if (s->call_high <= s->committed && s->call_keys <= s->committed - s->call_high) continue;
    const uint64_t need = ExactNeed(*s, keys, sections, size);
    if (need <= s->committed) continue;
    Want(space.space, section, *s, RaisedMax(need, space.step));
    s->at_need = true;
    needs_raise = true;
  }
  SeqNext out;
  if (needs_raise) {
    out.needs_raise = true;
    return out;
  }
  out.values.reserve(keys.size());
  // The slots of the keys a few places ahead are fetched while this one is counted.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < std::min(kAhead, keys.size()); ++i) {
    sections[i]->table.Prefetch(OffsetInSection(keys[i], size));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kAhead < keys.size()) {
      sections[i + kAhead]->table.Prefetch(OffsetInSection(keys[i + kAhead], size));
    }
    Section& s = *sections[i];
    const uint32_t offset = OffsetInSection(keys[i], size);
    const uint64_t v = ValueOf(s, offset) + 1;  // <= committed: checked above
    s.table.Set(offset, static_cast<uint32_t>(v - s.base));
    s.high = std::max(s.high, v);
    out.values.push_back(v);
  }
  // Ahead of need (R6): a section with less than raise_ahead of a step left asks for one more step,
  // so that a request does not wait for a raise in steady state.
  if (raise_ahead_ > 0) {
    for (const auto& [section, s] : touched) {
      const uint64_t top = std::max(s->high, s->base);
      const auto left = static_cast<double>(s->committed > top ? s->committed - top : 0);
      if (left < raise_ahead_ * static_cast<double>(space.step)) {
        const uint64_t target = s->committed > kMaxValue - static_cast<uint64_t>(space.step)
                                    ? kMaxValue
                                    : s->committed + static_cast<uint64_t>(space.step);
        Want(space.space, section, *s, target);
      }
    }
  }
  return out;
}

Result<uint64_t> SequenceCounters::Raise(const state::SpaceRecord& space, uint64_t section,
                                         uint64_t max_seq, const SectionLoader& load) {
  auto counted = SpaceFor(space);
  if (!counted) {
    return std::unexpected(counted.error());
  }
  auto s = SectionFor(**counted, space, section, load);
  if (!s) {
    if ((*counted)->sections.empty()) spaces_.erase(space.space);
    return std::unexpected(s.error());
  }
  Section& entry = **s;
  if (max_seq <= entry.committed) return entry.committed;  // never lowered, keys not moved
  Want(space.space, section, entry, max_seq);
  entry.rebase_to = std::max(entry.rebase_to, max_seq);
  return max_seq;
}

std::vector<state::SectionRecord> SequenceCounters::TakeRaises() {
  std::vector<state::SectionRecord> raises;
  std::vector<std::pair<std::string, uint64_t>> later;
  for (auto& [space, section] : queued_) {
    Section* s = Find(space, section);
    if (s == nullptr) continue;  // forgotten
    if (s->in_flight != 0) {
      later.emplace_back(std::move(space), section);
      continue;
    }
    s->queued = false;
    if (s->wanted <= s->committed) {
      s->wanted = 0;
      continue;
    }
    s->in_flight = s->wanted;
    s->wanted = 0;
    ++(s->at_need ? raises_at_need_ : raises_ahead_);
    s->at_need = false;
    raises.push_back(state::SectionRecord{space, section, spaces_.find(space)->second.section_size,
                                          s->in_flight});
  }
  queued_ = std::move(later);
  std::sort(raises.begin(), raises.end(), [](const auto& a, const auto& b) {
    return std::tie(a.space, a.section) < std::tie(b.space, b.section);
  });
  return raises;
}

void SequenceCounters::Settle(std::span<const state::SectionRecord> raises, bool committed) {
  for (const auto& r : raises) {
    Section* s = Find(r.space, r.section);
    if (s == nullptr) continue;  // forgotten: it reloads at its committed maximum
    if (s->in_flight == r.max_seq) s->in_flight = 0;
    if (!committed) {
      // An import whose raise did not commit was not answered: it asks again.
      if (s->rebase_to != 0 && r.max_seq >= s->rebase_to) s->rebase_to = 0;
      continue;
    }
    const uint64_t before = s->committed;  // at or above every value computed in the section
    s->committed = std::max(s->committed, r.max_seq);
    std::optional<uint64_t> base;
    if (s->rebase_to != 0 && s->committed >= s->rebase_to) {
      // Raised by an import: every key restarts at the imported maximum.
      base = std::max(s->rebase_to, before);
      s->rebase_to = 0;
    } else if (s->committed - s->base > max_delta_) {
      // The deltas would not fit: every key restarts at the maximum before this raise, which
      // covers every value computed, and the raise is left to count up in.
      base = before;
    }
    if (base) {
      // Only a raise of more than max_delta at once leaves no room: then at the new maximum.
      s->base = s->committed - *base > max_delta_ ? s->committed : *base;
      s->table.Clear();
    }
  }
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
  if (const Section* s = Find(space.space, section)) {
    return ValueOf(*s, OffsetInSection(key, size));
  }
  auto max = LoadMax(space, section, load);
  if (!max) return std::unexpected(max.error());
  return max->value_or(0);
}

void SequenceCounters::Forget(std::string_view space) {
  if (auto it = spaces_.find(space); it != spaces_.end()) spaces_.erase(it);
}

void SequenceCounters::Clear() { spaces_.clear(); }

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
