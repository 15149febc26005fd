// What kafka/*.cc share of librdkafka: RAII handles, conversions between its types and kleaf's,
// and the error classification. Private to this folder: no other component includes it (the
// public headers keep librdkafka's types out).
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kafka/group_consumer.h"
#include "kafka/handle.h"
#include "kafka/message.h"
#include "kafka/recovery.h"
#include "kafka/txn_producer.h"

namespace kleaf::kafka {

// Whether `err` is an authorizer's refusal (topic, group, transactional id or cluster): not
// transient, the principal lacks an ACL until an operator grants it.
bool IsAuthorizationError(rd_kafka_resp_err_t err);
// A kleaf error for a librdkafka error code: unknown topics and partitions are kNotFound, invalid
// arguments kInvalidArgument, authorization failures kFailedPrecondition (with a pointer to the
// ACL docs), the rest kUnavailable.
Error KafkaError(rd_kafka_resp_err_t err, std::string_view what);
PartitionList ToList(const std::vector<TopicPartition>& parts);
std::vector<TopicPartition> FromList(const rd_kafka_topic_partition_list_t* list);
// Builds a configuration; `setup` may add callbacks. Returns the handle or a message naming the
// property that was rejected.
[[nodiscard]] Result<KafkaHandle> NewHandle(
    rd_kafka_type_t type, const Properties& props,
    const std::function<void(rd_kafka_conf_t*)>& setup = nullptr);
// Learns `topic`'s partitions and leaders in producer `rk` now, so that its first message to the
// topic goes out at once: otherwise librdkafka looks a new topic up on its next one-second scan,
// and the first message waits for that.
[[nodiscard]] Result<void> PrepareTopic(rd_kafka_t* rk, const std::string& topic,
                                        std::chrono::milliseconds timeout);
// Gives `rk` its bootstrap servers again when it has no broker it can send a request to (a
// metadata request finds none; it waits up to `wait` for one). True when they were added.
//
// librdkafka 2.10 and later drop every broker a metadata answer does not list (commit f7c427339,
// "Purge brokers no longer reported in metadata", rdkafka_metadata.c
// rd_kafka_metadata_decommission_unavailable_brokers; only an answer with no broker and no topic
// is ignored), bootstrap servers included. A KRaft broker that was stopped (SIGSTOP, a VM or GC
// pause) past broker.session.timeout.ms is fenced by the controller when it resumes, and answers
// the metadata requests queued meanwhile with no broker until it is unfenced: a client of a
// one-broker cluster then holds no broker at all. Nothing brings the bootstrap servers back
// (the re-bootstrap timer only starts when a metadata request is sent to a broker,
// rdkafka_request.c rd_kafka_MetadataRequest0), so every request fails with "Broker transport
// failure" and a group consumer never finds its coordinator again, for good. Seen in
// FrozenIntegrationTest (2 of 5 runs with 2.14.2: the allocator's consumer never rejoined after
// the thaw) and in a plain consumer (debug log: "0 brokers, 1 topics", then "Sending TERMINATE
// to 127.0.0.1:P/1", then "no broker available for coordinator query" until it was closed 35 s
// later). A broker that is merely down also leaves no usable broker: the bootstrap server added
// then (one per address; librdkafka reuses a configured one) is dropped again by the next
// metadata answer. librdkafka 2.8 finds its broker of the same address and adds nothing.
bool RestoreBootstrapIfNoBroker(rd_kafka_t* rk, std::chrono::milliseconds wait);

// Routes the handle's log lines to the sink of SetLogSink (log.h), when one is set.
void InstallLogSink(rd_kafka_conf_t* conf);
Message ToMessage(const rd_kafka_message_t* m);
// Produces one message with librdkafka's varargs API; `opaque` reaches the delivery callback.
rd_kafka_resp_err_t ProduceOne(rd_kafka_t* rk, const std::string& topic, int32_t partition,
                               std::string_view key, const std::optional<std::string>& value,
                               const std::vector<Header>& headers, void* opaque);
// Retriable, abortable or fatal (a fencing is fatal).
TxnError ToTxnError(ErrorHandle error);
[[nodiscard]] TxnResult<void> Check(rd_kafka_error_t* error);
// The group's committed offsets of `partitions` (the group of the consumer handle `rk`), each
// partition's own error included.
[[nodiscard]] Result<std::vector<TopicPartition>> CommittedOffsets(
    rd_kafka_t* rk, const std::vector<TopicPartition>& partitions,
    std::chrono::milliseconds timeout);

// Shared by group_consumer.cc and TxnProducer::SendOffsets (the group's metadata).
struct GroupConsumer::Impl {
  LogSink log;  // this handle's own log sink, if any; outlives rk (declared before it)
  // Shared with the queue of each PendingCommit started on it: a handle replaced after a fatal
  // error (GroupConsumer::RecoverIfFatal) lives on while one of them does, then is destroyed
  // without a consumer close (Close() made that close already, where there was one to make).
  std::shared_ptr<rd_kafka_t> rk;
  GroupConsumer::Start start = GroupConsumer::Start::kCommitted;
  std::vector<GroupConsumer::Event> pending;  // rebalance events not yet returned by Poll
  // Partitions paused by Pause() and not resumed since. Touched by the polling thread only
  // (Pause/Resume and the rebalance callback, which runs inside Poll and Close).
  std::set<std::pair<std::string, int32_t>> paused;
  // Start::kSought: the partitions the group assigned to this member, and of those the ones
  // being fetched with the position each was last started at. Polling thread only.
  std::vector<TopicPartition> owned;
  std::map<std::pair<std::string, int32_t>, int64_t> started;
  // When Poll next looks, while this member holds no partition, whether the handle still has a
  // broker (RestoreBootstrapIfNoBroker). Polling thread only.
  std::chrono::steady_clock::time_point next_broker_check{};
  // What the handle was opened with, to open it again under the classic protocol when
  // group.protocol "auto" finds the broker without the consumer protocol (KIP-848).
  Properties props;
  std::vector<std::string> topics;
  bool auto_protocol = false;      // "auto": may still fall back to classic
  bool consumer_protocol = false;  // the handle runs group.protocol=consumer
  // Whether the group hands partitions over incrementally (the consumer protocol, or a
  // cooperative assignor): set by the rebalance callback from librdkafka's word.
  bool incremental = false;
  // When a replacement handle that failed to open is tried again (GroupConsumer::RecoverIfFatal).
  std::chrono::steady_clock::time_point next_reopen{};
  // The queue rd_kafka_consumer_poll waits on, for Wake from other threads: set when a handle is
  // opened, dropped before it is destroyed, under wake_mu (the only member other threads touch).
  std::mutex wake_mu;
  QueueHandle wake_queue;
};

}  // namespace kleaf::kafka
