// The transaction ladder both transactional owners use (kafka/transaction.h): which outcome each
// sequence of librdkafka answers ends in, and that retries stop at their deadline.
#include "kafka/transaction.h"

#include <gtest/gtest.h>

#include <deque>
#include <optional>

namespace kleaf::kafka {
namespace {

using std::chrono::milliseconds;
using Kind = TxnError::Kind;

// Answers Commit and Abort from scripts (success once a script runs out); each call takes the
// time it is given at most, or `call_ms` if shorter.
class ScriptedTxn {
 public:
  explicit ScriptedTxn(ManualClock& clock) : clock_(clock) {}
  std::deque<std::optional<Kind>> commits;  // nullopt: success
  std::deque<std::optional<Kind>> aborts;
  std::optional<TxnError> fatal;
  int64_t call_ms = 1000;
  int commit_calls = 0;
  int abort_calls = 0;

  TxnResult<void> Commit(milliseconds timeout) {
    ++commit_calls;
    return Answer(commits, timeout);
  }
  TxnResult<void> Abort(milliseconds timeout) {
    ++abort_calls;
    return Answer(aborts, timeout);
  }
  std::optional<TxnError> FatalError() { return fatal; }

 private:
  TxnResult<void> Answer(std::deque<std::optional<Kind>>& script, milliseconds timeout) {
    clock_.Advance(milliseconds(std::min<int64_t>(call_ms, timeout.count())));
    if (script.empty()) return {};
    auto kind = script.front();
    script.pop_front();
    if (!kind) return {};
    return std::unexpected(TxnError{*kind, false, "scripted"});
  }
  ManualClock& clock_;
};

class TransactionTest : public ::testing::Test {
 protected:
  ManualClock clock_{0};
  ScriptedTxn txn_{clock_};
  int64_t ElapsedMs() { return clock_.MonotonicNs() / 1'000'000; }
};

TEST_F(TransactionTest, CommitThatSucceedsIsCommitted) {
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kCommitted);
  EXPECT_EQ(txn_.commit_calls, 1);
  EXPECT_EQ(txn_.abort_calls, 0);
}

TEST_F(TransactionTest, RetriableCommitIsCalledAgainAndCommits) {
  txn_.commits = {Kind::kRetriable, Kind::kRetriable};
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kCommitted);
  EXPECT_EQ(txn_.commit_calls, 3);
}

TEST_F(TransactionTest, CommitUnansweredUntilTheDeadlineIsUnknownNotAborted) {
  txn_.commits = std::deque<std::optional<Kind>>(100, Kind::kRetriable);
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kUnknown);
  EXPECT_EQ(end.unanswered, TxnCall::kCommit);
  // An abort after an unanswered commit is refused by librdkafka: never tried.
  EXPECT_EQ(txn_.abort_calls, 0);
  // The deadline holds: the last call got only the time left, plus one backoff at most.
  EXPECT_LE(ElapsedMs(), 5000 + kTxnRetryBackoff.count());
  EXPECT_GE(ElapsedMs(), 5000);
}

TEST_F(TransactionTest, AbortableCommitIsAborted) {
  txn_.commits = {Kind::kAbortable};
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kAborted);
  EXPECT_EQ(txn_.abort_calls, 1);
}

TEST_F(TransactionTest, AbortableCommitWhoseAbortIsUnansweredIsUnknownOnTheAbort) {
  txn_.commits = {Kind::kAbortable};
  txn_.aborts = std::deque<std::optional<Kind>>(100, Kind::kRetriable);
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(3000));
  EXPECT_EQ(end.outcome, TxnOutcome::kUnknown);
  EXPECT_EQ(end.unanswered, TxnCall::kAbort);
  EXPECT_LE(ElapsedMs(), 1000 + 3000 + kTxnRetryBackoff.count());
}

TEST_F(TransactionTest, FatalCommitIsFatalWithoutAnAbort) {
  txn_.commits = {Kind::kFatal};
  auto end = CommitTransaction(txn_, clock_, milliseconds(5000), milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kFatal);
  EXPECT_EQ(txn_.abort_calls, 0);
}

TEST_F(TransactionTest, FatalAbortIsFatal) {
  txn_.aborts = {Kind::kFatal};
  auto end = AbortTransaction(txn_, clock_, milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kFatal);
}

TEST_F(TransactionTest, FailedSendOfAProducerThatFailedForGoodIsFatal) {
  // A send a broken producer refused looks like any failed send: the producer is asked.
  txn_.fatal = TxnError{Kind::kFatal, false, "out of order sequence"};
  auto end =
      EndFailedTransaction(txn_, {Kind::kAbortable, false, "send"}, clock_, milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kFatal);
  EXPECT_EQ(end.error.message, "out of order sequence");
  EXPECT_EQ(txn_.abort_calls, 0);
}

TEST_F(TransactionTest, FailedSendOfAHealthyProducerIsAborted) {
  auto end =
      EndFailedTransaction(txn_, {Kind::kAbortable, false, "send"}, clock_, milliseconds(5000));
  EXPECT_EQ(end.outcome, TxnOutcome::kAborted);
  EXPECT_EQ(txn_.abort_calls, 1);
}

TEST_F(TransactionTest, RefusedBeginOpensNothing) {
  EXPECT_EQ(BeginFailed({Kind::kFatal, true, "fenced"}).outcome, TxnOutcome::kFatal);
  EXPECT_EQ(BeginFailed({Kind::kRetriable, false, "busy"}).outcome, TxnOutcome::kAborted);
}

}  // namespace
}  // namespace kleaf::kafka
