#include "producer/ids_producer.h"

#include <spdlog/spdlog.h>

#include "base/await.h"

namespace kleaf::producer {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kKafkaTimeout{10000};
// A committed batch not read back within this long is forgotten by the ledger.
constexpr int64_t kPendingExpiryMs = 60000;

}  // namespace

IdsProducer::IdsProducer(IdsProducerOptions options, allocator::Allocator& allocator,
                         snowflake::SnowflakeGenerator* generator, Clock& clock)
    : options_(std::move(options)),
      allocator_(allocator),
      generator_(generator),
      clock_(clock),
      ledger_(options_.streams.size()),
      ahead_(options_.streams.size(), 0) {
  auto& registry = metrics::Registry::Default();
  for (size_t i = 0; i < options_.streams.size(); ++i) {
    StreamState s;
    s.spec = options_.streams[i];
    s.partition = kafka::PartitionFor(s.spec.tag, options_.partitions);
    metrics::Labels labels{{"tag", s.spec.tag}, {"mode", std::string(ModeName(s.spec.mode))}};
    s.batches = &registry.GetCounter("kleaf_producer_batches_published_total",
                                     "ID batches the producer committed to the ids topic", labels);
    s.ids = &registry.GetCounter("kleaf_producer_ids_published_total",
                                 "IDs in the batches the producer committed", labels);
    s.ahead = &registry.GetGauge("kleaf_producer_batches_ahead",
                                 "ID batches waiting ahead of the consumer group", labels);
    stream_index_[{s.spec.tag, s.spec.mode}] = i;
    partitions_.insert(s.partition);
    streams_.push_back(std::move(s));
  }
  for (int32_t p : partitions_) {
    lag_[p] =
        &registry.GetGauge("kleaf_ids_consumer_lag",
                           "messages of the ids topic not yet committed by the consumer group",
                           {{"partition", std::to_string(p)}});
  }
}

IdsProducer::~IdsProducer() { Stop(); }

Result<void> IdsProducer::NewTransactionalProducer(std::chrono::milliseconds timeout) {
  kafka::Properties props = options_.props;
  props["transaction.timeout.ms"] = std::to_string(options_.txn_timeout.count());
  props["message.timeout.ms"] =
      std::to_string(std::max<int64_t>(1000, options_.txn_timeout.count() - 1000));
  auto txn = kafka::TxnProducer::Create(props, options_.transactional_id);
  if (!txn) return std::unexpected(txn.error());
  // Fences every older run of this node (and an older producer of this run) and aborts its open
  // transaction: what it had sent but not committed stays invisible to read_committed consumers
  // for ever.
  const int64_t deadline = clock_.MonotonicNs() + timeout.count() * 1'000'000;
  for (;;) {
    auto init = (*txn)->Init(kKafkaTimeout);
    if (init) break;
    if (init.error().kind != kafka::TxnError::Kind::kRetriable || clock_.MonotonicNs() > deadline) {
      return Fail(Code::kUnavailable, "init_transactions of " + options_.transactional_id + ": " +
                                          init.error().message);
    }
  }
  txn_ = std::move(*txn);
  unfinished_ = Unfinished::kNone;
  unfinished_sent_.clear();
  broken_ = false;
  return {};
}

Result<void> IdsProducer::Init() {
  if (auto r = NewTransactionalProducer(milliseconds(60000)); !r) return r;
  auto reader = kafka::PartitionReader::Create(options_.props);
  if (!reader) return std::unexpected(reader.error());
  reader_ = std::move(*reader);
  auto offsets = kafka::GroupOffsets::Create(options_.props, options_.group);
  if (!offsets) return std::unexpected(offsets.error());
  offsets_ = std::move(*offsets);
  // The batches that count start at the group's committed offsets (-1001: from the beginning).
  std::vector<kafka::TopicPartition> parts;
  for (int32_t p : partitions_) parts.push_back({options_.topic, p, -1001});
  auto committed = offsets_->Committed(parts, kKafkaTimeout);
  if (!committed) return std::unexpected(committed.error());
  for (const auto& tp : *committed) read_to_[tp.partition] = std::max<int64_t>(tp.offset, 0);
  spdlog::info("[producer] {} initialised: {} streams on {} partitions of {}, group {}",
               options_.transactional_id, streams_.size(), partitions_.size(), options_.topic,
               options_.group);
  return {};
}

Result<void> IdsProducer::CatchUp() {
  for (int32_t p : partitions_) {
    auto end = reader_->ReadToEnd(
        options_.topic, p, read_to_[p],
        [&](const kafka::Message& m) {
          if (!m.value) return;
          auto batch = DecodeBatch(*m.value);
          if (!batch) return;  // not ours to count
          auto it = stream_index_.find({batch->tag, batch->mode});
          if (it == stream_index_.end()) return;
          ledger_.Observe(p, m.offset, it->second, *m.value);
        },
        kKafkaTimeout);
    if (!end) return std::unexpected(end.error());
    read_to_[p] = *end;
  }
  ledger_.ExpirePending(clock_.NowMs() - kPendingExpiryMs);
  return {};
}

Result<void> IdsProducer::ReadCommittedOffsets() {
  std::vector<kafka::TopicPartition> parts;
  for (int32_t p : partitions_) parts.push_back({options_.topic, p, -1001});
  auto committed = offsets_->Committed(parts, kKafkaTimeout);
  if (!committed) return std::unexpected(committed.error());
  for (const auto& tp : *committed) {
    ledger_.SetCommitted(tp.partition, tp.offset);
    if (auto it = lag_.find(tp.partition); it != lag_.end()) {
      it->second->Set(
          static_cast<double>(read_to_[tp.partition] - std::max<int64_t>(tp.offset, 0)));
    }
  }
  return {};
}

Result<IdBatch> IdsProducer::NextBatch(StreamState& s) {
  IdBatch batch;
  batch.tag = s.spec.tag;
  batch.mode = s.spec.mode;
  if (s.spec.mode == IdBatch::Mode::kSnowflake) {
    if (generator_ == nullptr) return Fail(Code::kInternal, "no snowflake generator");
    if (auto r = generator_->NextBatch(s.spec.batch_size, batch.ids); !r) {
      return std::unexpected(r.error());
    }
    return batch;
  }
  if (s.ranges.empty()) {
    // A segment arriving after the timeout is dropped (a gap, never reused).
    auto segment = Await<allocator::Segment>(
        options_.segment_timeout,
        "no segment of " + s.spec.tag + " within " +
            std::to_string(options_.segment_timeout.count()) + " ms",
        [&](auto done) { allocator_.AllocateSegment(s.spec.tag, s.spec.batch_size, done); });
    if (!segment) return std::unexpected(segment.error());
    if (segment->end <= segment->start) {
      return Fail(Code::kInternal, "empty segment of " + s.spec.tag);
    }
    s.ranges.emplace_back(segment->start, segment->end);
  }
  // A segment larger than batch_size is split; its rest waits for the next batches of this run.
  auto& [start, end] = s.ranges.front();
  batch.start = start;
  batch.end = std::min(end, start + s.spec.batch_size);
  start = batch.end;
  if (start >= end) s.ranges.pop_front();
  return batch;
}

Result<IdsProducer::RoundResult> IdsProducer::Publish(const std::vector<int64_t>& deficits) {
  std::vector<Sent> sent;
  if (auto r = SendBatches(deficits, sent); !r) return OnTxnEnd(r.error(), sent);
  if (sent.empty()) return RoundResult{};  // nothing missing: no transaction was opened
  ++round_;
  if (options_.before_commit) {
    if (auto f = txn_->Flush(options_.txn_timeout); !f) {
      spdlog::warn("[producer] flush before the hook: {}", f.error().message);
    }
    spdlog::info("[producer] round {}: {} batches sent, committing", round_, sent.size());
    options_.before_commit(round_);
  }
  // Waits for the commit half the transaction timeout, then leaves it to the next round: a
  // broker that answers by then finishes it before the coordinator would expire the transaction
  // (an expired one bumps the producer epoch, which librdkafka reports as fenced).
  return OnTxnEnd(kafka::CommitTransaction(*txn_, clock_, options_.txn_timeout / 2, kKafkaTimeout),
                  sent);
}

std::expected<void, kafka::TxnEnd> IdsProducer::SendBatches(const std::vector<int64_t>& deficits,
                                                            std::vector<Sent>& sent) {
  for (size_t i = 0; i < streams_.size(); ++i) {
    auto& s = streams_[i];
    for (int64_t n = 0; n < deficits[i]; ++n) {
      auto batch = NextBatch(s);
      if (!batch) {
        // e.g. the allocators are unreachable or the lease is in doubt: the other streams go on.
        if (s.spec.mode == IdBatch::Mode::kSnowflake) {
          const bool lease = batch.error().message.find("lease") != std::string::npos;
          spdlog::warn("[producer] {}no snowflake batch of {}: {}", lease ? "lease lost: " : "",
                       s.spec.tag, batch.error().message);
        } else {
          spdlog::warn("[producer] no segment batch of {}: {}", s.spec.tag, batch.error().message);
        }
        break;
      }
      if (sent.empty()) {
        if (auto b = txn_->Begin(); !b) return std::unexpected(kafka::BeginFailed(b.error()));
      }
      std::string value = EncodeBatch(*batch);
      if (auto r = txn_->Send(options_.topic, s.partition, s.spec.tag, value, {}); !r) {
        // Dropped with the rest of the round: an aborted transaction publishes nothing.
        return std::unexpected(kafka::EndFailedTransaction(
            *txn_, {kafka::TxnError::Kind::kAbortable, false, "send: " + r.error().message}, clock_,
            kKafkaTimeout));
      }
      sent.push_back({s.partition, i, std::move(value), batch->size()});
    }
  }
  return {};
}

Result<IdsProducer::RoundResult> IdsProducer::OnTxnEnd(const kafka::TxnEnd& end,
                                                       std::vector<Sent>& sent) {
  switch (end.outcome) {
    case kafka::TxnOutcome::kCommitted:
      return OnCommitted(sent);
    case kafka::TxnOutcome::kAborted:
      return std::unexpected(OnAborted(end.error));
    case kafka::TxnOutcome::kUnknown:
      return std::unexpected(OnUnknown(end, sent));
    case kafka::TxnOutcome::kFatal:
      return std::unexpected(OnFatal(end.error));
  }
  return Fail(Code::kInternal, "unknown transaction outcome");
}

IdsProducer::RoundResult IdsProducer::OnCommitted(std::vector<Sent>& sent) {
  unfinished_ = Unfinished::kNone;
  RoundResult result = CountPublished(sent);
  spdlog::info("[producer] round {} published {} batches ({} IDs)", round_, result.batches,
               result.ids);
  return result;
}

Error IdsProducer::OnAborted(const kafka::TxnError& why) {
  // Nothing of it is visible to read_committed consumers; its segment IDs are a gap, never reused.
  unfinished_ = Unfinished::kNone;
  spdlog::warn("[producer] round {}: transaction aborted: {}", round_, why.message);
  return Error{Code::kUnavailable, "aborted: " + why.message};
}

Error IdsProducer::OnUnknown(const kafka::TxnEnd& end, std::vector<Sent>& sent) {
  // Begin on an open transaction would be a fatal state error: the next round makes the same call
  // again first, and counts the batches only if the commit went through.
  const bool commit = end.unanswered == kafka::TxnCall::kCommit;
  unfinished_ = commit ? Unfinished::kCommit : Unfinished::kAbort;
  if (commit) unfinished_sent_ = std::move(sent);
  spdlog::warn("[producer] round {}: {} unanswered, resumed before the next round: {}", round_,
               commit ? "commit" : "abort", end.error.message);
  return Error{Code::kUnavailable, "outcome unknown: " + end.error.message};
}

Error IdsProducer::OnFatal(const kafka::TxnError& why) {
  unfinished_ = Unfinished::kNone;  // the next producer's init_transactions settles it
  if (why.fenced) {
    fatal_ = true;
    spdlog::error("[producer] fenced: another run of {} took over: {}", options_.transactional_id,
                  why.message);
    return Error{Code::kFailedPrecondition, "fenced: " + why.message};
  }
  // This producer failed for good (librdkafka's fatal error, e.g. an idempotence sequence it
  // cannot recover). The next round replaces it; nothing of it counted as published unless
  // committed.
  broken_ = true;
  spdlog::error(
      "[producer] the transactional producer failed for good ({}); the next round "
      "replaces it",
      why.message);
  return Error{Code::kUnavailable, "failed for good: " + why.message};
}

IdsProducer::RoundResult IdsProducer::CountPublished(std::vector<Sent>& sent) {
  RoundResult result;
  const int64_t now_ms = clock_.NowMs();
  for (auto& b : sent) {
    auto& s = streams_[b.stream];
    s.batches->Inc();
    s.ids->Inc(static_cast<uint64_t>(b.ids));
    result.batches += 1;
    result.ids += b.ids;
    ledger_.AddPending(b.partition, b.stream, std::move(b.value), now_ms);
  }
  sent.clear();
  return result;
}

Result<void> IdsProducer::FinishTransaction() {
  if (unfinished_ == Unfinished::kNone) return {};
  const bool commit = unfinished_ == Unfinished::kCommit;
  std::vector<Sent> sent = std::move(unfinished_sent_);
  unfinished_sent_.clear();
  const kafka::TxnEnd end =
      commit ? kafka::CommitTransaction(*txn_, clock_, options_.txn_timeout / 2, kKafkaTimeout)
             : kafka::AbortTransaction(*txn_, clock_, kKafkaTimeout);
  if (!commit && end.outcome == kafka::TxnOutcome::kAborted) {
    unfinished_ = Unfinished::kNone;
    spdlog::info("[producer] the open transaction is aborted");
    return {};
  }
  auto r = OnTxnEnd(end, sent);  // counts the batches if the commit went through
  if (!r) return std::unexpected(r.error());
  spdlog::info("[producer] the unanswered commit went through");
  return {};
}

Result<IdsProducer::RoundResult> IdsProducer::RunRound() {
  if (fatal_) return Fail(Code::kFailedPrecondition, "the producer was fenced");
  if (broken_) {
    if (auto r = NewTransactionalProducer(kKafkaTimeout); !r) return std::unexpected(r.error());
    spdlog::info("[producer] the transactional producer is replaced by a new one");
  }
  if (auto r = FinishTransaction(); !r) return std::unexpected(r.error());
  if (auto r = CatchUp(); !r) return std::unexpected(r.error());
  if (auto r = ReadCommittedOffsets(); !r) return std::unexpected(r.error());
  std::vector<int64_t> deficits(streams_.size());
  for (size_t i = 0; i < streams_.size(); ++i)
    deficits[i] = ledger_.Deficit(i, options_.batches_ahead);
  auto result = Publish(deficits);
  std::string ahead;
  {
    std::lock_guard lock(ahead_mu_);
    for (size_t i = 0; i < streams_.size(); ++i) {
      ahead_[i] = ledger_.Ahead(i);
      streams_[i].ahead->Set(static_cast<double>(ahead_[i]));
      ahead += (i == 0 ? "" : ", ") + streams_[i].spec.tag + "/" +
               std::string(ModeName(streams_[i].spec.mode)) + " " + std::to_string(ahead_[i]);
    }
  }
  spdlog::debug("[producer] checked: batches ahead {}", ahead);
  if (result) last_round_ok_ns_.store(clock_.MonotonicNs());
  return result;
}

int64_t IdsProducer::Ahead(size_t stream) const {
  std::lock_guard lock(ahead_mu_);
  return ahead_.at(stream);
}

void IdsProducer::Start(std::function<void()> on_fatal) {
  on_fatal_ = std::move(on_fatal);
  rounds_.Start(options_.check_interval, PeriodicTask::FirstRun::kAtOnce,
                [this] { RunScheduledRound(); });
}

void IdsProducer::RunScheduledRound() {
  auto r = RunRound();
  if (r) return;
  if (fatal_) {
    rounds_.StopRepeating();
    if (on_fatal_) on_fatal_();
    return;
  }
  spdlog::warn("[producer] round failed: {}", r.error().message);
}

void IdsProducer::Stop() { rounds_.Stop(); }

}  // namespace kleaf::producer
