#include "producer/ids_producer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>

#include "base/await.h"
#include "snowflake/id128.h"

namespace kleaf::producer {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kKafkaTimeout{10000};
// A committed batch not read back within this long is forgotten by the ledger.
constexpr int64_t kPendingExpiryMs = 60000;
constexpr size_t kMaxTopicName = 249;  // Kafka's limit

}  // namespace

IdsProducer::IdsProducer(IdsProducerOptions options, allocator::SegmentSource& allocator,
                         snowflake::SnowflakeGenerator* generator, Clock& clock)
    : options_(std::move(options)),
      allocator_(allocator),
      generator_(generator),
      clock_(clock),
      ledger_(options_.streams.size() * static_cast<size_t>(options_.partitions)),
      ahead_(options_.streams.size(), 0) {
  auto& registry = metrics::Registry::Default();
  offsets_gone_ = &registry.GetGauge(
      "kleaf_ids_group_offsets_gone",
      "partitions of the stream topics whose consumer group has no committed offset while their "
      "log start is above 0: Kafka deleted the group's offsets (offsets.retention.minutes)");
  for (size_t i = 0; i < options_.streams.size(); ++i) {
    StreamState s;
    s.spec = options_.streams[i];
    s.topic = StreamTopic(options_.topic, s.spec.tag, s.spec.mode);
    metrics::Labels labels{{"tag", s.spec.tag}, {"mode", std::string(ModeName(s.spec.mode))}};
    s.batches = &registry.GetCounter("kleaf_producer_batches_published_total",
                                     "ID batches the producer committed to the ids topic", labels);
    s.ids = &registry.GetCounter("kleaf_producer_ids_published_total",
                                 "IDs in the batches the producer committed", labels);
    s.ahead = &registry.GetGauge("kleaf_producer_batches_ahead",
                                 "ID batches waiting ahead of the consumer group", labels);
    for (int32_t p = 0; p < options_.partitions; ++p) {
      auto queue_labels = labels;
      queue_labels.emplace_back("partition", std::to_string(p));
      lag_[Queue(i, p)] = &registry.GetGauge(
          "kleaf_ids_consumer_lag",
          "batches on a partition of a stream topic not yet committed by the consumer group",
          queue_labels);
    }
    stream_of_topic_[s.topic] = i;
    streams_.push_back(std::move(s));
  }
}

std::vector<kafka::TopicPartition> IdsProducer::QueuePartitions() const {
  std::vector<kafka::TopicPartition> parts;
  for (const auto& s : streams_) {
    for (int32_t p = 0; p < options_.partitions; ++p) parts.push_back({s.topic, p, -1001});
  }
  return parts;
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
  // One topic per stream, as many partitions as the ids topic (docs/architecture.md).
  std::vector<kafka::TopicSpec> specs;
  // As the cluster's topics (cluster::EnsureClusterTopics): 0 leaves replicas and
  // min.insync.replicas to the brokers, and only a chosen 3 or more sets min.insync.replicas=2.
  const int16_t replicas = options_.replication_factor > 0 ? options_.replication_factor
                                                           : kafka::kBrokerDefaultReplication;
  std::map<std::string, std::string> configs;
  if (replicas >= 3) configs["min.insync.replicas"] = "2";
  for (const auto& s : streams_) {
    if (s.topic.size() > kMaxTopicName) {
      return Fail(Code::kInvalidArgument, "producer.streams: the topic of " + s.spec.tag +
                                              " would be longer than 249 characters: " + s.topic);
    }
    specs.push_back({s.topic, options_.partitions, replicas, configs});
  }
  if (stream_of_topic_.size() != streams_.size()) {
    return Fail(Code::kInvalidArgument, "producer.streams: a (tag, mode) is listed twice");
  }
  if (auto r = kafka::EnsureTopics(options_.props, specs, kKafkaTimeout); !r) return r;
  if (auto r = CheckStreamTopics(); !r) return r;
  if (auto r = NewTransactionalProducer(milliseconds(60000)); !r) return r;
  auto reader = kafka::PartitionReader::Create(options_.props);
  if (!reader) return std::unexpected(reader.error());
  reader_ = std::move(*reader);
  auto log_starts = kafka::LogStartClient::Create(options_.props);
  if (!log_starts) return std::unexpected(log_starts.error());
  log_starts_ = std::move(*log_starts);
  auto offsets = kafka::GroupOffsets::Create(options_.props, options_.group);
  if (!offsets) return std::unexpected(offsets.error());
  offsets_ = std::move(*offsets);
  // The batches that count start where the consumed ones end.
  auto consumed = ConsumedOffsets();
  if (!consumed) return std::unexpected(consumed.error());
  for (const auto& [q, offset] : *consumed) read_to_[q] = offset;
  spdlog::info(
      "[producer] {} initialised: {} streams, a topic each ({}.<mode>.<tag>) of {} "
      "partitions, group {}",
      options_.transactional_id, streams_.size(), options_.topic, options_.partitions,
      options_.group);
  return {};
}

Result<void> IdsProducer::CheckStreamTopics() {
  // The claim floor is each partition's log start (docs/ids-topic.md): consumers move it with
  // DeleteRecords, which a compacted topic refuses, and it must never go back, which an unclean
  // leader election could do (a replica that missed the move becomes leader).
  std::vector<std::string> topics;
  for (const auto& s : streams_) topics.push_back(s.topic);
  auto described = kafka::DescribeCluster(
      options_.props, topics, {"cleanup.policy", "unclean.leader.election.enable"}, kKafkaTimeout);
  if (!described) return std::unexpected(described.error());
  for (const auto& [topic, found] : described->topics) {
    if (!found) return std::unexpected(found.error());
    const auto& configs = found->configs;
    if (auto it = configs.find("cleanup.policy");
        it != configs.end() && it->second.find("delete") == std::string::npos) {
      return Fail(Code::kFailedPrecondition,
                  "stream topic " + topic + " has cleanup.policy=" + it->second +
                      ": consumers claim batches by deleting the records below them, which "
                      "only cleanup.policy=delete allows; set it with kafka-configs --alter "
                      "--entity-type topics --entity-name " +
                      topic + " --add-config cleanup.policy=delete");
    }
    if (auto it = configs.find("unclean.leader.election.enable");
        it != configs.end() && it->second == "true") {
      return Fail(Code::kFailedPrecondition,
                  "stream topic " + topic +
                      " has unclean.leader.election.enable=true: an unclean election can move "
                      "a partition's log start back below claimed batches and hand them out "
                      "again; set it to false");
    }
  }
  return {};
}

Result<void> IdsProducer::CatchUp() {
  // Every partition of every stream in one read: their fetches go together (one after another
  // took a fetch round trip each, which bounded a stream at about 1.6 M IDs/s with 12 partitions).
  std::vector<kafka::TopicPartition> from;  // by queue
  std::map<std::pair<std::string, int32_t>, int32_t> queue_of;
  for (size_t i = 0; i < streams_.size(); ++i) {
    for (int32_t p = 0; p < options_.partitions; ++p) {
      const int32_t q = Queue(i, p);
      from.push_back({streams_[i].topic, p, read_to_[q]});
      queue_of[{streams_[i].topic, p}] = q;
    }
  }
  auto ends = reader_->ReadAllToEnd(
      from,
      [&](const kafka::Message& m) {
        if (!m.value) return;
        const int32_t q = queue_of.at({m.topic, m.partition});
        const auto& s = streams_[static_cast<size_t>(q) / static_cast<size_t>(options_.partitions)];
        auto batch = DecodeBatch(*m.value);
        if (!batch || batch->tag != s.spec.tag || batch->mode != s.spec.mode) return;
        ledger_.Observe(q, m.offset, static_cast<size_t>(q), *m.value);
      },
      kKafkaTimeout);
  if (!ends) return std::unexpected(ends.error());
  for (size_t q = 0; q < from.size(); ++q) read_to_[q] = (*ends)[q];  // `from` is in queue order
  ledger_.ExpirePending(clock_.NowMs() - kPendingExpiryMs);
  return {};
}

Result<std::map<int32_t, int64_t>> IdsProducer::ConsumedOffsets() {
  const auto parts = QueuePartitions();
  auto committed = offsets_->Committed(parts, kKafkaTimeout);
  if (!committed) return std::unexpected(committed.error());
  auto starts = log_starts_->LogStarts(parts, kKafkaTimeout);
  if (!starts) return std::unexpected(starts.error());
  // A batch is consumed once it is below the group's committed offset or below its partition's log
  // start: consumers that follow the claim rule move the log start past a batch after they commit
  // it and before they use it, so the start is the claim floor that survives the group's offsets
  // (which Kafka deletes offsets.retention.minutes after the group emptied), and retention moves
  // it past batches nobody claimed (gaps, topped up here).
  std::map<int32_t, int64_t> consumed;
  for (const auto& tp : *starts) {
    consumed[Queue(stream_of_topic_.at(tp.topic), tp.partition)] = std::max<int64_t>(tp.offset, 0);
  }
  for (const auto& tp : *committed) {
    const int32_t q = Queue(stream_of_topic_.at(tp.topic), tp.partition);
    int64_t& at = consumed[q];
    const bool without_offset = tp.offset < 0 && at > 0;
    if (without_offset && !without_offset_.contains(q)) {
      spdlog::warn(
          "[producer] group {} has no committed offset on {}/{}, whose log starts at {}: its "
          "offsets expired (offsets.retention.minutes) or were deleted. Consumers that follow "
          "the claim rule (docs/ids-topic.md) start at the log start, above every batch used",
          options_.group, tp.topic, tp.partition, at);
    }
    if (without_offset) {
      without_offset_.insert(q);
    } else {
      without_offset_.erase(q);
    }
    at = std::max(at, tp.offset);
  }
  offsets_gone_->Set(static_cast<double>(without_offset_.size()));
  return consumed;
}

Result<void> IdsProducer::ReadCommittedOffsets() {
  auto consumed = ConsumedOffsets();
  if (!consumed) return std::unexpected(consumed.error());
  for (const auto& [q, offset] : *consumed) {
    ledger_.SetCommitted(q, offset);
    read_to_[q] = std::max(read_to_[q], offset);  // nothing below is left to read back
    lag_.at(q)->Set(static_cast<double>(std::max<int64_t>(read_to_[q] - offset, 0)));
  }
  return {};
}

Result<IdBatch> IdsProducer::NextBatch(StreamState& s, int64_t wanted) {
  IdBatch batch;
  batch.tag = s.spec.tag;
  batch.mode = s.spec.mode;
  batch.group = options_.group;  // a consumer of another group refuses it
  if (s.spec.mode == IdBatch::Mode::kSnowflake || Is128Bit(s.spec.mode)) {
    if (generator_ == nullptr) return Fail(Code::kInternal, "no snowflake generator");
    auto drawn = s.spec.mode == IdBatch::Mode::kSnowflake
                     ? generator_->NextBatch(s.spec.batch_size, batch.ids)
                     : DrawId128Batch(s.spec, batch);
    if (!drawn) return std::unexpected(drawn.error());
    return batch;
  }
  if (s.ranges.empty()) {
    if (auto fetched = FetchSegment(s, wanted); !fetched) return std::unexpected(fetched.error());
  }
  if (auto cut = CutSegmentBatch(s, batch); !cut) return std::unexpected(cut.error());
  return batch;
}

Result<void> IdsProducer::DrawId128Batch(const Stream& spec, IdBatch& batch) {
  // The same draws and layout as the gateway's /api/v1/uuid7 and /api/v1/ulid routes: each ID
  // is a snowflake draw of this node's leased worker id plus random bits (snowflake/id128.h),
  // so the registry's guarantee (I3) covers them, and one sequence serves every kind.
  const snowflake::Id128Layout layout(spec.mode == IdBatch::Mode::kUuid7
                                          ? snowflake::Id128Kind::kUuid7
                                          : snowflake::Id128Kind::kUlid,
                                      generator_->layout());
  std::vector<snowflake::Id128> ids;
  if (auto r = snowflake::NextId128Batch(*generator_, layout, spec.batch_size, ids); !r) {
    return std::unexpected(r.error());
  }
  batch.texts.reserve(ids.size());
  for (const auto& id : ids) batch.texts.push_back(layout.Format(id));
  return {};
}

Result<void> IdsProducer::FetchSegment(StreamState& s, int64_t wanted) {
  // A segment arriving after the timeout is dropped (a gap, never reused).
  auto segment = Await<allocator::Segment>(
      options_.segment_timeout,
      "no segment of " + s.spec.tag + " within " +
          std::to_string(options_.segment_timeout.count()) + " ms",
      [&](auto done) {
        // One segment for the batches this round still makes of the stream (the allocator
        // caps the step at its max_step): one round trip instead of one per batch.
        allocator_.AllocateSegment(s.spec.tag, s.spec.batch_size * std::max<int64_t>(1, wanted),
                                   done);
      });
  if (!segment) return std::unexpected(segment.error());
  if (segment->end <= segment->start) {
    return Fail(Code::kInternal, "empty segment of " + s.spec.tag);
  }
  // A segment with a format (an obfuscated id_mode, or the residue class of one of several
  // datacenters) is published as listed IDs, below: a range of its counters would reveal what
  // the mode hides, and consumers would take the counters for IDs. New segments are asked for
  // only once the ranges of the last one are used up, so a format covers its own range only.
  if (segment->format && s.spec.batch_size > kMaxListedSegmentBatch) {
    return Fail(
        Code::kFailedPrecondition,
        "tag " + s.spec.tag + " is " + state::IdModeName(segment->format->mode()) +
            (segment->format->mode() == state::IdMode::kPlain ? " with more than one datacenter"
                                                              : "") +
            ": its batches list every ID, so producer.streams batch_size must be at "
            "most " +
            std::to_string(kMaxListedSegmentBatch) + " (Kafka's 1 MB record limit), got " +
            std::to_string(s.spec.batch_size));
  }
  s.format = segment->format;
  s.ranges.emplace_back(segment->start, segment->end);
  return {};
}

Result<void> IdsProducer::CutSegmentBatch(StreamState& s, IdBatch& batch) {
  // A segment larger than batch_size is split; its rest waits for the next batches of this run.
  auto& [start, end] = s.ranges.front();
  batch.start = start;
  batch.end = std::min(end, start + s.spec.batch_size);
  start = batch.end;
  if (start >= end) s.ranges.pop_front();
  if (!s.format) return {};
  // Listed IDs, never counters: an older consumer that knows only start/end finds the batch
  // malformed and skips it, rather than handing out counters (another datacenter's IDs, or an
  // obfuscated tag's count).
  batch.ids.reserve(static_cast<size_t>(batch.end - batch.start));
  const int64_t now_ms = clock_.NowMs();  // obfuscated_time: the hour the IDs are issued in
  for (int64_t c = batch.start; c < batch.end; ++c) {
    auto id = s.format->Map(c, now_ms);
    if (!id) return std::unexpected(id.error());
    batch.ids.push_back(*id);
  }
  batch.start = batch.end = 0;
  return {};
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
    int64_t wanted = 0;  // this stream's batches still to make in this round
    for (int32_t p = 0; p < options_.partitions; ++p) wanted += deficits[Queue(i, p)];
    bool stream_failed = false;
    for (int32_t p = 0; p < options_.partitions && !stream_failed; ++p) {
      const int32_t q = Queue(i, p);
      for (int64_t n = 0; n < deficits[q]; ++n, --wanted) {
        auto batch = NextBatch(s, wanted);
        if (!batch) {
          // e.g. the allocators are unreachable or the lease is in doubt: the other streams go on.
          if (s.spec.mode != IdBatch::Mode::kSegment) {
            const bool lease = batch.error().message.find("lease") != std::string::npos;
            spdlog::warn("[producer] {}no {} batch of {}: {}", lease ? "lease lost: " : "",
                         ModeName(s.spec.mode), s.spec.tag, batch.error().message);
          } else {
            spdlog::warn("[producer] no segment batch of {}: {}", s.spec.tag,
                         batch.error().message);
          }
          stream_failed = true;
          break;
        }
        if (sent.empty()) {
          if (auto b = txn_->Begin(); !b) return std::unexpected(kafka::BeginFailed(b.error()));
        }
        std::string value = EncodeBatch(*batch);
        if (auto r = txn_->Send(s.topic, p, s.spec.tag, value, {}); !r) {
          // Dropped with the rest of the round: an aborted transaction publishes nothing.
          return std::unexpected(kafka::EndFailedTransaction(
              *txn_, {kafka::TxnError::Kind::kAbortable, false, "send: " + r.error().message},
              clock_, kKafkaTimeout));
        }
        sent.push_back({q, i, std::move(value), batch->size()});
      }
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
  // The offset each batch was delivered at (a partition's in the order sent): a consumer may claim
  // one, and move the log start past it, before this node reads it back.
  auto delivered = txn_->TakeDelivered();
  std::map<int32_t, size_t> count, nth;  // per queue: its batches in the round, counted so far
  for (const auto& b : sent) ++count[b.queue];
  for (auto& b : sent) {
    auto& s = streams_[b.stream];
    s.batches->Inc();
    s.ids->Inc(static_cast<uint64_t>(b.ids));
    result.batches += 1;
    result.ids += b.ids;
    const auto& offsets = delivered[{s.topic, b.queue % options_.partitions}];
    const size_t i = nth[b.queue]++;
    ledger_.AddPending(
        b.queue, static_cast<size_t>(b.queue), std::move(b.value), now_ms,
        offsets.size() == count[b.queue] ? offsets[i] : std::numeric_limits<int64_t>::max());
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
  // Every partition of every stream topic: a member may hold any of them.
  std::vector<int64_t> deficits(QueueCount());
  for (size_t q = 0; q < deficits.size(); ++q)
    deficits[q] = ledger_.Deficit(q, options_.batches_ahead);
  auto result = Publish(deficits);
  if (result) {
    result->drained = std::count(deficits.begin(), deficits.end(), options_.batches_ahead);
  }
  std::string ahead;
  {
    MutexLock lock(ahead_mu_);
    for (size_t i = 0; i < streams_.size(); ++i) {
      ahead_[i] = 0;
      for (int32_t p = 0; p < options_.partitions; ++p) ahead_[i] += ledger_.Ahead(Queue(i, p));
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
  MutexLock lock(ahead_mu_);
  return ahead_.at(stream);
}

void IdsProducer::Start(std::function<void()> on_fatal) {
  on_fatal_ = std::move(on_fatal);
  rounds_.Start(options_.check_interval, PeriodicTask::FirstRun::kAtOnce,
                [this] { RunScheduledRound(); });
}

void IdsProducer::RunScheduledRound() {
  auto r = RunRound();
  if (r) {
    // Consumers emptied partitions within one interval: with a fixed interval a stream could
    // not go faster than batches_ahead x partitions x batch_size per interval, so the rounds
    // follow each other until they keep batches ahead again.
    if (r->drained > 0 && r->batches > 0) rounds_.RunAgainNow();
    return;
  }
  if (fatal_) {
    rounds_.StopRepeating();
    if (on_fatal_) on_fatal_();
    return;
  }
  spdlog::warn("[producer] round failed: {}", r.error().message);
}

void IdsProducer::Stop() { rounds_.Stop(); }

}  // namespace kleaf::producer
