#include "kafka/txn_producer.h"

#include <algorithm>

#include "base/mutex.h"
#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

struct TxnProducer::Impl {
  KafkaHandle rk;
  Mutex mu;
  // Per (topic, partition), the offsets of the messages delivered since the last take, in delivery
  // order (librdkafka reports a partition's messages in the order they were produced).
  std::map<std::pair<std::string, int32_t>, std::vector<int64_t>> delivered KLEAF_GUARDED_BY(mu);
  int64_t delivered_in_transaction KLEAF_GUARDED_BY(mu) = 0;
};

namespace {
void TxnDelivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err) return;  // the transaction's commit reports the failure
  auto* impl = static_cast<TxnProducer::Impl*>(opaque);
  MutexLock lock(impl->mu);
  impl->delivered[{rd_kafka_topic_name(m->rkt), m->partition}].push_back(m->offset);
  ++impl->delivered_in_transaction;
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

Result<void> TxnProducer::Prepare(const std::string& topic, milliseconds timeout) {
  return PrepareTopic(impl_->rk.get(), topic, timeout);
}

TxnResult<void> TxnProducer::Begin() {
  // The reports of the transaction before were served by its Commit or Abort.
  {
    MutexLock lock(impl_->mu);
    impl_->delivered_in_transaction = 0;
  }
  return Check(rd_kafka_begin_transaction(impl_->rk.get()));
}

Result<void> TxnProducer::Send(const std::string& topic, int32_t partition, std::string_view key,
                               const std::optional<std::string>& value,
                               const std::vector<Header>& headers) {
  rd_kafka_resp_err_t err =
      ProduceOne(impl_->rk.get(), topic, partition, key, value, headers, nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "producing to " + topic));
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
  MutexLock lock(impl_->mu);
  impl_->delivered.clear();
  impl_->delivered_in_transaction = 0;
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
  std::map<std::pair<std::string, int32_t>, int64_t> highest;
  for (const auto& [partition, offsets] : TakeDelivered()) {
    highest[partition] = *std::max_element(offsets.begin(), offsets.end());
  }
  return highest;
}

int64_t TxnProducer::DeliveredInTransaction() {
  rd_kafka_poll(impl_->rk.get(), 0);
  MutexLock lock(impl_->mu);
  return impl_->delivered_in_transaction;
}

std::map<std::pair<std::string, int32_t>, std::vector<int64_t>> TxnProducer::TakeDelivered() {
  rd_kafka_poll(impl_->rk.get(), 0);
  MutexLock lock(impl_->mu);
  return std::exchange(impl_->delivered, {});
}

Result<void> TxnProducer::Flush(milliseconds timeout) {
  auto err = rd_kafka_flush(impl_->rk.get(), static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "flush"));
  return {};
}

TxnResult<void> TxnProducer::SendOffsets(const std::vector<TopicPartition>& offsets,
                                         GroupConsumer& consumer, milliseconds timeout) {
  PartitionList list = ToList(offsets);
  GroupMetadataHandle cgmd(rd_kafka_consumer_group_metadata(consumer.impl_->rk.get()));
  return Check(rd_kafka_send_offsets_to_transaction(impl_->rk.get(), list.get(), cgmd.get(),
                                                    static_cast<int>(timeout.count())));
}

}  // namespace kleaf::kafka
