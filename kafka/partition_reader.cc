#include "kafka/partition_reader.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

struct PartitionReader::Impl {
  KafkaHandle rk;
  std::string name;
  bool failing = false;  // the last Watermarks call failed: the next success is a recovery
};

PartitionReader::PartitionReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PartitionReader::~PartitionReader() {
  if (impl_->rk) rd_kafka_consumer_close(impl_->rk.get());
}

Result<std::unique_ptr<PartitionReader>> PartitionReader::Create(const Properties& props,
                                                                 std::string name) {
  Properties p = props;
  p.emplace("enable.auto.commit", "false");
  p.emplace("enable.auto.offset.store", "false");
  p.emplace("isolation.level", "read_committed");
  p.emplace("auto.offset.reset", "earliest");
  p.emplace("enable.partition.eof", "true");
  p.emplace("fetch.wait.max.ms", "10");
  p.emplace("socket.nagle.disable", "true");
  p.emplace("group.id", kReaderGroup);  // never joins: assign() only, no commits
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p);
  if (!rk) return std::unexpected(rk.error());
  auto impl = std::make_unique<Impl>();
  impl->rk = std::move(*rk);
  impl->name = std::move(name);
  rd_kafka_poll_set_consumer(impl->rk.get());
  return std::unique_ptr<PartitionReader>(new PartitionReader(std::move(impl)));
}

Result<void> PartitionReader::Assign(const std::vector<TopicPartition>& partitions) {
  PartitionList list = ToList(partitions);
  if (auto err = rd_kafka_assign(impl_->rk.get(), list.get()); err)
    return std::unexpected(KafkaError(err, "assign"));
  return {};
}

std::optional<Message> PartitionReader::Poll(milliseconds timeout) {
  MessageHandle m(rd_kafka_consumer_poll(impl_->rk.get(), static_cast<int>(timeout.count())));
  if (!m) return std::nullopt;
  if (m->err) return std::nullopt;
  return ToMessage(m.get());
}

Result<std::pair<int64_t, int64_t>> PartitionReader::Watermarks(const std::string& topic,
                                                                int32_t partition,
                                                                milliseconds timeout) {
  int64_t low = 0, high = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool refreshed = false;
  for (;;) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    // In slices of 2 s at most, so that this loop's own checks (a refusal, a metadata refresh
    // after a cached "no leader") come between attempts well inside the deadline. First written
    // against librdkafka 2.8, which overran the timeout it was given with the broker stopped
    // (10 s asked, 14 s taken); 2.14.2 does not (measured 2026-12-06: 10,000-10,001 ms for
    // 10,000 asked, with nothing listening and with the broker stopped under a connected handle).
    auto err = rd_kafka_query_watermark_offsets(
        impl_->rk.get(), topic.c_str(), partition, &low, &high,
        static_cast<int>(std::clamp<int64_t>(left.count(), 1, 2000)));
    if (!err) {
      if (refreshed || impl_->failing) CountRecovery(impl_->name, "metadata_refresh");
      impl_->failing = false;
      return std::make_pair(low, high);
    }
    // Right after a topic is created or while leadership moves, brokers answer "not leader" or
    // "unknown partition" for a moment: ask again until the deadline.
    const bool no_leader = err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
                           err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                           err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                           err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
    const bool transient = no_leader || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
                           err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                           err == RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE;
    if (!transient || std::chrono::steady_clock::now() + milliseconds(200) > deadline) {
      impl_->failing = true;
      return std::unexpected(
          KafkaError(err, "watermarks of " + topic + "/" + std::to_string(partition)));
    }
    {
      // The cached "no leader" (or a leader that is gone) stays until a metadata answer replaces
      // it, and librdkafka's periodic refresh may be minutes away: ask for one now. Its failure
      // is the next try's to report.
      left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      (void)PrepareTopic(impl_->rk.get(), topic,
                         std::clamp(left, milliseconds(1), milliseconds(2000)));
      refreshed = true;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

Result<int64_t> PartitionReader::ReadToEnd(const std::string& topic, int32_t partition,
                                           int64_t from,
                                           const std::function<void(const Message&)>& fn,
                                           milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto marks = Watermarks(topic, partition, timeout);
  if (!marks) return std::unexpected(marks.error());
  const int64_t end = marks->second;
  int64_t position = std::max(from, marks->first);
  if (position >= end) return std::max(from, end);
  if (auto r = Assign({{topic, partition, position}}); !r) return std::unexpected(r.error());
  while (position < end) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Code::kUnavailable, "reading " + topic + "/" + std::to_string(partition) +
                                          " timed out at offset " + std::to_string(position) +
                                          " of " + std::to_string(end));
    }
    MessageHandle m(rd_kafka_consumer_poll(impl_->rk.get(), 100));
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      position = std::max(position, m->offset);
    } else if (m->err) {
      std::string msg = rd_kafka_message_errstr(m.get());
      if (m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
        // librdkafka looks up the coordinator of the group.id even for assign(): without the right
        // it asks again for ever, and a caller that retries kUnavailable would wait out its
        // deadline.
        return Fail(Code::kFailedPrecondition,
                    "reading " + topic + ": " + msg +
                        ": the Kafka principal needs DESCRIBE on group " + kReaderGroup +
                        " (the readers' group.id; " + kAclHint + ")");
      }
      if (IsAuthorizationFailure(msg)) {
        return Fail(Code::kFailedPrecondition, "reading " + topic + ": " + msg +
                                                   ": the Kafka principal needs READ on topic " +
                                                   topic + " (" + kAclHint + ")");
      }
      return Fail(Code::kUnavailable, "reading " + topic + ": " + msg);
    } else {
      fn(ToMessage(m.get()));
      position = m->offset + 1;
    }
  }
  rd_kafka_assign(impl_->rk.get(), nullptr);
  return position;
}

namespace {

// ReadAllToEnd's progress. Per partition, in the caller's order: the next offset and the end to
// reach. The partitions that had something to read, by (topic, partition), and how many of them
// have not reached their end.
struct ReadAllProgress {
  std::vector<int64_t> position;
  std::vector<int64_t> end;
  std::map<std::pair<std::string, int32_t>, size_t> index;
  std::vector<TopicPartition> to_read;
  size_t unfinished = 0;
};

// Where each partition starts and ends (its watermarks, read before `deadline`).
[[nodiscard]] Result<ReadAllProgress> PlanReadAll(PartitionReader& reader,
                                                  const std::vector<TopicPartition>& partitions,
                                                  std::chrono::steady_clock::time_point deadline) {
  ReadAllProgress r;
  r.position.resize(partitions.size());
  r.end.resize(partitions.size());
  for (size_t i = 0; i < partitions.size(); ++i) {
    const auto& tp = partitions[i];
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    auto marks = reader.Watermarks(tp.topic, tp.partition, std::max(left, milliseconds(1)));
    if (!marks) return std::unexpected(marks.error());
    r.end[i] = marks->second;
    r.position[i] = std::max(tp.offset, marks->first);
    if (r.position[i] >= r.end[i]) {
      r.position[i] = std::max(tp.offset, r.end[i]);
      continue;
    }
    r.index[{tp.topic, tp.partition}] = i;
    r.to_read.push_back({tp.topic, tp.partition, r.position[i]});
  }
  r.unfinished = r.to_read.size();
  return r;
}

// Applies one polled message without error, or a partition's EOF, to `r`; records go to `fn`.
void Advance(ReadAllProgress& r, const rd_kafka_message_t* m,
             const std::function<void(const Message&)>& fn) {
  auto it = m->rkt ? r.index.find({rd_kafka_topic_name(m->rkt), m->partition}) : r.index.end();
  if (it == r.index.end()) return;
  const size_t i = it->second;
  const bool was_open = r.position[i] < r.end[i];
  if (m->err) {
    r.position[i] = std::max(r.position[i], m->offset);  // EOF: m->offset is the end
  } else if (m->offset >= r.position[i]) {
    fn(ToMessage(m));
    r.position[i] = m->offset + 1;
  }
  if (was_open && r.position[i] >= r.end[i]) --r.unfinished;
}

}  // namespace

Result<std::vector<int64_t>> PartitionReader::ReadAllToEnd(
    const std::vector<TopicPartition>& partitions, const std::function<void(const Message&)>& fn,
    milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto progress = PlanReadAll(*this, partitions, deadline);
  if (!progress) return std::unexpected(progress.error());
  if (progress->to_read.empty()) return std::move(progress->position);
  if (auto r = Assign(progress->to_read); !r) return std::unexpected(r.error());
  while (progress->unfinished > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      rd_kafka_assign(impl_->rk.get(), nullptr);
      return Fail(Code::kUnavailable, "reading " + std::to_string(progress->unfinished) + " of " +
                                          std::to_string(progress->to_read.size()) +
                                          " partitions to their end timed out");
    }
    MessageHandle m(rd_kafka_consumer_poll(impl_->rk.get(), 100));
    if (!m) continue;
    if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      std::string msg = rd_kafka_message_errstr(m.get());
      m.reset();  // freed before the unassign
      rd_kafka_assign(impl_->rk.get(), nullptr);
      return Fail(Code::kUnavailable, "reading to the end: " + msg);
    }
    Advance(*progress, m.get(), fn);
  }
  rd_kafka_assign(impl_->rk.get(), nullptr);
  return std::move(progress->position);
}

}  // namespace kleaf::kafka
