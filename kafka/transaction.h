// How a Kafka transaction ends, as one of four outcomes that every transactional owner (the
// allocator per partition, the ids producer per round) handles with a function of its own, in the
// shape of librdkafka's examples/transactions.c: committed, aborted, unknown, fatal.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/clock.h"
#include "kafka/client.h"

namespace kleaf::kafka {

enum class TxnOutcome {
  kCommitted,  // visible to read_committed consumers, with the input offsets it carried
  kAborted,    // undone: nothing of it will ever be visible; re-read its input and begin again
  // Neither answered by the deadline: the coordinator may still commit it. Only a later call on
  // this producer (commit or abort again) or a new producer's init_transactions on the same
  // transactional.id settles it; until then nothing built on it may count as done or undone.
  kUnknown,
  kFatal,  // the producer failed for good or was fenced (error.fenced): replace it
};

// The call a transaction of unknown outcome waits on: librdkafka wants that same call made again
// to learn the outcome (after an unanswered commit, an abort is refused).
enum class TxnCall { kCommit, kAbort };

struct TxnEnd {
  TxnOutcome outcome = TxnOutcome::kCommitted;
  TxnError error = {};                    // why, unless committed
  TxnCall unanswered = TxnCall::kCommit;  // kUnknown only
};

// Begin refused: fatal stays fatal; otherwise no transaction was opened, nothing to undo.
inline TxnEnd BeginFailed(const TxnError& error) {
  return {error.kind == TxnError::Kind::kFatal ? TxnOutcome::kFatal : TxnOutcome::kAborted, error};
}

// The pause between two calls after a retriable failure that came back at once.
inline constexpr std::chrono::milliseconds kTxnRetryBackoff{50};

// Aborts the open transaction, calling abort again after a retriable failure until `timeout` has
// passed. `Txn` is TxnProducer (a template so the ladder is tested without a broker).
template <typename Txn>
TxnEnd AbortTransaction(Txn& txn, Clock& clock, std::chrono::milliseconds timeout) {
  const int64_t deadline = clock.MonotonicNs() + timeout.count() * 1'000'000;
  for (;;) {
    const int64_t left_ms = std::max<int64_t>(1, (deadline - clock.MonotonicNs()) / 1'000'000);
    auto a = txn.Abort(std::chrono::milliseconds(left_ms));
    if (a) return {TxnOutcome::kAborted, {}};
    if (a.error().kind == TxnError::Kind::kFatal) return {TxnOutcome::kFatal, a.error()};
    if (a.error().kind != TxnError::Kind::kRetriable || clock.MonotonicNs() >= deadline) {
      return {TxnOutcome::kUnknown, a.error(), TxnCall::kAbort};
    }
    clock.SleepFor(kTxnRetryBackoff);
  }
}

// Ends a transaction whose step (begin, send, send_offsets) failed with `error`: fatal stays
// fatal; anything else is aborted (a producer that failed for good is asked first, because a send
// it refused reports a plain failure).
template <typename Txn>
TxnEnd EndFailedTransaction(Txn& txn, const TxnError& error, Clock& clock,
                            std::chrono::milliseconds abort_timeout) {
  if (error.kind == TxnError::Kind::kFatal) return {TxnOutcome::kFatal, error};
  if (auto f = txn.FatalError()) return {TxnOutcome::kFatal, *f};
  return AbortTransaction(txn, clock, abort_timeout);
}

// Commits the open transaction: calls commit again after a retriable failure until `timeout` has
// passed (kUnknown after that: it may still commit), and aborts it after an abortable failure
// (e.g. the group moved on, KIP-447), within `abort_timeout`.
template <typename Txn>
TxnEnd CommitTransaction(Txn& txn, Clock& clock, std::chrono::milliseconds timeout,
                         std::chrono::milliseconds abort_timeout) {
  const int64_t deadline = clock.MonotonicNs() + timeout.count() * 1'000'000;
  for (;;) {
    const int64_t left_ms = std::max<int64_t>(1, (deadline - clock.MonotonicNs()) / 1'000'000);
    auto c = txn.Commit(std::chrono::milliseconds(left_ms));
    if (c) return {TxnOutcome::kCommitted, {}};
    switch (c.error().kind) {
      case TxnError::Kind::kFatal:
        return {TxnOutcome::kFatal, c.error()};
      case TxnError::Kind::kAbortable:
        return AbortTransaction(txn, clock, abort_timeout);
      case TxnError::Kind::kRetriable:
        if (clock.MonotonicNs() >= deadline) {
          return {TxnOutcome::kUnknown, c.error(), TxnCall::kCommit};
        }
        clock.SleepFor(kTxnRetryBackoff);
        break;
    }
  }
}

}  // namespace kleaf::kafka
