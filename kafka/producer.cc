#include "kafka/producer.h"

#include <atomic>
#include <thread>

#include "base/mutex.h"
#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

struct Producer::Impl {
  Properties props;
  Producer::Rebuilt rebuilt;
  // Send and Flush use the handle under a shared lock; the poller thread replaces it under an
  // exclusive one after a fatal error.
  SharedMutex mu;
  KafkaHandle rk KLEAF_GUARDED_BY(mu);
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

[[nodiscard]] Result<KafkaHandle> NewIdempotentProducer(const Properties& props) {
  return NewHandle(RD_KAFKA_PRODUCER, props, [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, ProducerDelivered);
  });
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
      ReaderMutexLock lock(impl.mu);
      rd_kafka_poll(impl.rk.get(), 50);
      fatal = rd_kafka_fatal_error(impl.rk.get(), errstr, sizeof(errstr));
    }
    if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    auto fresh = NewIdempotentProducer(impl.props);
    if (!fresh) continue;  // the same properties made the first handle: not expected
    KafkaHandle broken;
    {
      WriterMutexLock lock(impl.mu);
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
  {
    WriterMutexLock lock(impl->mu);  // uncontended: the poller starts below
    impl->rk = std::move(*rk);
  }
  Impl* raw = impl.get();
  impl->poller = std::thread([raw] { ServeProducer(*raw); });
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}

Producer::~Producer() {
  (void)Flush(
      milliseconds(2000));  // best effort: what is left is purged below, failing its callbacks
  impl_->stop.store(true);
  impl_->poller.join();
  ReaderMutexLock lock(impl_->mu);  // uncontended: the poller has ended
  PurgeAndServe(impl_->rk.get());
}

Result<void> Producer::Send(const std::string& topic, int32_t partition, std::string_view key,
                            const std::optional<std::string>& value,
                            const std::vector<Header>& headers, Delivered delivered) {
  auto* cb = delivered ? new Delivered(std::move(delivered)) : nullptr;
  ReaderMutexLock lock(impl_->mu);
  rd_kafka_resp_err_t err = ProduceOne(impl_->rk.get(), topic, partition, key, value, headers, cb);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    delete cb;
    return std::unexpected(KafkaError(err, "producing to " + topic));
  }
  return {};
}

Result<void> Producer::Prepare(const std::string& topic, milliseconds timeout) {
  ReaderMutexLock lock(impl_->mu);
  return PrepareTopic(impl_->rk.get(), topic, timeout);
}

Result<void> Producer::Flush(milliseconds timeout) {
  // In slices, so that a rebuild is never held up by a long flush.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    rd_kafka_resp_err_t err;
    {
      ReaderMutexLock lock(impl_->mu);
      err = rd_kafka_flush(impl_->rk.get(),
                           static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100)));
    }
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
    if (err != RD_KAFKA_RESP_ERR__TIMED_OUT || left.count() <= 0) {
      return std::unexpected(KafkaError(err, "flush"));
    }
  }
}

int64_t Producer::rebuilds() const { return impl_->rebuilds.load(); }

void Producer::InjectFatalErrorForTesting() {
  ReaderMutexLock lock(impl_->mu);
  rd_kafka_test_fatal_error(impl_->rk.get(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                            "injected by a test");
}

}  // namespace kleaf::kafka
