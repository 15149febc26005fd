#include "allocator/operations.h"

#include <algorithm>
#include <array>

#include "base/tag.h"

namespace kleaf::allocator {
namespace {

template <typename Op>
Outcome<Op> Failed(Error e) {
  return Outcome<Op>{std::unexpected(std::move(e))};
}

TagRules TagRulesOf(const Rules& rules) {
  TagRules t;
  t.default_step = rules.default_step;
  t.max_step = rules.max_step;
  t.default_id_mode = rules.default_id_mode;
  t.datacenter_count = rules.datacenter.count;
  return t;
}

Error UnknownTag(const std::string& tag) {
  return Error{Code::kNotFound, "unknown tag '" + tag + "'"};
}

// The live record of `tag`: kNotFound when there is none or it is deleted.
[[nodiscard]] Result<state::TagRecord> LiveTag(const std::string& tag, StateReader& reader) {
  if (auto v = ValidateTag(tag); !v) return std::unexpected(v.error());
  auto existing = reader.Get(tag);
  if (!existing) return std::unexpected(existing.error());
  if (!*existing || (*existing)->deleted) return std::unexpected(UnknownTag(tag));
  return **existing;
}

// The record a segment of `tag` is reserved from: the live one, or a new one when the rules
// create tags on first use.
[[nodiscard]] Result<state::TagRecord> AllocatableTag(const std::string& tag, StateReader& reader,
                                                      const Rules& rules, int64_t now_ms) {
  if (auto v = ValidateTag(tag); !v) return std::unexpected(v.error());
  auto existing = reader.Get(tag);
  if (!existing) return std::unexpected(existing.error());
  if (*existing && !(*existing)->deleted) return **existing;
  if (!rules.auto_create) return std::unexpected(UnknownTag(tag));
  return ApplyTagUpdate(*existing, tag, TagUpdate{}, TagRulesOf(rules), now_ms);
}

std::optional<state::WorkerRecord> WorkerOf(const std::vector<state::WorkerRecord>& all,
                                            int64_t worker_id) {
  std::optional<state::WorkerRecord> current;
  for (const auto& w : all) {
    if (w.worker_id == worker_id) current = w;
  }
  return current;
}

// A renewal or release: the rule's verdict on the holder's record, and the holder's clock checked
// against ours.
template <typename Op, typename Rule>
Outcome<Op> Report(const WorkerReport& r, StateReader& reader, const Rules& rules, int64_t now_ms,
                   Rule rule) {
  auto all = reader.ListWorkers();
  if (!all) return Failed<Op>(all.error());
  auto updated = rule(WorkerOf(*all, r.worker_id));
  if (!updated) return Failed<Op>(updated.error());
  Outcome<Op> o{WorkerLeaseInfo{updated->worker_id, updated->lease_until_ms, 0, now_ms}};
  if (r.last_timestamp_ms > now_ms + rules.workers.max_clock_skew_ms) {
    // The holder's clock ran ahead of ours after its claim: it may issue timestamps past the
    // lease end as we count it. Record what it reported, keep the id blocked for a whole TTL
    // beyond that, and tell it to stop.
    updated->lease_until_ms =
        std::max(updated->lease_until_ms, r.last_timestamp_ms + rules.workers.lease_ttl_ms);
    o.result = std::unexpected(Error{
        Code::kFailedPrecondition, "worker id " + std::to_string(r.worker_id) +
                                       ": this node issued timestamps " +
                                       std::to_string(r.last_timestamp_ms - now_ms) +
                                       " ms ahead of the allocator's clock; fix the clock (NTP)"});
  }
  o.effects.workers.push_back(*updated);
  return o;
}

template <typename... Ops>
constexpr std::array<const char*, sizeof...(Ops)> NamesOf(std::variant<Ops...>*) {
  return {Ops::kName...};
}
constexpr auto kOpNames = NamesOf(static_cast<Request*>(nullptr));

Error UnknownSpace(const std::string& space) {
  return Error{Code::kNotFound, "unknown space '" + space + "'"};
}

// The live record of `space`: kNotFound when there is none or it is deleted.
[[nodiscard]] Result<state::SpaceRecord> LiveSpace(const std::string& space, StateReader& reader) {
  if (auto v = ValidateSpaceName(space); !v) return std::unexpected(v.error());
  auto existing = reader.GetSpace(space);
  if (!existing) return std::unexpected(existing.error());
  if (!*existing || (*existing)->deleted) return std::unexpected(UnknownSpace(space));
  return **existing;
}

Error NoSequences() {
  return Error{Code::kFailedPrecondition, "this reader holds no sequence spaces"};
}

// The space a NextSeq or CurrentSeq is served with: the record as its sender read it (the
// cluster: the space's record is another partition's), or the live record the reader holds.
[[nodiscard]] Result<state::SpaceRecord> SpaceOf(const std::string& space,
                                                 const std::optional<op::SpaceShape>& shape,
                                                 StateReader& reader, const Rules& rules) {
  if (!shape) return LiveSpace(space, reader);
  if (auto v = ValidateSpaceName(space); !v) return std::unexpected(v.error());
  if (shape->section_size < 1 || shape->section_size > kMaxSectionSize) {
    return Fail(Code::kInvalidArgument, "section_size " + std::to_string(shape->section_size) +
                                            " of space '" + space + "' is outside 1 to " +
                                            std::to_string(kMaxSectionSize));
  }
  state::SpaceRecord record;
  record.space = space;
  record.section_size = shape->section_size;
  // The sender's step, within this owner's bounds (0: the default); it only sets how far a
  // raise goes, never which values are handed out.
  record.step = std::clamp<int64_t>(shape->step > 0 ? shape->step : rules.spaces.default_step, 1,
                                    rules.spaces.max_step);
  return record;
}

}  // namespace

Result<std::optional<state::SpaceRecord>> StateReader::GetSpace(const std::string&) {
  return std::unexpected(NoSequences());
}
Result<std::vector<state::SpaceRecord>> StateReader::ListSpaces() {
  return std::unexpected(NoSequences());
}

const char* OpName(int index) { return kOpNames.at(static_cast<size_t>(index)); }

std::optional<std::string> RouteKey(const Request& request) {
  return std::visit(
      []<typename Op>(const Op& op) -> std::optional<std::string> {
        if constexpr (kIsWorkerOp<Op>) {
          return std::string(kWorkersKey);
        } else if constexpr (std::is_same_v<Op, op::ListTags> ||
                             std::is_same_v<Op, op::ListSpaces>) {
          return std::nullopt;
        } else if constexpr (std::is_same_v<Op, op::NextSeq>) {
          const std::optional<int64_t> size = SentSectionSize(op);
          if (!size || *size <= 0 || op.keys.empty()) return op.space;
          return SectionRouteKey(op.space,
                                 SectionOf(op.keys.front(), static_cast<uint64_t>(*size)));
        } else if constexpr (std::is_same_v<Op, op::CurrentSeq>) {
          if (!op.section_size || *op.section_size <= 0) return op.space;
          return SectionRouteKey(op.space,
                                 SectionOf(op.key, static_cast<uint64_t>(*op.section_size)));
        } else if constexpr (std::is_same_v<Op, op::RaiseSection>) {
          return SectionRouteKey(op.space, op.section);
        } else if constexpr (kIsSequenceOp<Op>) {
          return op.space;
        } else {
          return op.tag;
        }
      },
      request);
}

std::vector<std::string> RouteKeys(const Request& request) {
  const auto* next = std::get_if<op::NextSeq>(&request);
  const std::optional<int64_t> size = next ? SentSectionSize(*next) : std::nullopt;
  if (!size || *size <= 0) {
    auto key = RouteKey(request);
    return key ? std::vector<std::string>{std::move(*key)} : std::vector<std::string>{};
  }
  std::vector<std::string> keys;
  std::optional<uint64_t> last;  // keys of a section come together: skip the repeats cheaply
  for (uint64_t k : next->keys) {
    const uint64_t section = SectionOf(k, static_cast<uint64_t>(*size));
    if (last == section) continue;
    last = section;
    std::string key = SectionRouteKey(next->space, section);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
  }
  return keys;
}

Outcome<op::Allocate> Execute(const op::Allocate& r, StateReader& reader, const Rules& rules,
                              int64_t now_ms) {
  auto record = AllocatableTag(r.tag, reader, rules, now_ms);
  if (!record) return Failed<op::Allocate>(record.error());
  auto segment = ReserveSegment(*record, r.step, rules.max_step, now_ms);
  if (!segment) return Failed<op::Allocate>(segment.error());
  // The segment leaves the rules as this datacenter hands it out, in both shapes.
  if (auto ok = ApplyDatacenter(*segment, rules.datacenter); !ok) {
    return Failed<op::Allocate>(ok.error());
  }
  Outcome<op::Allocate> o{std::move(*segment)};
  o.effects.tags.push_back(std::move(*record));
  return o;
}

Outcome<op::GetTag> Execute(const op::GetTag& r, StateReader& reader, const Rules&, int64_t) {
  return Outcome<op::GetTag>{LiveTag(r.tag, reader)};
}

Outcome<op::PutTag> Execute(const op::PutTag& r, StateReader& reader, const Rules& rules,
                            int64_t now_ms) {
  if (auto v = ValidateTag(r.tag); !v) return Failed<op::PutTag>(v.error());
  auto existing = reader.Get(r.tag);
  if (!existing) return Failed<op::PutTag>(existing.error());
  auto record = ApplyTagUpdate(*existing, r.tag, r.update, TagRulesOf(rules), now_ms);
  if (!record) return Failed<op::PutTag>(record.error());
  Outcome<op::PutTag> o{*record};
  o.effects.tags.push_back(std::move(*record));
  return o;
}

Outcome<op::DeleteTag> Execute(const op::DeleteTag& r, StateReader& reader, const Rules&,
                               int64_t now_ms) {
  auto live = LiveTag(r.tag, reader);
  if (!live) return Failed<op::DeleteTag>(live.error());
  Outcome<op::DeleteTag> o{*live};
  live->deleted = true;
  live->update_time_ms = now_ms;
  o.effects.tags.push_back(std::move(*live));
  return o;
}

Outcome<op::ListTags> Execute(const op::ListTags&, StateReader& reader, const Rules&, int64_t) {
  auto all = reader.List();
  if (!all) return Failed<op::ListTags>(all.error());
  std::vector<state::TagRecord> live;
  for (auto& t : *all) {
    if (!t.deleted) live.push_back(std::move(t));
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.tag < b.tag; });
  return Outcome<op::ListTags>{std::move(live)};
}

Outcome<op::ClaimWorker> Execute(const op::ClaimWorker& r, StateReader& reader, const Rules& rules,
                                 int64_t now_ms) {
  auto all = reader.ListWorkers();
  if (!all) return Failed<op::ClaimWorker>(all.error());
  auto grant = ClaimWorker(*all, r.claim.claimant, r.claim.node_now_ms, now_ms, rules.workers);
  if (!grant) return Failed<op::ClaimWorker>(grant.error());
  Outcome<op::ClaimWorker> o{WorkerLeaseInfo{grant->record.worker_id, grant->record.lease_until_ms,
                                             grant->not_before_ms, now_ms, grant->notice}};
  o.effects.workers.push_back(grant->record);
  return o;
}

Outcome<op::RenewWorker> Execute(const op::RenewWorker& r, StateReader& reader, const Rules& rules,
                                 int64_t now_ms) {
  return Report<op::RenewWorker>(r.report, reader, rules, now_ms, [&](const auto& current) {
    return RenewWorker(current, r.report.worker_id, r.report.claimant, r.report.last_timestamp_ms,
                       now_ms, rules.workers);
  });
}

Outcome<op::ReleaseWorker> Execute(const op::ReleaseWorker& r, StateReader& reader,
                                   const Rules& rules, int64_t now_ms) {
  return Report<op::ReleaseWorker>(r.report, reader, rules, now_ms, [&](const auto& current) {
    return ReleaseWorker(current, r.report.worker_id, r.report.claimant, r.report.last_timestamp_ms,
                         now_ms);
  });
}

Outcome<op::WorkerStatus> Execute(const op::WorkerStatus&, StateReader& reader, const Rules& rules,
                                  int64_t now_ms) {
  auto all = reader.ListWorkers();
  if (!all) return Failed<op::WorkerStatus>(all.error());
  return Outcome<op::WorkerStatus>{CountWorkers(*all, now_ms, rules.workers)};
}

Outcome<op::GetSpace> Execute(const op::GetSpace& r, StateReader& reader, const Rules&, int64_t) {
  return Outcome<op::GetSpace>{LiveSpace(r.space, reader)};
}

Outcome<op::PutSpace> Execute(const op::PutSpace& r, StateReader& reader, const Rules& rules,
                              int64_t now_ms) {
  if (auto v = ValidateSpaceName(r.space); !v) return Failed<op::PutSpace>(v.error());
  auto existing = reader.GetSpace(r.space);
  if (!existing) return Failed<op::PutSpace>(existing.error());
  auto record = ApplySpaceUpdate(*existing, r.space, r.update, rules.spaces, now_ms);
  if (!record) return Failed<op::PutSpace>(record.error());
  Outcome<op::PutSpace> o{*record};
  o.effects.spaces.push_back(std::move(*record));
  return o;
}

Outcome<op::DeleteSpace> Execute(const op::DeleteSpace& r, StateReader& reader, const Rules&,
                                 int64_t now_ms) {
  auto live = LiveSpace(r.space, reader);
  if (!live) return Failed<op::DeleteSpace>(live.error());
  Outcome<op::DeleteSpace> o{*live};
  live->deleted = true;
  live->update_time_ms = now_ms;
  o.effects.spaces.push_back(std::move(*live));
  return o;
}

Outcome<op::ListSpaces> Execute(const op::ListSpaces&, StateReader& reader, const Rules&, int64_t) {
  auto all = reader.ListSpaces();
  if (!all) return Failed<op::ListSpaces>(all.error());
  std::vector<state::SpaceRecord> live;
  for (auto& s : *all) {
    if (!s.deleted) live.push_back(std::move(s));
  }
  std::sort(live.begin(), live.end(),
            [](const auto& a, const auto& b) { return a.space < b.space; });
  return Outcome<op::ListSpaces>{std::move(live)};
}

namespace {

// Sections of `space` as committed (SequenceState::committed_section).
SectionLoader CommittedLoader(const SequenceState& seq, const std::string& space) {
  return [&seq, space](uint64_t section) { return seq.committed_section(space, section); };
}

}  // namespace

Outcome<op::NextSeq> Execute(const op::NextSeq& r, StateReader& reader, const Rules& rules, int64_t,
                             SequenceState& seq) {
  if (auto count = CheckSeqKeyCount(r.keys.size()); !count) {
    return Failed<op::NextSeq>(count.error());
  }
  auto space = SpaceOf(r.space, r.shape, reader, rules);
  if (!space) return Failed<op::NextSeq>(space.error());
  auto next = seq.counters.Next(*space, r.keys, CommittedLoader(seq, r.space));
  if (!next) return Failed<op::NextSeq>(next.error());
  if (next->needs_raise) {
    seq.needs_raise = true;
    return Failed<op::NextSeq>(Error{
        Code::kUnavailable, "space '" + r.space + "': waits for a raise of a section maximum"});
  }
  return Outcome<op::NextSeq>{std::move(next->values)};
}

Outcome<op::CurrentSeq> Execute(const op::CurrentSeq& r, StateReader& reader, const Rules& rules,
                                int64_t, SequenceState& seq) {
  std::optional<op::SpaceShape> shape;
  if (r.section_size) shape = op::SpaceShape{*r.section_size, 0};
  auto space = SpaceOf(r.space, shape, reader, rules);
  if (!space) return Failed<op::CurrentSeq>(space.error());
  return Outcome<op::CurrentSeq>{
      seq.counters.Current(*space, r.key, CommittedLoader(seq, r.space))};
}

Outcome<op::RaiseSection> Execute(const op::RaiseSection& r, StateReader& reader,
                                  const Rules& rules, int64_t, SequenceState& seq) {
  if (r.section_size == 0) {
    return Failed<op::RaiseSection>(
        Error{Code::kInvalidArgument,
              "a raise_section of space '" + r.space + "' needs its section_size"});
  }
  // The step only says how far a NextSeq raises; a raise sets the maximum itself.
  auto space = SpaceOf(r.space, op::SpaceShape{r.section_size, 1}, reader, rules);
  if (!space) return Failed<op::RaiseSection>(space.error());
  return Outcome<op::RaiseSection>{
      seq.counters.Raise(*space, r.section, r.max_seq, CommittedLoader(seq, r.space))};
}

}  // namespace kleaf::allocator
