// How many ID batches of each stream (tag, mode) wait on the ids topic ahead of the consumer
// group's committed offsets: the pure bookkeeping behind the producer's top-up rounds.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace kleaf::producer {

// Owned by one IdsProducer and used only on its round thread. IdsProducer keeps one count per
// queue (one partition of one stream topic) and passes the queue as both `p` and `stream`; the
// ledger itself allows several streams per partition. Per partition it holds the batches
// read back from the topic (read_committed) at or after the group's committed offset, plus the
// batches this node committed but has not read back yet ("pending": the last stable offset moves
// after the transaction markers are written, a moment after the commit returns). A batch counts
// as ahead until the group's committed offset of its partition passes it.
class TopUpLedger {
 public:
  explicit TopUpLedger(size_t streams) : ahead_(streams, 0) {}

  // A batch of `stream` at `offset` of partition `p`, as read back from the topic. `value` is its
  // encoded form; a pending batch with the same value becomes this one.
  void Observe(int32_t p, int64_t offset, size_t stream, const std::string& value);
  // A batch this node committed at `now_ms` and has not read back yet, at offset `at_most` of `p`
  // or below (the highest offset the round's batches of `p` were delivered at; INT64_MAX when not
  // known).
  void AddPending(int32_t p, size_t stream, std::string value, int64_t now_ms,
                  int64_t at_most = std::numeric_limits<int64_t>::max());
  // Pending batches committed before `before_ms` that never showed up are forgotten (they would
  // otherwise count as ahead for ever).
  void ExpirePending(int64_t before_ms);
  // Where the consumed batches of `p` end (the group's committed offset or the log start,
  // whichever is higher; negative: none yet, everything counts): batches below it are consumed,
  // pending ones too when they are surely below it (consumers may claim, and move the log start
  // past, a batch before this node read it back: it will never be read back then).
  void SetCommitted(int32_t p, int64_t committed);

  int64_t Ahead(size_t stream) const { return ahead_.at(stream); }
  // How many batches `stream` needs so that `wanted` are ahead.
  int64_t Deficit(size_t stream, int64_t wanted) const {
    return ahead_.at(stream) >= wanted ? 0 : wanted - ahead_.at(stream);
  }

 private:
  struct Read {
    int64_t offset;
    size_t stream;
  };
  struct Pending {
    int32_t partition;
    size_t stream;
    std::string value;
    int64_t at_ms;
    int64_t at_most;  // its offset is at most this
  };
  std::map<int32_t, std::deque<Read>> read_;  // per partition, by offset
  std::vector<Pending> pending_;
  std::vector<int64_t> ahead_;  // per stream: read_ entries + pending_ entries
};

}  // namespace kleaf::producer
