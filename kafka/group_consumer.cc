#include "kafka/group_consumer.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

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

// Gives up every partition: lifts the application's pauses first (a pause outlives the
// assignment in librdkafka), while the partitions are still ours.
void UnassignAll(rd_kafka_t* rk, GroupConsumer::Impl& impl) {
  ResumePaused(rk, impl);
  rd_kafka_assign(rk, nullptr);
  impl.owned.clear();
  impl.started.clear();
}

// Start::kCommitted: each partition of `parts` starts at the group's committed offset.
void StartAtCommitted(rd_kafka_topic_partition_list_t* parts) {
  // INVALID: librdkafka fetches the group's committed offset first.
  for (int i = 0; i < parts->cnt; ++i) parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
}

// Start::kSought: assigns to librdkafka the partitions being fetched, each from where its last
// message polled left it (or where it was last started, when none was polled since), and
// `moved`, if any, from its own offset. Absolute positions only: no lookup that could answer
// late stands between any of them and its fetch.
Result<void> AssignStarted(rd_kafka_t* rk, GroupConsumer::Impl& impl,
                           const std::optional<TopicPartition>& moved) {
  auto positions = impl.started;
  if (!positions.empty()) {
    std::vector<TopicPartition> polled;
    for (const auto& [key, at] : positions) polled.push_back({key.first, key.second, at});
    PartitionList list = ToList(polled);
    if (rd_kafka_position(rk, list.get()) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (int i = 0; i < list->cnt; ++i) {
        const auto& e = list->elems[i];
        if (e.err == RD_KAFKA_RESP_ERR_NO_ERROR && e.offset >= 0)
          positions[{e.topic, e.partition}] = e.offset;
      }
    }
  }
  if (moved) positions[{moved->topic, moved->partition}] = moved->offset;
  std::vector<TopicPartition> assignment;
  for (const auto& [key, at] : positions) assignment.push_back({key.first, key.second, at});
  PartitionList list = ToList(assignment);
  if (auto err = rd_kafka_assign(rk, list.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "assign"));
  // A pause asked for before the partition was first fetched found no partition to hold in
  // librdkafka (it skips it): hold it now. Pausing a held partition again changes nothing.
  std::vector<TopicPartition> paused;
  for (const auto& [key, at] : positions) {
    if (impl.paused.contains(key)) paused.push_back({key.first, key.second, at});
  }
  if (!paused.empty()) rd_kafka_pause_partitions(rk, ToList(paused).get());
  impl.started = std::move(positions);
  return {};
}

void Rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
               void* opaque) {
  auto* impl = static_cast<GroupConsumer::Impl*>(opaque);
  GroupConsumer::Event e;
  e.partitions = FromList(parts);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (impl->start == GroupConsumer::Start::kSought) {
      // The group's assignment is taken (the rebalance completes), nothing is fetched yet.
      impl->owned = e.partitions;
      impl->started.clear();
      PartitionList none(rd_kafka_topic_partition_list_new(0));
      rd_kafka_assign(rk, none.get());
    } else {
      StartAtCommitted(parts);
      rd_kafka_assign(rk, parts);
    }
    e.kind = GroupConsumer::Event::Kind::kAssigned;
  } else {
    UnassignAll(rk, *impl);
    e.kind = GroupConsumer::Event::Kind::kRevoked;
  }
  impl->pending.push_back(std::move(e));
}

// The consumer's own sink; the opaque is set before rd_kafka_new, so lines logged while the
// handle is created reach it too.
void Log(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  const auto* impl = static_cast<const GroupConsumer::Impl*>(rd_kafka_opaque(rk));
  impl->log(LevelFromSyslog(level), rd_kafka_name(rk), facility, message);
}
}  // namespace

GroupConsumer::GroupConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GroupConsumer::~GroupConsumer() { Close(); }

Result<std::unique_ptr<GroupConsumer>> GroupConsumer::Create(const Properties& props,
                                                             const std::vector<std::string>& topics,
                                                             LogSink log, Start start) {
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
  impl->log = std::move(log);
  impl->start = start;
  Impl* raw = impl.get();
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p, [raw](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_rebalance_cb(conf, Rebalance);
    rd_kafka_conf_set_opaque(conf, raw);
    if (raw->log) rd_kafka_conf_set_log_cb(conf, Log);
  });
  if (!rk) return std::unexpected(rk.error());
  impl->rk = std::move(*rk);
  rd_kafka_poll_set_consumer(impl->rk.get());
  PartitionList list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const auto& t : topics)
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(impl->rk.get(), list.get());
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(err, "subscribe"));
  }
  return std::unique_ptr<GroupConsumer>(new GroupConsumer(std::move(impl)));
}

namespace {
// How often Poll looks whether a member holding no partition still has a broker.
constexpr milliseconds kBrokerCheckInterval{5000};

// A member left without any broker (internal.h, RestoreBootstrapIfNoBroker) never finds its
// group coordinator again, so it never rejoins: while it holds no partition, which is where it
// ends once its session expired, Poll looks every kBrokerCheckInterval.
void RestoreBrokersIfNone(GroupConsumer::Impl& impl) {
  const auto now = std::chrono::steady_clock::now();
  if (now < impl.next_broker_check) return;
  impl.next_broker_check = now + kBrokerCheckInterval;
  if (!impl.owned.empty()) return;
  rd_kafka_topic_partition_list_t* raw = nullptr;
  if (rd_kafka_assignment(impl.rk.get(), &raw) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  PartitionList assigned(raw);
  if (assigned->cnt > 0) return;
  if (RestoreBootstrapIfNoBroker(impl.rk.get(), milliseconds(0))) {
    CountRecovery("group_consumer", "bootstrap_restored");
  }
}
}  // namespace

GroupConsumer::Event GroupConsumer::Poll(milliseconds timeout) {
  RestoreBrokersIfNone(*impl_);
  if (impl_->pending.empty()) {
    MessageHandle m(rd_kafka_consumer_poll(impl_->rk.get(), static_cast<int>(timeout.count())));
    if (!impl_->pending.empty()) {
      // A rebalance happened during this poll: report it before the message.
      if (m) {
        Event msg;
        if (m->err) {
          msg.kind = Event::Kind::kError;
          msg.error = rd_kafka_message_errstr(m.get());
        } else {
          msg.kind = Event::Kind::kMessage;
          msg.message = ToMessage(m.get());
        }
        m.reset();
        impl_->pending.push_back(std::move(msg));
      }
    } else {
      Event e;
      if (!m) return e;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return e;
      if (m->err) {
        e.kind = Event::Kind::kError;
        e.error = rd_kafka_message_errstr(m.get());
      } else {
        e.kind = Event::Kind::kMessage;
        e.message = ToMessage(m.get());
      }
      return e;
    }
  }
  Event e = std::move(impl_->pending.front());
  impl_->pending.erase(impl_->pending.begin());
  return e;
}

Result<std::vector<TopicPartition>> GroupConsumer::Committed(
    const std::vector<TopicPartition>& partitions, milliseconds timeout) {
  return CommittedOffsets(impl_->rk.get(), partitions, timeout);
}

Result<void> GroupConsumer::Seek(const TopicPartition& position, milliseconds timeout) {
  if (impl_->start == Start::kSought) {
    const bool owned = std::ranges::any_of(impl_->owned, [&](const TopicPartition& tp) {
      return tp.topic == position.topic && tp.partition == position.partition;
    });
    if (!owned) {
      return Fail(Code::kFailedPrecondition,
                  "seek: partition " + std::to_string(position.partition) + " of " +
                      position.topic + " is not assigned to this member");
    }
    if (auto r = AssignStarted(impl_->rk.get(), *impl_, position); !r)
      return Fail(Code::kUnavailable, "seek: " + r.error().message);
    return {};
  }
  PartitionList list = ToList({position});
  ErrorHandle error(
      rd_kafka_seek_partitions(impl_->rk.get(), list.get(), static_cast<int>(timeout.count())));
  if (error)
    return Fail(Code::kUnavailable, std::string("seek: ") + rd_kafka_error_string(error.get()));
  if (const auto err = list->elems[0].err;
      err == RD_KAFKA_RESP_ERR__STATE || err == RD_KAFKA_RESP_ERR__PREV_IN_PROGRESS) {
    return Fail(Code::kFailedPrecondition,
                "seek: partition " + std::to_string(position.partition) + " of " + position.topic +
                    " is assigned but not being fetched (" + rd_kafka_err2str(err) + ")");
  }
  if (list->elems[0].err) return std::unexpected(KafkaError(list->elems[0].err, "seek"));
  return {};
}

Result<void> GroupConsumer::Restart() {
  rd_kafka_topic_partition_list_t* raw = nullptr;
  if (auto err = rd_kafka_assignment(impl_->rk.get(), &raw); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "assignment"));
  PartitionList list(raw);
  if (list->cnt == 0) return {};
  ResumePaused(impl_->rk.get(), *impl_);  // a pause would outlive the new assignment
  if (impl_->start == Start::kSought) {
    if (auto r = AssignStarted(impl_->rk.get(), *impl_, std::nullopt); !r)
      return std::unexpected(r.error());
    CountRecovery("group_consumer", "restarted");
    return {};
  }
  StartAtCommitted(list.get());
  if (auto err = rd_kafka_assign(impl_->rk.get(), list.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "assign"));
  CountRecovery("group_consumer", "restarted");
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

struct GroupConsumer::PendingCommit::Queue {
  QueueHandle handle;
};

GroupConsumer::PendingCommit::PendingCommit(std::unique_ptr<Queue> queue)
    : queue_(std::move(queue)) {}
GroupConsumer::PendingCommit::~PendingCommit() = default;

std::optional<GroupConsumer::PendingCommit::Outcome> GroupConsumer::PendingCommit::Wait(
    milliseconds timeout) {
  rd_kafka_queue_t* queue = queue_->handle.get();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    EventHandle ev(
        rd_kafka_queue_poll(queue, static_cast<int>(std::max<int64_t>(left.count(), 0))));
    if (!ev) {
      if (left.count() <= 0) return std::nullopt;
      continue;
    }
    if (rd_kafka_event_type(ev.get()) != RD_KAFKA_EVENT_OFFSET_COMMIT) continue;
    Outcome out;
    out.committed = true;
    auto fail = [&](rd_kafka_resp_err_t e) {
      out.committed = false;
      out.may_land = out.may_land || MayLand(e);
      if (out.error.empty()) out.error = KafkaError(e, "commit").message;
    };
    if (auto e = rd_kafka_event_error(ev.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR) fail(e);
    if (const auto* parts = rd_kafka_event_topic_partition_list(ev.get())) {
      for (int i = 0; i < parts->cnt; ++i) {
        if (parts->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) fail(parts->elems[i].err);
      }
    }
    return out;
  }
}

Result<std::unique_ptr<GroupConsumer::PendingCommit>> GroupConsumer::StartCommit(
    const std::vector<TopicPartition>& offsets) {
  PartitionList list = ToList(offsets);
  auto queue =
      std::make_unique<PendingCommit::Queue>(QueueHandle(rd_kafka_queue_new(impl_->rk.get())));
  auto err =
      rd_kafka_commit_queue(impl_->rk.get(), list.get(), queue->handle.get(), nullptr, nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(KafkaError(err, "commit"));
  return std::unique_ptr<PendingCommit>(new PendingCommit(std::move(queue)));
}

Result<void> GroupConsumer::Commit(const std::vector<TopicPartition>& offsets,
                                   milliseconds timeout) {
  auto pending = StartCommit(offsets);
  if (!pending) return std::unexpected(pending.error());
  auto outcome = (*pending)->Wait(timeout);
  if (!outcome)
    return Fail(Code::kUnavailable,
                "commit: no outcome within " + std::to_string(timeout.count()) + " ms");
  if (!outcome->committed) return Fail(Code::kUnavailable, outcome->error);
  return {};
}

std::vector<TopicPartition> GroupConsumer::Assignment() {
  if (impl_->start == Start::kSought) return impl_->owned;
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
  if (auto err = rd_kafka_pause_partitions(impl_->rk.get(), list.get()); err)
    return std::unexpected(KafkaError(err, "pause"));
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
  if (auto err = rd_kafka_resume_partitions(impl_->rk.get(), list.get()); err)
    return std::unexpected(KafkaError(err, "resume"));
  for (const auto& p : held) impl_->paused.erase({p.topic, p.partition});
  return {};
}

bool GroupConsumer::Close(milliseconds timeout) {
  if (!impl_->rk) return true;
  rd_kafka_t* rk = impl_->rk.get();
  // Closing gives everything up: a rebalance event here is a revocation (an assignment that
  // crossed the close is given up as well). Every one must be served, or the close waits for it.
  auto serve = [&](EventHandle ev) {
    if (rd_kafka_event_type(ev.get()) == RD_KAFKA_EVENT_REBALANCE) {
      UnassignAll(rk, *impl_);
    }
  };
  QueueHandle queue(rd_kafka_queue_new(rk));
  bool closed = false;
  if (ErrorHandle error(rd_kafka_consumer_close_queue(rk, queue.get())); !error) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!(closed = rd_kafka_consumer_closed(rk)) &&
           std::chrono::steady_clock::now() < deadline) {
      if (EventHandle ev(rd_kafka_queue_poll(queue.get(), 100)); ev) serve(std::move(ev));
    }
  }
  while (EventHandle ev{rd_kafka_queue_poll(queue.get(), 0)}) serve(std::move(ev));
  queue.reset();
  if (closed) {
    impl_->rk.reset();
  } else {
    // Past the deadline: no clean leave (the coordinator drops the member at its session
    // timeout). librdkafka still ends its group handling, bounded by its request timeouts.
    AbandonedConsumer(impl_->rk.release()).reset();
  }
  return closed;
}

}  // namespace kleaf::kafka
