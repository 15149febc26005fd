// LogStartClient (kafka/log_start.h). Kafka moves a log start only forward (DeleteRecords,
// retention) and keeps it with the log, not on a timer of its own.
#include "kafka/log_start.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

namespace {

using DeleteRecordsHandle = Handle<rd_kafka_DeleteRecords_t, rd_kafka_DeleteRecords_destroy>;

// Errors of a moment: right after a topic is created, while a leader moves, or without an answer.
bool Transient(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
      return true;
    default:
      return false;
  }
}

// Sends `send` (`what`: the request's name, for errors) with request and operation timeouts of
// `timeout` and waits for its result event on a queue of its own (other events of the handle are
// not touched). An error when no answer came in time or the request failed as a whole; `transient`
// says whether that was an error of a moment.
template <typename Send>
Result<EventHandle> AdminRequest(rd_kafka_t* rk, rd_kafka_admin_op_t op, const char* what,
                                 milliseconds timeout, bool& transient, Send send) {
  QueueHandle queue(rd_kafka_queue_new(rk));
  AdminOptionsHandle options(rd_kafka_AdminOptions_new(rk, op));
  char errstr[512];
  const int ms = static_cast<int>(std::max<int64_t>(timeout.count(), 1));
  rd_kafka_AdminOptions_set_request_timeout(options.get(), ms, errstr, sizeof(errstr));
  rd_kafka_AdminOptions_set_operation_timeout(options.get(), ms, errstr, sizeof(errstr));
  send(options.get(), queue.get());
  // The request's own timeout ends it; the grace covers handing that answer over.
  EventHandle event(rd_kafka_queue_poll(queue.get(), ms + 1000));
  if (!event) {
    transient = true;
    return std::unexpected(Error{Code::kUnavailable, std::string(what) + ": no answer within " +
                                                         std::to_string(ms) + " ms"});
  }
  if (auto err = rd_kafka_event_error(event.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    transient = Transient(err);
    Error e = KafkaError(err, std::string(what) + ": " + rd_kafka_event_error_string(event.get()));
    if (err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
        err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED) {
      e.code = Code::kFailedPrecondition;  // a right to grant, not a moment to wait out
    }
    return std::unexpected(std::move(e));
  }
  return event;
}

// Runs `once` (a request with `transient` set on a failure of a moment) until it succeeds, fails
// for good, or `timeout` passes. Between tries the topics' metadata is asked for: librdkafka
// keeps a stale leader until an answer replaces it, and its own refresh may be minutes away.
template <typename T, typename Once>
Result<T> WithRetries(rd_kafka_t* rk, const std::vector<TopicPartition>& partitions,
                      milliseconds timeout, Once once) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  };
  for (;;) {
    bool transient = false;
    Result<T> r = once(std::clamp(left(), milliseconds(1), milliseconds(5000)), transient);
    if (r || !transient || left() < milliseconds(300)) return r;
    std::set<std::string> topics;
    for (const auto& p : partitions) topics.insert(p.topic);
    for (const auto& t : topics) {
      (void)PrepareTopic(rk, t, std::clamp(left(), milliseconds(1), milliseconds(2000)));
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

std::string Where(const rd_kafka_topic_partition_t& p) {
  return std::string(p.topic) + "/" + std::to_string(p.partition);
}

// One DeleteRecords request, without retries. `transient` is set when it failed only for a
// moment (no leader yet, a leader moving, no answer): asking again may succeed.
Result<void> DeleteRecordsOnce(rd_kafka_t* rk, const std::vector<TopicPartition>& before,
                               milliseconds timeout, bool& transient) {
  transient = false;
  PartitionList list = ToList(before);
  DeleteRecordsHandle request(rd_kafka_DeleteRecords_new(list.get()));
  rd_kafka_DeleteRecords_t* requests[] = {request.get()};
  auto event =
      AdminRequest(rk, RD_KAFKA_ADMIN_OP_DELETERECORDS, "DeleteRecords", timeout, transient,
                   [&](rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                     rd_kafka_DeleteRecords(rk, requests, 1, options, queue);
                   });
  if (!event) return std::unexpected(event.error());
  const auto* result = rd_kafka_event_DeleteRecords_result(event->get());
  const auto* offsets = result ? rd_kafka_DeleteRecords_result_offsets(result) : nullptr;
  if (offsets == nullptr)
    return std::unexpected(Error{Code::kUnavailable, "DeleteRecords: no result"});
  for (int i = 0; i < offsets->cnt; ++i) {
    const auto& p = offsets->elems[i];
    if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      transient = Transient(p.err);
      Error e = KafkaError(p.err, "DeleteRecords of " + Where(p));
      if (p.err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
        e.code = Code::kFailedPrecondition;
        e.message += ": the principal needs the DELETE operation on topic " + std::string(p.topic) +
                     " (docs/ids-topic.md, \"Rights and topic settings\")";
      } else if (p.err == RD_KAFKA_RESP_ERR_POLICY_VIOLATION) {
        e.code = Code::kFailedPrecondition;
        e.message += ": the topic refuses deletions (cleanup.policy must be delete, not compact)";
      }
      return std::unexpected(std::move(e));
    }
  }
  return {};
}

// One ListOffsets request (earliest), without retries; `transient` as for DeleteRecordsOnce.
Result<std::vector<TopicPartition>> LogStartOffsetsOnce(
    rd_kafka_t* rk, const std::vector<TopicPartition>& partitions, milliseconds timeout,
    bool& transient) {
  transient = false;
  PartitionList list = ToList(partitions);
  for (int i = 0; i < list->cnt; ++i) list->elems[i].offset = RD_KAFKA_OFFSET_SPEC_EARLIEST;
  auto event = AdminRequest(rk, RD_KAFKA_ADMIN_OP_LISTOFFSETS, "ListOffsets", timeout, transient,
                            [&](rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                              rd_kafka_ListOffsets(rk, list.get(), options, queue);
                            });
  if (!event) return std::unexpected(event.error());
  const auto* result = rd_kafka_event_ListOffsets_result(event->get());
  if (result == nullptr)
    return std::unexpected(Error{Code::kUnavailable, "ListOffsets: no result"});
  size_t n = 0;
  const rd_kafka_ListOffsetsResultInfo_t** infos = rd_kafka_ListOffsets_result_infos(result, &n);
  std::vector<TopicPartition> starts;
  for (size_t i = 0; i < n; ++i) {
    const auto* p = rd_kafka_ListOffsetsResultInfo_topic_partition(infos[i]);
    if (p->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      transient = Transient(p->err);
      return std::unexpected(KafkaError(p->err, "ListOffsets of " + Where(*p)));
    }
    starts.push_back({p->topic, p->partition, p->offset});
  }
  if (starts.size() != partitions.size()) {
    transient = true;
    return std::unexpected(Error{Code::kUnavailable, "ListOffsets: " + std::to_string(n) +
                                                         " partitions answered of " +
                                                         std::to_string(partitions.size())});
  }
  return starts;
}

}  // namespace

struct LogStartClient::Impl {
  KafkaHandle rk;
};

LogStartClient::LogStartClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LogStartClient::~LogStartClient() = default;

Result<std::unique_ptr<LogStartClient>> LogStartClient::Create(const Properties& props) {
  // A consumer handle without a group: it accepts a consumer's properties without warnings, and
  // with no subscription and no assignment it never fetches.
  Properties p = props;
  p.erase("group.id");
  p.erase("group.instance.id");
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p);
  if (!rk) return std::unexpected(rk.error());
  auto impl = std::make_unique<Impl>();
  impl->rk = std::move(*rk);
  return std::unique_ptr<LogStartClient>(new LogStartClient(std::move(impl)));
}

Result<void> LogStartClient::DeleteRecordsBefore(const std::vector<TopicPartition>& before,
                                                 milliseconds timeout) {
  if (before.empty()) return {};
  rd_kafka_t* rk = impl_->rk.get();
  return WithRetries<void>(rk, before, timeout, [&](milliseconds slice, bool& transient) {
    return DeleteRecordsOnce(rk, before, slice, transient);
  });
}

Result<std::vector<TopicPartition>> LogStartClient::LogStarts(
    const std::vector<TopicPartition>& partitions, milliseconds timeout) {
  if (partitions.empty()) return std::vector<TopicPartition>{};
  rd_kafka_t* rk = impl_->rk.get();
  return WithRetries<std::vector<TopicPartition>>(
      rk, partitions, timeout, [&](milliseconds slice, bool& transient) {
        return LogStartOffsetsOnce(rk, partitions, slice, transient);
      });
}

}  // namespace kleaf::kafka
