// What an allocator does with one request, whatever carries it (an in-process call or a Kafka
// message): the request and reply types, their JSON encoding for Kafka, and Execute(), the pure
// function from (request, current records) to (reply, records to write).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/allocation.h"
#include "base/error.h"
#include "state/records.h"

namespace kleaf::allocator {

struct Request {
  enum class Op { kAllocate, kGetTag, kPutTag, kDeleteTag, kListTags };
  Op op = Op::kAllocate;
  std::string tag;
  int64_t step = 0;  // kAllocate: the step the buffer would like (0: the tag's own)
  TagUpdate update;  // kPutTag
};

inline Request MakeRequest(Request::Op op, std::string tag = {}, int64_t step = 0,
                           TagUpdate update = {}) {
  return Request{op, std::move(tag), step, std::move(update)};
}

struct Reply {
  std::optional<Error> error;
  std::optional<Segment> segment;         // kAllocate
  std::optional<state::TagRecord> tag;    // kGetTag, kPutTag, kDeleteTag (as it was)
  std::vector<state::TagRecord> tags;     // kListTags
};

struct Rules {
  int64_t max_step = 1000000;
  int64_t default_step = 1000;
  bool auto_create = false;
};

// Read access to the current tag records (the store, or the store plus a batch's staged writes).
class TagReader {
 public:
  virtual ~TagReader() = default;
  virtual Result<std::optional<state::TagRecord>> Get(const std::string& tag) = 0;
  // Every record this reader covers, deleted ones included.
  virtual Result<std::vector<state::TagRecord>> List() = 0;
};

struct Outcome {
  Reply reply;
  // Records to make durable before the reply is released (DESIGN.md I2).
  std::vector<state::TagRecord> writes;
};

// Pure: no I/O besides reading through `reader`.
Outcome Execute(const Request& request, TagReader& reader, const Rules& rules, int64_t now_ms);

std::string EncodeRequest(const Request& request);
Result<Request> DecodeRequest(std::string_view json);
std::string EncodeReply(const Reply& reply);
Result<Reply> DecodeReply(std::string_view json);

}  // namespace kleaf::allocator
