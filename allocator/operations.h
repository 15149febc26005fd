// What an allocator does with one operation, whatever carries it (an in-process call or a Kafka
// message): one type per operation with its result type beside it, and Execute(), the pure
// function from (operation, current records) to (result, records to write). The wire format is
// the cluster's (cluster/wire.h); nothing here knows JSON or Kafka.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "allocator/allocation.h"
#include "allocator/datacenter.h"
#include "allocator/sequences.h"
#include "allocator/workers.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

// The operations. Each names its result type (`Result`) and its name on the wire and in metric
// labels (`kName`); a caller that pairs an operation with another operation's result does not
// compile.

namespace op {

// A new segment of `tag`; `step` the size the buffer would like (0: the tag's own step).
struct Allocate {
  using Result = Segment;
  static constexpr const char* kName = "allocate";
  std::string tag;
  int64_t step = 0;
};
struct GetTag {
  using Result = state::TagRecord;
  static constexpr const char* kName = "get_tag";
  std::string tag;
};
// Creates or updates; the result is the record as stored.
struct PutTag {
  using Result = state::TagRecord;
  static constexpr const char* kName = "put_tag";
  std::string tag;
  TagUpdate update = {};
};
// Marks the tag deleted (its max_id is kept); the result is the record as it was.
struct DeleteTag {
  using Result = state::TagRecord;
  static constexpr const char* kName = "delete_tag";
  std::string tag;
};
// Live tags ordered by name (in the cluster: of the partition that runs it).
struct ListTags {
  using Result = std::vector<state::TagRecord>;
  static constexpr const char* kName = "list_tags";
};
struct ClaimWorker {
  using Result = WorkerLeaseInfo;
  static constexpr const char* kName = "claim_worker";
  WorkerClaim claim;
};
struct RenewWorker {
  using Result = WorkerLeaseInfo;
  static constexpr const char* kName = "renew_worker";
  WorkerReport report;
};
struct ReleaseWorker {
  using Result = WorkerLeaseInfo;
  static constexpr const char* kName = "release_worker";
  WorkerReport report;
};
struct WorkerStatus {
  using Result = WorkerCounts;
  static constexpr const char* kName = "worker_status";
};

// Sequence spaces (allocator/sequences.h, docs/architecture.md "I5: sequences only go up"):
// administered like tags.
struct GetSpace {
  using Result = state::SpaceRecord;
  static constexpr const char* kName = "get_space";
  std::string space;
};
// Creates or updates; section_size never changes once the space exists. The result is the record
// as stored.
struct PutSpace {
  using Result = state::SpaceRecord;
  static constexpr const char* kName = "put_space";
  std::string space;
  SpaceUpdate update = {};
};
// Marks the space deleted (section_size and the sections' maxima are kept); the result is the
// record as it was.
struct DeleteSpace {
  using Result = state::SpaceRecord;
  static constexpr const char* kName = "delete_space";
  std::string space;
};
// Live spaces ordered by name.
struct ListSpaces {
  using Result = std::vector<state::SpaceRecord>;
  static constexpr const char* kName = "list_spaces";
};
// The next value of each of `keys` (1 to kMaxSeqKeys) of the live space `space`, in order (a key
// listed twice gets two increasing values). Needs the owner's counters: Execute takes a
// SequenceState.
//
// In the cluster a space's record lives in the partition of its name and its sections in the
// partitions of their route keys (SectionRouteKey), owned by other allocators: the sender says
// what it read of the record, its `shape` (none: the owner reads the record itself, as standalone
// does). section_size never changes once a space exists, and every section record carries the one
// it was written with (a mismatch is refused); step only says how far the next raise goes. Every
// key of one request is in a section of one partition (CheckRoute).
struct SpaceShape {
  int64_t section_size = 0;
  int64_t step = 0;  // 0: the owner's default step
};
struct NextSeq {
  using Result = std::vector<uint64_t>;
  static constexpr const char* kName = "next_seq";
  std::string space;
  std::vector<uint64_t> keys;
  std::optional<SpaceShape> shape = std::nullopt;
};
// The highest value handed out for `key` as far as the owner knows (never below one handed out).
// `section_size` as for NextSeq.
struct CurrentSeq {
  using Result = uint64_t;
  static constexpr const char* kName = "current_seq";
  std::string space;
  uint64_t key = 0;
  std::optional<int64_t> section_size = std::nullopt;
};

// Raises the persisted maximum of section `section` of `space` to `max_seq` (never lowers it) and
// makes every key of the section continue above it: what `kleaf state import` restores of a
// sequence (docs/operations.md, "Disaster recovery"). The result is the section's maximum after
// the operation. `section_size` is required (>= 1): the owner of a section does not hold the
// space's record (cluster), and a section written with another one is refused, naming the space.
// Works on the sections of deleted spaces too (they keep their maxima). Needs the owner's
// counters, like NextSeq: the raise is a plan's section record, written with the replies.
struct RaiseSection {
  using Result = uint64_t;
  static constexpr const char* kName = "raise_section";
  std::string space;
  uint64_t section = 0;
  int64_t section_size = 0;
  uint64_t max_seq = 0;
};

}  // namespace op

// Any one operation, as a transport carries it.
using Request =
    std::variant<op::Allocate, op::GetTag, op::PutTag, op::DeleteTag, op::ListTags, op::ClaimWorker,
                 op::RenewWorker, op::ReleaseWorker, op::WorkerStatus, op::GetSpace, op::PutSpace,
                 op::DeleteSpace, op::ListSpaces, op::NextSeq, op::CurrentSeq, op::RaiseSection>;
inline constexpr int kOpCount = static_cast<int>(std::variant_size_v<Request>);

namespace detail {
template <typename Op, typename... Ops>
constexpr int IndexOf(std::variant<Ops...>*) {
  int i = 0;
  const bool found = ((std::is_same_v<Op, Ops> || (++i, false)) || ...);
  return found ? i : -1;
}
}  // namespace detail

// The position of `Op` in Request: the index of its metric series.
template <typename Op>
inline constexpr int kOpIndex = detail::IndexOf<Op>(static_cast<Request*>(nullptr));

// "allocate", "claim_worker", ... of the operation at `index` of Request.
const char* OpName(int index);

// Operations of the worker registry: serialized with each other by the owner of kWorkersKey.
template <typename Op>
inline constexpr bool kIsWorkerOp =
    std::is_same_v<Op, op::ClaimWorker> || std::is_same_v<Op, op::RenewWorker> ||
    std::is_same_v<Op, op::ReleaseWorker> || std::is_same_v<Op, op::WorkerStatus>;

// Operations of sequence spaces.
template <typename Op>
inline constexpr bool kIsSequenceOp =
    std::is_same_v<Op, op::GetSpace> || std::is_same_v<Op, op::PutSpace> ||
    std::is_same_v<Op, op::DeleteSpace> || std::is_same_v<Op, op::ListSpaces> ||
    std::is_same_v<Op, op::NextSeq> || std::is_same_v<Op, op::CurrentSeq> ||
    std::is_same_v<Op, op::RaiseSection>;
// Those of them that read or move the owner's counters (Execute takes a SequenceState).
template <typename Op>
inline constexpr bool kNeedsCounters =
    std::is_same_v<Op, op::NextSeq> || std::is_same_v<Op, op::CurrentSeq> ||
    std::is_same_v<Op, op::RaiseSection>;

// The section_size the sender of an operation that needs the counters gave, if it gave one.
inline std::optional<int64_t> SentSectionSize(const op::NextSeq& op) {
  if (!op.shape) return std::nullopt;
  return op.shape->section_size;
}
inline std::optional<int64_t> SentSectionSize(const op::CurrentSeq& op) { return op.section_size; }
inline std::optional<int64_t> SentSectionSize(const op::RaiseSection& op) {
  return op.section_size;
}

// The key that decides which allocator serves `request`: its tag, kWorkersKey for the registry,
// nothing for ListTags and ListSpaces (every partition answers for its own records), the space's
// name for the other space operations, for NextSeq and CurrentSeq the route key of the first
// key's section (SectionRouteKey; the space's name when the request carries no section_size), and
// for RaiseSection the route key of its section.
std::optional<std::string> RouteKey(const Request& request);
// Every route key of `request`: RouteKey's, and for NextSeq one per key's section (deduplicated,
// in order of first appearance). An allocator serves a request only if all of them are its own.
std::vector<std::string> RouteKeys(const Request& request);

struct Rules {
  int64_t max_step = 1000000;
  int64_t default_step = 1000;
  bool auto_create = false;
  WorkerRules workers;
  state::IdMode default_id_mode = state::IdMode::kPlain;  // of tags created without id_mode
  // The layout's: segments are handed out in this datacenter's residue class (ApplyDatacenter),
  // and with more than one, obfuscated id_modes are refused.
  Datacenter datacenter = {};
  SpaceRules spaces = {};
};

// Read access to the current records (the store, or the store plus a batch's staged writes).
class StateReader {
 public:
  virtual ~StateReader() = default;
  [[nodiscard]] virtual Result<std::optional<state::TagRecord>> Get(const std::string& tag) = 0;
  // Every tag record this reader covers, deleted ones included.
  [[nodiscard]] virtual Result<std::vector<state::TagRecord>> List() = 0;
  [[nodiscard]] virtual Result<std::vector<state::WorkerRecord>> ListWorkers() = 0;
  // Sequence spaces. By default kFailedPrecondition: a reader with no sequence state (both shapes'
  // readers override them). Sections are not read here: a batch's staged raise may still abort,
  // so they are read as committed (SequenceState::committed_section).
  [[nodiscard]] virtual Result<std::optional<state::SpaceRecord>> GetSpace(
      const std::string& space);
  // Every space record this reader covers, deleted ones included.
  [[nodiscard]] virtual Result<std::vector<state::SpaceRecord>> ListSpaces();
};

// The owner's sequence memory, which is not store data: the counters of the sections it serves,
// and how to read a section's committed record (the store as the last committed transaction left
// it, never a batch's staged records: docs/architecture.md, R6). Execute computes values into the
// counters at once (R1). When a value would pass its section's committed maximum it computes none,
// answers kUnavailable and sets `needs_raise`: the caller writes counters.TakeRaises() durably and
// runs the operation again (the cluster: in its next batch). After operations that used the
// counters the caller writes TakeRaises() (raises ahead of need, imports) and settles them.
struct SequenceState {
  SequenceCounters& counters;
  std::function<Result<std::optional<state::SectionRecord>>(const std::string& space,
                                                            uint64_t section)>
      committed_section;
  bool needs_raise = false;
};

// What an operation writes, to make durable before its result is released (docs/architecture.md,
// I2 and I3): records of every kind (state/records.h), written by the executor's caller with the
// reply (the store, or the batch's transaction). NextSeq's and RaiseSection's section raises are
// not put here by Execute: they are the counters' TakeRaises(), which the caller writes after the
// request (standalone) or at the end of the batch (the cluster).
using Effects = state::Records;

template <typename Op>
struct Outcome {
  Result<typename Op::Result> result;
  Effects effects = {};
};

// Pure: no I/O besides reading through `reader`. One overload per operation.
Outcome<op::Allocate> Execute(const op::Allocate& op, StateReader& reader, const Rules& rules,
                              int64_t now_ms);
Outcome<op::GetTag> Execute(const op::GetTag& op, StateReader& reader, const Rules& rules,
                            int64_t now_ms);
Outcome<op::PutTag> Execute(const op::PutTag& op, StateReader& reader, const Rules& rules,
                            int64_t now_ms);
Outcome<op::DeleteTag> Execute(const op::DeleteTag& op, StateReader& reader, const Rules& rules,
                               int64_t now_ms);
Outcome<op::ListTags> Execute(const op::ListTags& op, StateReader& reader, const Rules& rules,
                              int64_t now_ms);
Outcome<op::ClaimWorker> Execute(const op::ClaimWorker& op, StateReader& reader, const Rules& rules,
                                 int64_t now_ms);
Outcome<op::RenewWorker> Execute(const op::RenewWorker& op, StateReader& reader, const Rules& rules,
                                 int64_t now_ms);
Outcome<op::ReleaseWorker> Execute(const op::ReleaseWorker& op, StateReader& reader,
                                   const Rules& rules, int64_t now_ms);
Outcome<op::WorkerStatus> Execute(const op::WorkerStatus& op, StateReader& reader,
                                  const Rules& rules, int64_t now_ms);
Outcome<op::GetSpace> Execute(const op::GetSpace& op, StateReader& reader, const Rules& rules,
                              int64_t now_ms);
Outcome<op::PutSpace> Execute(const op::PutSpace& op, StateReader& reader, const Rules& rules,
                              int64_t now_ms);
// A deleted space's counters should be forgotten after the write (SequenceCounters::Forget).
Outcome<op::DeleteSpace> Execute(const op::DeleteSpace& op, StateReader& reader, const Rules& rules,
                                 int64_t now_ms);
Outcome<op::ListSpaces> Execute(const op::ListSpaces& op, StateReader& reader, const Rules& rules,
                                int64_t now_ms);
// kNotFound for an unknown or deleted space; the values are in the counters already (an answer
// never seen leaves a gap); kUnavailable with seq.needs_raise when a section needs a raise first.
Outcome<op::NextSeq> Execute(const op::NextSeq& op, StateReader& reader, const Rules& rules,
                             int64_t now_ms, SequenceState& seq);
// Reads the counters only.
Outcome<op::CurrentSeq> Execute(const op::CurrentSeq& op, StateReader& reader, const Rules& rules,
                                int64_t now_ms, SequenceState& seq);
// The raise is wanted in the counters (their TakeRaises()), not in the effects; the counters'
// keys of the section restart above it once it is settled as committed.
Outcome<op::RaiseSection> Execute(const op::RaiseSection& op, StateReader& reader,
                                  const Rules& rules, int64_t now_ms, SequenceState& seq);

}  // namespace kleaf::allocator
