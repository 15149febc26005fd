#include "kafka/client.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

namespace kleaf::kafka {
namespace {

using std::chrono::milliseconds;

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaHandle = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using PartitionList = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

Error KafkaError(rd_kafka_resp_err_t err, std::string_view what) {
  Code code = Code::kUnavailable;
  if (err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
    code = Code::kNotFound;
  } else if (err == RD_KAFKA_RESP_ERR__INVALID_ARG) {
    code = Code::kInvalidArgument;
  }
  return Error{code, std::string(what) + ": " + rd_kafka_err2str(err)};
}

PartitionList ToList(const std::vector<TopicPartition>& parts) {
  PartitionList list(rd_kafka_topic_partition_list_new(static_cast<int>(parts.size())));
  for (const auto& p : parts) {
    rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition)->offset = p.offset;
  }
  return list;
}

std::vector<TopicPartition> FromList(const rd_kafka_topic_partition_list_t* list) {
  std::vector<TopicPartition> out;
  for (int i = 0; list != nullptr && i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    out.push_back({e.topic, e.partition, e.offset});
  }
  return out;
}

// Builds a configuration; `setup` may add callbacks. Returns the handle or a message naming the
// property that was rejected.
Result<KafkaHandle> NewHandle(rd_kafka_type_t type, const Properties& props,
                              const std::function<void(rd_kafka_conf_t*)>& setup = nullptr) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Fail(Code::kInvalidArgument, "kafka property " + k + ": " + errstr);
    }
  }
  if (setup) setup(conf);
  rd_kafka_t* rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Fail(Code::kInvalidArgument, std::string("kafka client: ") + errstr);
  }
  return KafkaHandle(rk);
}

Message ToMessage(const rd_kafka_message_t* m) {
  Message out;
  out.topic = rd_kafka_topic_name(m->rkt);
  out.partition = m->partition;
  out.offset = m->offset;
  if (m->key) out.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) {
    out.value.emplace(static_cast<const char*>(m->payload), m->len);
  } else if (m->len == 0) {
    out.value.reset();
  }
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* val = nullptr;
    size_t size = 0;
    for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
      out.headers.push_back({name, std::string(static_cast<const char*>(val), size)});
    }
  }
  return out;
}

// Produces one message with librdkafka's varargs API; `opaque` reaches the delivery callback.
rd_kafka_resp_err_t ProduceOne(rd_kafka_t* rk, const std::string& topic, int32_t partition,
                               std::string_view key, const std::optional<std::string>& value,
                               const std::vector<Header>& headers, void* opaque) {
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& h : headers) {
    rd_kafka_header_add(hdrs, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                        static_cast<ssize_t>(h.value.size()));
  }
  void* payload = value ? const_cast<char*>(value->data()) : nullptr;
  size_t payload_len = value ? value->size() : 0;
  rd_kafka_resp_err_t err = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(payload, payload_len),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque),
      RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(hdrs);  // not taken over
  return err;
}

TxnError ToTxnError(rd_kafka_error_t* error) {
  TxnError e;
  e.message = rd_kafka_error_string(error);
  e.fenced = rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR__FENCED ||
             rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
             rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
  if (rd_kafka_error_is_fatal(error) || e.fenced) {
    e.kind = TxnError::Kind::kFatal;
  } else if (rd_kafka_error_txn_requires_abort(error)) {
    e.kind = TxnError::Kind::kAbortable;
  } else if (rd_kafka_error_is_retriable(error)) {
    e.kind = TxnError::Kind::kRetriable;
  } else {
    e.kind = TxnError::Kind::kFatal;
  }
  rd_kafka_error_destroy(error);
  return e;
}

TxnResult<void> Check(rd_kafka_error_t* error) {
  if (error == nullptr) return {};
  return std::unexpected(ToTxnError(error));
}

}  // namespace

const std::string* Message::header(std::string_view name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->name == name) return &it->value;
  }
  return nullptr;
}

int32_t PartitionFor(std::string_view key, int32_t partitions) {
  uint32_t h = 2166136261u;
  for (unsigned char c : key) {
    h ^= c;
    h *= 16777619u;
  }
  return static_cast<int32_t>(h % static_cast<uint32_t>(partitions));
}

// --- Topics -------------------------------------------------------------------------------------

Result<int32_t> PartitionCount(const Properties& props, const std::string& topic, milliseconds timeout) {
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk->get(), topic.c_str(), nullptr);
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk->get(), 0, rkt, &md, static_cast<int>(timeout.count()));
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "metadata of " + topic));
  int32_t count = -1;
  if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) count = md->topics[0].partition_cnt;
  rd_kafka_metadata_destroy(md);
  if (count < 0) return Fail(Code::kNotFound, "topic " + topic + " does not exist");
  return count;
}

namespace {
// librdkafka prints a Uuid in standard base64; Kafka's own tools print it URL-safe ('-' and '_'
// for '+' and '/'), which is what an operator compares with.
std::string KafkaUuidText(std::string text) {
  for (char& c : text) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return text;
}
}  // namespace

Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                milliseconds timeout) {
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  const char* names[] = {topic.c_str()};
  rd_kafka_TopicCollection_t* topics = rd_kafka_TopicCollection_of_topic_names(names, 1);
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk->get());
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk->get(), RD_KAFKA_ADMIN_OP_DESCRIBETOPICS);
  char errstr[512];
  rd_kafka_AdminOptions_set_request_timeout(options, static_cast<int>(timeout.count()), errstr,
                                            sizeof(errstr));
  rd_kafka_DescribeTopics(rk->get(), topics, options, queue);
  // The request timeout ends the request; the margin only covers handing the result over.
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, static_cast<int>(timeout.count()) + 1000);
  Result<TopicInfo> result = Fail(Code::kUnavailable, "describing topic " + topic + " timed out");
  if (event != nullptr && rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(KafkaError(rd_kafka_event_error(event), "describing topic " + topic));
  } else if (event != nullptr) {
    size_t n = 0;
    const rd_kafka_TopicDescription_t** descriptions =
        rd_kafka_DescribeTopics_result_topics(rd_kafka_event_DescribeTopics_result(event), &n);
    if (n != 1) {
      result = Fail(Code::kUnavailable,
                    "describing topic " + topic + ": " + std::to_string(n) + " answers");
    } else if (const rd_kafka_error_t* error = rd_kafka_TopicDescription_error(descriptions[0]);
               error != nullptr && rd_kafka_error_code(error) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = std::unexpected(KafkaError(rd_kafka_error_code(error), "topic " + topic));
    } else {
      size_t partitions = 0;
      rd_kafka_TopicDescription_partitions(descriptions[0], &partitions);
      const rd_kafka_Uuid_t* id = rd_kafka_TopicDescription_topic_id(descriptions[0]);
      result = TopicInfo{.partitions = static_cast<int32_t>(partitions),
                         .id = id != nullptr ? KafkaUuidText(rd_kafka_Uuid_base64str(id)) : ""};
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_queue_destroy(queue);
  rd_kafka_TopicCollection_destroy(topics);
  return result;
}

std::string LibraryVersion() { return rd_kafka_version_str(); }

// One deadline for the whole call: creating the topics and checking their partition counts share
// `timeout` (each step gets what is left, so the call returns within `timeout` plus the time
// librdkafka takes to drop a handle: 1.0 s with a frozen broker).
Result<void> EnsureTopics(const Properties& props, const std::vector<TopicSpec>& topics,
                          milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto left = [&deadline] {
    return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                         deadline - std::chrono::steady_clock::now()));
  };
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  std::vector<rd_kafka_NewTopic_t*> new_topics;
  char errstr[512];
  for (const auto& t : topics) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(t.name.c_str(), t.partitions,
                                                     t.replication_factor, errstr, sizeof(errstr));
    if (nt == nullptr) {
      for (auto* n : new_topics) rd_kafka_NewTopic_destroy(n);
      return Fail(Code::kInvalidArgument, "topic " + t.name + ": " + errstr);
    }
    for (const auto& [k, v] : t.configs) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
    new_topics.push_back(nt);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk->get());
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk->get(), RD_KAFKA_ADMIN_OP_CREATETOPICS);
  const auto create_timeout = static_cast<int>(left().count());
  rd_kafka_AdminOptions_set_operation_timeout(options, create_timeout, errstr, sizeof(errstr));
  rd_kafka_AdminOptions_set_request_timeout(options, create_timeout, errstr, sizeof(errstr));
  rd_kafka_CreateTopics(rk->get(), new_topics.data(), new_topics.size(), options, queue);
  // No margin past the deadline: an answer that has not come by then is a timeout (the request is
  // dropped with the queue).
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, static_cast<int>(left().count()));
  Result<void> result;
  if (event == nullptr) {
    result = Fail(Code::kUnavailable, "creating topics timed out (is Kafka reachable?)");
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = Fail(Code::kUnavailable, std::string("creating topics: ") + rd_kafka_event_error_string(event));
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &n);
    for (size_t i = 0; i < n && result; ++i) {
      rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        const char* msg = rd_kafka_topic_result_error_string(results[i]);
        result = Fail(Code::kUnavailable, std::string("creating topic ") + rd_kafka_topic_result_name(results[i]) +
                                              ": " + (msg ? msg : rd_kafka_err2str(err)));
      }
    }
  }
  if (event) rd_kafka_event_destroy(event);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_queue_destroy(queue);
  for (auto* n : new_topics) rd_kafka_NewTopic_destroy(n);
  if (!result) return result;
  for (const auto& t : topics) {
    // A broker's metadata can lag a topic just created (more so while it rejoins its controller,
    // e.g. after a stall): ask again until the deadline.
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(Code::kUnavailable,
                  "checking topic " + t.name + " timed out (is Kafka reachable?)");
    }
    auto count = PartitionCount(props, t.name, left());
    while (!count && count.error().code == Code::kNotFound &&
           std::chrono::steady_clock::now() + milliseconds(200) < deadline) {
      std::this_thread::sleep_for(milliseconds(200));
      count = PartitionCount(props, t.name, left());
    }
    if (!count) return std::unexpected(count.error());
    if (*count < t.partitions) {
      return Fail(Code::kFailedPrecondition,
                  "topic " + t.name + " has " + std::to_string(*count) + " partitions, " +
                      std::to_string(t.partitions) + " are configured");
    }
  }
  return {};
}

// --- Producer -----------------------------------------------------------------------------------

struct Producer::Impl {
  Properties props;
  Producer::Rebuilt rebuilt;
  // Send and Flush use the handle under a shared lock; the poller thread replaces it under an
  // exclusive one after a fatal error.
  std::shared_mutex mu;
  KafkaHandle rk;  // guarded by mu
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rebuilds{0};
  std::thread poller;
};

namespace {
void ProducerDelivered(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  auto* cb = static_cast<Producer::Delivered*>(m->_private);
  if (cb == nullptr) return;
  if (m->err) {
    (*cb)(std::unexpected(KafkaError(m->err, "delivery")));
  } else {
    (*cb)(m->offset);
  }
  delete cb;
}

Result<KafkaHandle> NewIdempotentProducer(const Properties& props) {
  return NewHandle(RD_KAFKA_PRODUCER, props,
                   [](rd_kafka_conf_t* conf) { rd_kafka_conf_set_dr_msg_cb(conf, ProducerDelivered); });
}

// Fails every message still queued or in flight in `rk` (their Delivered callbacks run with the
// error, freeing them) before the handle goes.
void PurgeAndServe(rd_kafka_t* rk) {
  rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(rk, 0);
}

// The poller thread: serves delivery reports, and replaces a handle that raised a fatal error.
void ServeProducer(Producer::Impl& impl) {
  while (!impl.stop.load()) {
    char errstr[512];
    rd_kafka_resp_err_t fatal = RD_KAFKA_RESP_ERR_NO_ERROR;
    {
      std::shared_lock lock(impl.mu);
      rd_kafka_poll(impl.rk.get(), 50);
      fatal = rd_kafka_fatal_error(impl.rk.get(), errstr, sizeof(errstr));
    }
    if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    auto fresh = NewIdempotentProducer(impl.props);
    if (!fresh) continue;  // the same properties made the first handle: not expected
    KafkaHandle broken;
    {
      std::unique_lock lock(impl.mu);
      broken = std::exchange(impl.rk, std::move(*fresh));
    }
    impl.rebuilds.fetch_add(1);
    if (impl.rebuilt) impl.rebuilt(std::string(rd_kafka_err2name(fatal)) + ": " + errstr);
    PurgeAndServe(broken.get());
  }
}
}  // namespace

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Producer>> Producer::Create(const Properties& props, Rebuilt rebuilt) {
  Properties p = props;
  p.emplace("enable.idempotence", "true");
  p.emplace("linger.ms", "0");
  p.emplace("socket.nagle.disable", "true");
  auto rk = NewIdempotentProducer(p);
  if (!rk) return std::unexpected(rk.error());
  auto impl = std::make_unique<Impl>();
  impl->props = std::move(p);
  impl->rebuilt = std::move(rebuilt);
  impl->rk = std::move(*rk);
  Impl* raw = impl.get();
  impl->poller = std::thread([raw] { ServeProducer(*raw); });
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}

Producer::~Producer() {
  (void)Flush(milliseconds(2000));
  impl_->stop.store(true);
  impl_->poller.join();
  PurgeAndServe(impl_->rk.get());
}

Result<void> Producer::Send(const std::string& topic, int32_t partition, std::string_view key,
                            const std::optional<std::string>& value,
                            const std::vector<Header>& headers, Delivered delivered) {
  auto* cb = delivered ? new Delivered(std::move(delivered)) : nullptr;
  std::shared_lock lock(impl_->mu);
  rd_kafka_resp_err_t err = ProduceOne(impl_->rk.get(), topic, partition, key, value, headers, cb);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    delete cb;
    return std::unexpected(KafkaError(err, "producing to " + topic));
  }
  return {};
}

Result<void> Producer::Flush(milliseconds timeout) {
  // In slices, so that a rebuild is never held up by a long flush.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    rd_kafka_resp_err_t err;
    {
      std::shared_lock lock(impl_->mu);
      err = rd_kafka_flush(impl_->rk.get(), static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100)));
    }
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
    if (err != RD_KAFKA_RESP_ERR__TIMED_OUT || left.count() <= 0) {
      return std::unexpected(KafkaError(err, "flush"));
    }
  }
}

int64_t Producer::rebuilds() const { return impl_->rebuilds.load(); }

void Producer::InjectFatalErrorForTesting() {
  std::shared_lock lock(impl_->mu);
  rd_kafka_test_fatal_error(impl_->rk.get(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                            "injected by a test");
}

// --- TxnProducer --------------------------------------------------------------------------------

struct TxnProducer::Impl {
  KafkaHandle rk;
  std::mutex mu;
  std::map<std::pair<std::string, int32_t>, int64_t> delivered;  // guarded by mu
};

namespace {
void TxnDelivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err) return;  // the transaction's commit reports the failure
  auto* impl = static_cast<TxnProducer::Impl*>(opaque);
  std::lock_guard lock(impl->mu);
  auto& best = impl->delivered[{rd_kafka_topic_name(m->rkt), m->partition}];
  best = std::max(best, m->offset);
}
}  // namespace

TxnProducer::TxnProducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TxnProducer::~TxnProducer() = default;

Result<std::unique_ptr<TxnProducer>> TxnProducer::Create(const Properties& props,
                                                          const std::string& transactional_id) {
  Properties p = props;
  p["transactional.id"] = transactional_id;
  p.emplace("linger.ms", "0");
  p.emplace("socket.nagle.disable", "true");
  p.emplace("transaction.timeout.ms", "10000");
  p.emplace("message.timeout.ms", "9000");
  auto impl = std::make_unique<Impl>();
  Impl* raw = impl.get();
  auto rk = NewHandle(RD_KAFKA_PRODUCER, p, [raw](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, TxnDelivered);
    rd_kafka_conf_set_opaque(conf, raw);
  });
  if (!rk) return std::unexpected(rk.error());
  impl->rk = std::move(*rk);
  return std::unique_ptr<TxnProducer>(new TxnProducer(std::move(impl)));
}

TxnResult<void> TxnProducer::Init(milliseconds timeout) {
  return Check(rd_kafka_init_transactions(impl_->rk.get(), static_cast<int>(timeout.count())));
}

TxnResult<void> TxnProducer::Begin() { return Check(rd_kafka_begin_transaction(impl_->rk.get())); }

Result<void> TxnProducer::Send(const std::string& topic, int32_t partition, std::string_view key,
                               const std::optional<std::string>& value,
                               const std::vector<Header>& headers) {
  rd_kafka_resp_err_t err = ProduceOne(impl_->rk.get(), topic, partition, key, value, headers, nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "producing to " + topic));
  return {};
}

TxnResult<void> TxnProducer::Commit(milliseconds timeout) {
  auto r = Check(rd_kafka_commit_transaction(impl_->rk.get(), static_cast<int>(timeout.count())));
  rd_kafka_poll(impl_->rk.get(), 0);  // serve delivery reports (offsets)
  return r;
}

TxnResult<void> TxnProducer::Abort(milliseconds timeout) {
  auto r = Check(rd_kafka_abort_transaction(impl_->rk.get(), static_cast<int>(timeout.count())));
  rd_kafka_poll(impl_->rk.get(), 0);
  std::lock_guard lock(impl_->mu);
  impl_->delivered.clear();
  return r;
}

std::optional<TxnError> TxnProducer::FatalError() {
  char errstr[512];
  rd_kafka_resp_err_t err = rd_kafka_fatal_error(impl_->rk.get(), errstr, sizeof(errstr));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  return TxnError{.kind = TxnError::Kind::kFatal,
                  .fenced = err == RD_KAFKA_RESP_ERR__FENCED ||
                            err == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                            err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
                  .message = std::string(rd_kafka_err2name(err)) + ": " + errstr};
}

void TxnProducer::InjectFatalErrorForTesting() {
  rd_kafka_test_fatal_error(impl_->rk.get(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                            "injected by a test");
}

std::map<std::pair<std::string, int32_t>, int64_t> TxnProducer::TakeDeliveredOffsets() {
  rd_kafka_poll(impl_->rk.get(), 0);
  std::lock_guard lock(impl_->mu);
  return std::exchange(impl_->delivered, {});
}

Result<void> TxnProducer::Flush(milliseconds timeout) {
  auto err = rd_kafka_flush(impl_->rk.get(), static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "flush"));
  return {};
}

// --- GroupOffsets -------------------------------------------------------------------------------

struct GroupOffsets::Impl {
  KafkaHandle rk;
};

GroupOffsets::GroupOffsets(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GroupOffsets::~GroupOffsets() {
  if (impl_->rk) rd_kafka_consumer_close(impl_->rk.get());
}

Result<std::unique_ptr<GroupOffsets>> GroupOffsets::Create(const Properties& props,
                                                           const std::string& group) {
  Properties p = props;
  p["group.id"] = group;
  // Never subscribes (so never joins the group) and never commits: it only asks the coordinator.
  p["enable.auto.commit"] = "false";
  p["enable.auto.offset.store"] = "false";
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p);
  if (!rk) return std::unexpected(rk.error());
  auto impl = std::make_unique<Impl>();
  impl->rk = std::move(*rk);
  rd_kafka_poll_set_consumer(impl->rk.get());
  return std::unique_ptr<GroupOffsets>(new GroupOffsets(std::move(impl)));
}

Result<std::vector<TopicPartition>> GroupOffsets::Committed(
    const std::vector<TopicPartition>& partitions, milliseconds timeout) {
  PartitionList list = ToList(partitions);
  auto err = rd_kafka_committed(impl_->rk.get(), list.get(), static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(err, "committed offsets"));
  }
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return std::unexpected(KafkaError(
          e.err, "committed offset of " + std::string(e.topic) + "/" + std::to_string(e.partition)));
    }
  }
  return FromList(list.get());
}

Result<void> GroupOffsets::Commit(const std::vector<TopicPartition>& offsets) {
  PartitionList list = ToList(offsets);
  auto err = rd_kafka_commit(impl_->rk.get(), list.get(), /*async=*/0);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "commit offsets"));
  for (int i = 0; i < list->cnt; ++i) {
    if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return std::unexpected(KafkaError(list->elems[i].err, "commit offset"));
    }
  }
  return {};
}

// --- GroupConsumer ------------------------------------------------------------------------------

struct GroupConsumer::Impl {
  KafkaHandle rk;
  std::vector<GroupConsumer::Event> pending;  // rebalance events not yet returned by Poll
  // Partitions paused by Pause() and not resumed since. Touched by the polling thread only
  // (Pause/Resume and the rebalance callback, which runs inside Poll and Close).
  std::set<std::pair<std::string, int32_t>> paused;
};

namespace {
// Resumes every partition the application paused (before they are given up).
void ResumePaused(rd_kafka_t* rk, GroupConsumer::Impl& impl) {
  if (impl.paused.empty()) return;
  PartitionList paused(rd_kafka_topic_partition_list_new(static_cast<int>(impl.paused.size())));
  for (const auto& [topic, partition] : impl.paused) {
    rd_kafka_topic_partition_list_add(paused.get(), topic.c_str(), partition);
  }
  rd_kafka_resume_partitions(rk, paused.get());
  impl.paused.clear();
}

void Rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
               void* opaque) {
  auto* impl = static_cast<GroupConsumer::Impl*>(opaque);
  GroupConsumer::Event e;
  e.partitions = FromList(parts);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    rd_kafka_assign(rk, parts);
    e.kind = GroupConsumer::Event::Kind::kAssigned;
  } else {
    // A pause outlives the assignment in librdkafka: lift it while the partitions are still ours.
    ResumePaused(rk, *impl);
    rd_kafka_assign(rk, nullptr);
    e.kind = GroupConsumer::Event::Kind::kRevoked;
  }
  impl->pending.push_back(std::move(e));
}
}  // namespace

GroupConsumer::GroupConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GroupConsumer::~GroupConsumer() { Close(); }

Result<std::unique_ptr<GroupConsumer>> GroupConsumer::Create(const Properties& props,
                                                              const std::vector<std::string>& topics) {
  Properties p = props;
  p.emplace("enable.auto.commit", "false");
  p.emplace("isolation.level", "read_committed");
  p.emplace("auto.offset.reset", "earliest");
  // An eager assignor: Poll hands whole assignments and revocations to the owner. roundrobin
  // spreads the partitions of one topic evenly (librdkafka 2.0.2's sticky assignor also had
  // ownership bugs; cooperative ones would need incremental assign/unassign here).
  p.emplace("partition.assignment.strategy", "roundrobin");
  p.emplace("fetch.wait.max.ms", "10");
  p.emplace("socket.nagle.disable", "true");
  auto impl = std::make_unique<Impl>();
  Impl* raw = impl.get();
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p, [raw](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_rebalance_cb(conf, Rebalance);
    rd_kafka_conf_set_opaque(conf, raw);
  });
  if (!rk) return std::unexpected(rk.error());
  impl->rk = std::move(*rk);
  rd_kafka_poll_set_consumer(impl->rk.get());
  PartitionList list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const auto& t : topics) rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(impl->rk.get(), list.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(err, "subscribe"));
  }
  return std::unique_ptr<GroupConsumer>(new GroupConsumer(std::move(impl)));
}

GroupConsumer::Event GroupConsumer::Poll(milliseconds timeout) {
  if (impl_->pending.empty()) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(impl_->rk.get(), static_cast<int>(timeout.count()));
    if (!impl_->pending.empty()) {
      // A rebalance happened during this poll: report it before the message.
      if (m) {
        Event msg;
        if (m->err) {
          msg.kind = Event::Kind::kError;
          msg.error = rd_kafka_message_errstr(m);
        } else {
          msg.kind = Event::Kind::kMessage;
          msg.message = ToMessage(m);
        }
        rd_kafka_message_destroy(m);
        impl_->pending.push_back(std::move(msg));
      }
    } else {
      Event e;
      if (m == nullptr) return e;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        rd_kafka_message_destroy(m);
        return e;
      }
      if (m->err) {
        e.kind = Event::Kind::kError;
        e.error = rd_kafka_message_errstr(m);
      } else {
        e.kind = Event::Kind::kMessage;
        e.message = ToMessage(m);
      }
      rd_kafka_message_destroy(m);
      return e;
    }
  }
  Event e = std::move(impl_->pending.front());
  impl_->pending.erase(impl_->pending.begin());
  return e;
}

Result<std::vector<TopicPartition>> GroupConsumer::Committed(const std::vector<TopicPartition>& partitions,
                                                             milliseconds timeout) {
  PartitionList list = ToList(partitions);
  auto err = rd_kafka_committed(impl_->rk.get(), list.get(), static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "committed offsets"));
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return std::unexpected(KafkaError(
          e.err, "committed offset of " + std::string(e.topic) + "/" + std::to_string(e.partition)));
    }
  }
  return FromList(list.get());
}

Result<void> GroupConsumer::Seek(const TopicPartition& position, milliseconds timeout) {
  PartitionList list = ToList({position});
  rd_kafka_error_t* error = rd_kafka_seek_partitions(impl_->rk.get(), list.get(), static_cast<int>(timeout.count()));
  if (error) {
    std::string msg = rd_kafka_error_string(error);
    rd_kafka_error_destroy(error);
    return Fail(Code::kUnavailable, "seek: " + msg);
  }
  if (list->elems[0].err) return std::unexpected(KafkaError(list->elems[0].err, "seek"));
  return {};
}

namespace {
// Whether a commit that failed with `err` may still be applied by the broker: the request may
// have been sent and its answer lost (timeouts, broken connections). Broker answers, and local
// refusals before sending, are definite.
bool MayLand(rd_kafka_resp_err_t err) {
  if (err >= 0) return false;
  switch (err) {
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__NO_OFFSET:
    case RD_KAFKA_RESP_ERR__STATE:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST:
    case RD_KAFKA_RESP_ERR__UNKNOWN_GROUP:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
      return false;
    default:
      return true;
  }
}
}  // namespace

GroupConsumer::PendingCommit::~PendingCommit() {
  rd_kafka_queue_destroy(static_cast<rd_kafka_queue_t*>(queue_));
}

std::optional<GroupConsumer::PendingCommit::Outcome> GroupConsumer::PendingCommit::Wait(milliseconds timeout) {
  auto* queue = static_cast<rd_kafka_queue_t*>(queue_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ev == nullptr) {
      if (left.count() <= 0) return std::nullopt;
      continue;
    }
    if (rd_kafka_event_type(ev) != RD_KAFKA_EVENT_OFFSET_COMMIT) {
      rd_kafka_event_destroy(ev);
      continue;
    }
    Outcome out;
    out.committed = true;
    auto fail = [&](rd_kafka_resp_err_t e) {
      out.committed = false;
      out.may_land = out.may_land || MayLand(e);
      if (out.error.empty()) out.error = KafkaError(e, "commit").message;
    };
    if (auto e = rd_kafka_event_error(ev); e != RD_KAFKA_RESP_ERR_NO_ERROR) fail(e);
    if (const auto* parts = rd_kafka_event_topic_partition_list(ev)) {
      for (int i = 0; i < parts->cnt; ++i) {
        if (parts->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) fail(parts->elems[i].err);
      }
    }
    rd_kafka_event_destroy(ev);
    return out;
  }
}

Result<std::unique_ptr<GroupConsumer::PendingCommit>> GroupConsumer::StartCommit(
    const std::vector<TopicPartition>& offsets) {
  PartitionList list = ToList(offsets);
  rd_kafka_queue_t* queue = rd_kafka_queue_new(impl_->rk.get());
  auto err = rd_kafka_commit_queue(impl_->rk.get(), list.get(), queue, nullptr, nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_queue_destroy(queue);
    return std::unexpected(KafkaError(err, "commit"));
  }
  return std::unique_ptr<PendingCommit>(new PendingCommit(queue));
}

Result<void> GroupConsumer::Commit(const std::vector<TopicPartition>& offsets, milliseconds timeout) {
  auto pending = StartCommit(offsets);
  if (!pending) return std::unexpected(pending.error());
  auto outcome = (*pending)->Wait(timeout);
  if (!outcome) return Fail(Code::kUnavailable, "commit: no outcome within " + std::to_string(timeout.count()) + " ms");
  if (!outcome->committed) return Fail(Code::kUnavailable, outcome->error);
  return {};
}

std::vector<TopicPartition> GroupConsumer::Assignment() {
  rd_kafka_topic_partition_list_t* list = nullptr;
  if (rd_kafka_assignment(impl_->rk.get(), &list) != RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  PartitionList owned(list);
  return FromList(list);
}

Result<void> GroupConsumer::Pause(const std::vector<TopicPartition>& partitions) {
  std::vector<TopicPartition> fresh;
  for (const auto& p : partitions) {
    if (!impl_->paused.contains({p.topic, p.partition})) fresh.push_back(p);
  }
  if (fresh.empty()) return {};
  PartitionList list = ToList(fresh);
  if (auto err = rd_kafka_pause_partitions(impl_->rk.get(), list.get()); err) return std::unexpected(KafkaError(err, "pause"));
  for (const auto& p : fresh) impl_->paused.insert({p.topic, p.partition});
  return {};
}

Result<void> GroupConsumer::Resume(const std::vector<TopicPartition>& partitions) {
  std::vector<TopicPartition> held;
  for (const auto& p : partitions) {
    if (impl_->paused.contains({p.topic, p.partition})) held.push_back(p);
  }
  if (held.empty()) return {};
  PartitionList list = ToList(held);
  if (auto err = rd_kafka_resume_partitions(impl_->rk.get(), list.get()); err) return std::unexpected(KafkaError(err, "resume"));
  for (const auto& p : held) impl_->paused.erase({p.topic, p.partition});
  return {};
}

bool GroupConsumer::Close(milliseconds timeout) {
  if (!impl_->rk) return true;
  rd_kafka_t* rk = impl_->rk.get();
  // Closing gives everything up: a rebalance event here is a revocation (an assignment that
  // crossed the close is given up as well). Every one must be served, or the close waits for it.
  auto serve = [&](rd_kafka_event_t* ev) {
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE) {
      ResumePaused(rk, *impl_);
      rd_kafka_assign(rk, nullptr);
    }
    rd_kafka_event_destroy(ev);
  };
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  bool closed = false;
  if (rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk, queue)) {
    rd_kafka_error_destroy(error);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!(closed = rd_kafka_consumer_closed(rk)) && std::chrono::steady_clock::now() < deadline) {
      if (rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 100)) serve(ev);
    }
  }
  while (rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, 0)) serve(ev);
  rd_kafka_queue_destroy(queue);
  if (closed) {
    impl_->rk.reset();
  } else {
    // Past the deadline: no clean leave (the coordinator drops the member at its session
    // timeout). librdkafka still ends its group handling, bounded by its request timeouts.
    rd_kafka_destroy_flags(impl_->rk.release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }
  return closed;
}

TxnResult<void> TxnProducer::SendOffsets(const std::vector<TopicPartition>& offsets,
                                         GroupConsumer& consumer, milliseconds timeout) {
  PartitionList list = ToList(offsets);
  rd_kafka_consumer_group_metadata_t* cgmd = rd_kafka_consumer_group_metadata(consumer.impl_->rk.get());
  auto r = Check(rd_kafka_send_offsets_to_transaction(impl_->rk.get(), list.get(), cgmd,
                                                      static_cast<int>(timeout.count())));
  rd_kafka_consumer_group_metadata_destroy(cgmd);
  return r;
}

// --- PartitionReader ----------------------------------------------------------------------------

struct PartitionReader::Impl {
  KafkaHandle rk;
};

PartitionReader::PartitionReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PartitionReader::~PartitionReader() {
  if (impl_->rk) rd_kafka_consumer_close(impl_->rk.get());
}

Result<std::unique_ptr<PartitionReader>> PartitionReader::Create(const Properties& props) {
  Properties p = props;
  p.emplace("enable.auto.commit", "false");
  p.emplace("enable.auto.offset.store", "false");
  p.emplace("isolation.level", "read_committed");
  p.emplace("auto.offset.reset", "earliest");
  p.emplace("enable.partition.eof", "true");
  p.emplace("fetch.wait.max.ms", "10");
  p.emplace("socket.nagle.disable", "true");
  p.emplace("group.id", "kleaf-reader-unused");  // never joins: assign() only, no commits
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p);
  if (!rk) return std::unexpected(rk.error());
  auto impl = std::make_unique<Impl>();
  impl->rk = std::move(*rk);
  rd_kafka_poll_set_consumer(impl->rk.get());
  return std::unique_ptr<PartitionReader>(new PartitionReader(std::move(impl)));
}

Result<void> PartitionReader::Assign(const std::vector<TopicPartition>& partitions) {
  PartitionList list = ToList(partitions);
  if (auto err = rd_kafka_assign(impl_->rk.get(), list.get()); err) return std::unexpected(KafkaError(err, "assign"));
  return {};
}

std::optional<Message> PartitionReader::Poll(milliseconds timeout) {
  rd_kafka_message_t* m = rd_kafka_consumer_poll(impl_->rk.get(), static_cast<int>(timeout.count()));
  if (m == nullptr) return std::nullopt;
  std::optional<Message> out;
  if (!m->err) out = ToMessage(m);
  rd_kafka_message_destroy(m);
  return out;
}

Result<std::pair<int64_t, int64_t>> PartitionReader::Watermarks(const std::string& topic, int32_t partition,
                                                                milliseconds timeout) {
  int64_t low = 0, high = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    // In slices of 2 s at most: with the broker stopped (connections refused) librdkafka 2.8 can
    // overrun the timeout it is given by a good part of it (10 s asked, 14 s taken), so the
    // overrun of one slice is all the deadline can be late by.
    auto err = rd_kafka_query_watermark_offsets(
        impl_->rk.get(), topic.c_str(), partition, &low, &high,
        static_cast<int>(std::clamp<int64_t>(left.count(), 1, 2000)));
    if (!err) return std::make_pair(low, high);
    // Right after a topic is created or while leadership moves, brokers answer "not leader" or
    // "unknown partition" for a moment: ask again until the deadline.
    const bool transient = err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
                           err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                           err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                           err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
                           err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                           err == RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE;
    if (!transient || std::chrono::steady_clock::now() + milliseconds(200) > deadline) {
      return std::unexpected(KafkaError(err, "watermarks of " + topic + "/" + std::to_string(partition)));
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

Result<int64_t> PartitionReader::ReadToEnd(const std::string& topic, int32_t partition, int64_t from,
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
    rd_kafka_message_t* m = rd_kafka_consumer_poll(impl_->rk.get(), 100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      position = std::max(position, m->offset);
    } else if (m->err) {
      std::string msg = rd_kafka_message_errstr(m);
      rd_kafka_message_destroy(m);
      return Fail(Code::kUnavailable, "reading " + topic + ": " + msg);
    } else {
      fn(ToMessage(m));
      position = m->offset + 1;
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_assign(impl_->rk.get(), nullptr);
  return position;
}

}  // namespace kleaf::kafka
