#include "kafka/group_offsets.h"

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

struct GroupOffsets::Impl {
  KafkaHandle rk;
  std::string group;
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
  impl->group = group;
  rd_kafka_poll_set_consumer(impl->rk.get());
  return std::unique_ptr<GroupOffsets>(new GroupOffsets(std::move(impl)));
}

Result<std::vector<TopicPartition>> GroupOffsets::Committed(
    const std::vector<TopicPartition>& partitions, milliseconds timeout) {
  auto committed = CommittedOffsets(impl_->rk.get(), partitions, timeout);
  if (committed) return committed;
  // A refused coordinator lookup (no DESCRIBE on the group) ends as a plain timeout; the refusal
  // itself waits on the handle's queue.
  while (MessageHandle m{rd_kafka_consumer_poll(impl_->rk.get(), 0)}) {
    if (m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
      return Fail(Code::kFailedPrecondition, committed.error().message + ": " +
                                                 rd_kafka_message_errstr(m.get()) +
                                                 ": the Kafka principal needs DESCRIBE on group " +
                                                 impl_->group + " (" + kAclHint + ")");
    }
  }
  return committed;
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

}  // namespace kleaf::kafka
