// What an allocator does with one request, whatever carries it (an in-process call or a Kafka
// message): the request and reply types, their JSON encoding for Kafka, and Execute(), the pure
// function from (request, current records) to (reply, records to write).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/allocation.h"
#include "allocator/workers.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

struct Request {
  enum class Op {
    kAllocate, kGetTag, kPutTag, kDeleteTag, kListTags,
    kClaimWorker, kRenewWorker, kReleaseWorker, kWorkerStatus,
  };
  Op op = Op::kAllocate;
  std::string tag;
  int64_t step = 0;  // kAllocate: the step the buffer would like (0: the tag's own)
  TagUpdate update;  // kPutTag
  // Worker registry ops:
  std::string node_id;
  std::string holder;           // this process's token (see workers.h, Claimant)
  std::string previous_holder;  // the token of the previous process on the same state directory
  int64_t worker_id = -1;
  int64_t node_now_ms = 0;        // kClaimWorker: the node's wall clock when it asked
  int64_t last_timestamp_ms = 0;  // kRenewWorker, kReleaseWorker
  // The partition count the sender routed this request with (0: not said). Set by the Kafka
  // transport; an allocator answers a count other than its own with an error.
  int32_t partitions = 0;
};

inline Request MakeRequest(Request::Op op, std::string tag = {}, int64_t step = 0,
                           TagUpdate update = {}) {
  Request r;
  r.op = op;
  r.tag = std::move(tag);
  r.step = step;
  r.update = std::move(update);
  return r;
}

inline Request MakeWorkerRequest(Request::Op op, const Claimant& claimant, int64_t worker_id = -1,
                                 int64_t node_now_ms = 0, int64_t last_timestamp_ms = 0) {
  Request r;
  r.op = op;
  r.node_id = claimant.node_id;
  r.holder = claimant.holder;
  r.previous_holder = claimant.previous_holder;
  r.worker_id = worker_id;
  r.node_now_ms = node_now_ms;
  r.last_timestamp_ms = last_timestamp_ms;
  return r;
}

inline Request ClaimRequest(const WorkerClaim& claim) {
  return MakeWorkerRequest(Request::Op::kClaimWorker, claim.claimant, -1, claim.node_now_ms);
}

// kRenewWorker or kReleaseWorker.
inline Request ReportRequest(Request::Op op, const WorkerReport& report) {
  return MakeWorkerRequest(op, report.claimant, report.worker_id, report.node_now_ms,
                           report.last_timestamp_ms);
}

struct Reply {
  std::optional<Error> error;
  std::optional<Segment> segment;         // kAllocate
  std::optional<state::TagRecord> tag;    // kGetTag, kPutTag, kDeleteTag (as it was)
  std::vector<state::TagRecord> tags;     // kListTags
  std::optional<WorkerLeaseInfo> lease;   // kClaimWorker, kRenewWorker, kReleaseWorker
  std::optional<WorkerCounts> workers;    // kWorkerStatus
};

struct Rules {
  int64_t max_step = 1000000;
  int64_t default_step = 1000;
  bool auto_create = false;
  WorkerRules workers;
  state::IdMode default_id_mode = state::IdMode::kPlain;  // of tags created without id_mode
  int64_t datacenter_count = 1;  // the layout's: more than one refuses obfuscated id_modes
};

// Read access to the current records (the store, or the store plus a batch's staged writes).
class StateReader {
 public:
  virtual ~StateReader() = default;
  [[nodiscard]] virtual Result<std::optional<state::TagRecord>> Get(const std::string& tag) = 0;
  // Every tag record this reader covers, deleted ones included.
  [[nodiscard]] virtual Result<std::vector<state::TagRecord>> List() = 0;
  [[nodiscard]] virtual Result<std::vector<state::WorkerRecord>> ListWorkers() = 0;
};

struct Outcome {
  Reply reply;
  // Records to make durable before the reply is released (DESIGN.md I2, I3).
  std::vector<state::TagRecord> writes;
  std::vector<state::WorkerRecord> worker_writes;
};

// Whether `request` may be served by the owner of partition `arrived_on` of a requests topic of
// `partitions` partitions: its key (tag, or kWorkersKey for registry ops) must map there, and a
// sender that said its partition count must have the same one. An error names both partitions.
[[nodiscard]] Result<void> CheckRoute(const Request& request, int32_t arrived_on,
                                      int32_t partitions);

// Pure: no I/O besides reading through `reader`.
Outcome Execute(const Request& request, StateReader& reader, const Rules& rules, int64_t now_ms);

// "allocate", "claim_worker", ...: the op's name on the wire and in metric labels.
const char* OpName(Request::Op op);
inline constexpr int kOpCount = 9;

std::string EncodeRequest(const Request& request);
[[nodiscard]] Result<Request> DecodeRequest(std::string_view json);
std::string EncodeReply(const Reply& reply);
[[nodiscard]] Result<Reply> DecodeReply(std::string_view json);

}  // namespace kleaf::allocator
