#include "kafka/group_consumer.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "kafka/internal.h"
#include "kafka/topics.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

namespace {
using Key = std::pair<std::string, int32_t>;

// Resumes the partitions the application paused (all, or those of `only`) before they are given
// up: a pause outlives the assignment in librdkafka.
void ResumePaused(rd_kafka_t* rk, GroupConsumer::Impl& impl,
                  const std::vector<TopicPartition>* only = nullptr) {
  std::vector<TopicPartition> resume;
  for (const auto& [topic, partition] : impl.paused) {
    const bool wanted = only == nullptr || std::ranges::any_of(*only, [&](const TopicPartition& p) {
                          return p.topic == topic && p.partition == partition;
                        });
    if (wanted) resume.push_back({topic, partition, 0});
  }
  if (resume.empty()) return;
  rd_kafka_resume_partitions(rk, ToList(resume).get());
  for (const auto& p : resume) impl.paused.erase({p.topic, p.partition});
}

// Gives up every partition: lifts the application's pauses first (a pause outlives the
// assignment in librdkafka), while the partitions are still ours.
void UnassignAll(rd_kafka_t* rk, GroupConsumer::Impl& impl) {
  ResumePaused(rk, impl);
  rd_kafka_assign(rk, nullptr);
  impl.owned.clear();
  impl.started.clear();
}

// librdkafka's incremental assignment calls (the only ones it takes from a group that hands
// partitions over incrementally). An error is a bug of this file's bookkeeping, not Kafka's.
Result<void> IncrementalAssign(rd_kafka_t* rk, const std::vector<TopicPartition>& parts, bool add) {
  PartitionList list = ToList(parts);
  ErrorHandle error(add ? rd_kafka_incremental_assign(rk, list.get())
                        : rd_kafka_incremental_unassign(rk, list.get()));
  if (error) {
    return Fail(Code::kInternal,
                std::string(add ? "incremental assign: " : "incremental unassign: ") +
                    rd_kafka_error_string(error.get()));
  }
  return {};
}

// Start::kCommitted: each partition of `parts` starts at the group's committed offset.
void StartAtCommitted(rd_kafka_topic_partition_list_t* parts) {
  // INVALID: librdkafka fetches the group's committed offset first.
  for (int i = 0; i < parts->cnt; ++i) parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
}

// Start::kSought, eagerly (the classic protocol): assigns to librdkafka the partitions being
// fetched, each from where its last message polled left it (or where it was last started, when
// none was polled since), and `moved`, if any, from its own offset: the whole assignment is
// replaced. Absolute positions only: no lookup that could answer late stands between any of them
// and its fetch.
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

// An absolute seek of partitions librdkafka fetches already. Code::kFailedPrecondition while a
// partition's fetch is not running (librdkafka starts an added partition once commits and stops
// in flight are done).
Result<void> SeekFetched(rd_kafka_t* rk, const std::vector<TopicPartition>& positions,
                         milliseconds timeout) {
  PartitionList list = ToList(positions);
  ErrorHandle error(rd_kafka_seek_partitions(rk, list.get(), static_cast<int>(timeout.count())));
  if (error)
    return Fail(Code::kUnavailable, std::string("seek: ") + rd_kafka_error_string(error.get()));
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    if (e.err == RD_KAFKA_RESP_ERR__STATE || e.err == RD_KAFKA_RESP_ERR__PREV_IN_PROGRESS) {
      return Fail(Code::kFailedPrecondition,
                  "seek: partition " + std::to_string(e.partition) + " of " + e.topic +
                      " is assigned but not being fetched (" + rd_kafka_err2str(e.err) + ")");
    }
    if (e.err) return std::unexpected(KafkaError(e.err, "seek"));
  }
  return {};
}

// Start::kSought, incrementally (the consumer protocol): starts `position`'s partition there if
// it is not fetched yet (an incremental assign of it alone), else seeks it (absolute). Never an
// unassign outside the rebalance callback: librdkafka would take it for the answer to a
// revocation still queued for Poll and acknowledge that revocation to the broker before this
// member has given the partition up.
Result<void> SeekIncremental(rd_kafka_t* rk, GroupConsumer::Impl& impl,
                             const TopicPartition& position, milliseconds timeout) {
  const Key key{position.topic, position.partition};
  if (impl.started.contains(key)) {
    if (auto r = SeekFetched(rk, {position}, timeout); !r) return r;
  } else {
    // An assign outside the callback can only answer a queued assignment (adding partitions
    // the group gave this member already): harmless.
    if (auto r = IncrementalAssign(rk, {position}, /*add=*/true); !r) return r;
    if (impl.paused.contains(key)) rd_kafka_pause_partitions(rk, ToList({position}).get());
  }
  impl.started[key] = position.offset;
  return {};
}

// Eagerly (the classic protocol with an eager assignor): an assignment is the member's whole
// set, a revocation gives everything up. Incrementally (the consumer protocol, KIP-848): an
// assignment adds partitions, a revocation names the ones to give up, and the rest stay fetched.
void Rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
               void* opaque) {
  auto* impl = static_cast<GroupConsumer::Impl*>(opaque);
  impl->incremental = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
  GroupConsumer::Event e;
  e.partitions = FromList(parts);
  const bool sought = impl->start == GroupConsumer::Start::kSought;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    e.kind = GroupConsumer::Event::Kind::kAssigned;
    if (impl->incremental) {
      for (const auto& tp : e.partitions) {
        if (std::ranges::none_of(impl->owned, [&](const TopicPartition& o) {
              return o.topic == tp.topic && o.partition == tp.partition;
            })) {
          impl->owned.push_back(tp);
        }
      }
      if (sought) {
        // Taken (the member acknowledges them), nothing fetched until sought.
        (void)IncrementalAssign(rk, {}, /*add=*/true);
      } else {
        StartAtCommitted(parts);
        (void)IncrementalAssign(rk, FromList(parts), /*add=*/true);
      }
    } else if (sought) {
      // The group's assignment is taken (the rebalance completes), nothing is fetched yet.
      impl->owned = e.partitions;
      impl->started.clear();
      PartitionList none(rd_kafka_topic_partition_list_new(0));
      rd_kafka_assign(rk, none.get());
    } else {
      impl->owned = e.partitions;
      StartAtCommitted(parts);
      rd_kafka_assign(rk, parts);
    }
  } else {
    e.kind = GroupConsumer::Event::Kind::kRevoked;
    e.lost = rd_kafka_assignment_lost(rk) != 0;
    if (impl->incremental) {
      ResumePaused(rk, *impl, &e.partitions);
      std::vector<TopicPartition> fetched = e.partitions;
      if (sought) {
        std::erase_if(fetched, [&](const TopicPartition& tp) {
          return !impl->started.contains({tp.topic, tp.partition});
        });
      }
      for (const auto& tp : e.partitions) {
        impl->started.erase({tp.topic, tp.partition});
        std::erase_if(impl->owned, [&](const TopicPartition& o) {
          return o.topic == tp.topic && o.partition == tp.partition;
        });
      }
      (void)IncrementalAssign(rk, fetched, /*add=*/false);
    } else {
      UnassignAll(rk, *impl);
    }
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

namespace {
// Properties that only the classic protocol reads: under group.protocol=consumer the broker
// decides the session, the heartbeat and the assignment, and librdkafka refuses them.
constexpr std::string_view kClassicOnly[] = {"session.timeout.ms", "heartbeat.interval.ms",
                                             "partition.assignment.strategy",
                                             "group.protocol.type"};

// How long group.protocol "auto" asks the brokers which protocols they offer.
constexpr milliseconds kProbeTimeout{10000};

// The properties of a connection to the brokers, without the consumer's own (an admin handle
// would warn about each).
Properties ConnectionProperties(const Properties& props) {
  static constexpr std::string_view kPrefixes[] = {
      "bootstrap.", "security.", "sasl.",        "ssl.",        "ssl_", "socket.",
      "broker.",    "client.",   "connections.", "enable.ssl.", "debug"};
  Properties out;
  for (const auto& [key, value] : props) {
    if (std::ranges::any_of(kPrefixes, [&](std::string_view p) { return key.starts_with(p); }))
      out.emplace(key, value);
  }
  return out;
}

// Opens impl's handle under `protocol` ("classic" or "consumer") and subscribes it.
Result<void> Open(GroupConsumer::Impl& impl, const std::string& protocol) {
  Properties p = impl.props;
  p["group.protocol"] = protocol;
  if (protocol == "consumer") {
    for (const auto key : kClassicOnly) p.erase(std::string(key));
  } else {
    // An eager assignor: Poll hands whole assignments and revocations to the owner. roundrobin
    // spreads the partitions of one topic evenly (librdkafka 2.0.2's sticky assignor also had
    // ownership bugs).
    p.emplace("partition.assignment.strategy", "roundrobin");
  }
  impl.consumer_protocol = protocol == "consumer";
  impl.incremental = false;
  GroupConsumer::Impl* raw = &impl;
  auto rk = NewHandle(RD_KAFKA_CONSUMER, p, [raw](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_rebalance_cb(conf, Rebalance);
    rd_kafka_conf_set_opaque(conf, raw);
    if (raw->log) rd_kafka_conf_set_log_cb(conf, Log);
  });
  if (!rk) return std::unexpected(rk.error());
  impl.rk = std::shared_ptr<rd_kafka_t>(rk->release(), DestroyWithoutConsumerClose);
  rd_kafka_poll_set_consumer(impl.rk.get());
  {
    std::lock_guard lock(impl.wake_mu);
    impl.wake_queue = QueueHandle(rd_kafka_queue_get_consumer(impl.rk.get()));
  }
  PartitionList list(rd_kafka_topic_partition_list_new(static_cast<int>(impl.topics.size())));
  for (const auto& t : impl.topics)
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(impl.rk.get(), list.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(err, "subscribe"));
  }
  return {};
}
}  // namespace

Result<std::unique_ptr<GroupConsumer>> GroupConsumer::Create(const Properties& props,
                                                             const std::vector<std::string>& topics,
                                                             LogSink log, Start start) {
  Properties p = props;
  p.emplace("enable.auto.commit", "false");
  p.emplace("isolation.level", "read_committed");
  p.emplace("auto.offset.reset", "earliest");
  p.emplace("fetch.wait.max.ms", "10");
  p.emplace("socket.nagle.disable", "true");
  std::string protocol = "classic";
  if (auto it = p.find("group.protocol"); it != p.end()) {
    protocol = it->second;
    p.erase(it);
  }
  if (protocol != "classic" && protocol != "consumer" && protocol != "auto") {
    return Fail(Code::kInvalidArgument,
                "group.protocol: \"" + protocol + "\" is not classic, consumer or auto");
  }
  auto impl = std::make_unique<Impl>();
  impl->log = std::move(log);
  impl->start = start;
  impl->props = std::move(p);
  impl->topics = topics;
  impl->auto_protocol = protocol == "auto";
  std::optional<Event> said;
  if (impl->auto_protocol) {
    // The consumer protocol only where every broker offers it: a coordinator without it is a
    // dead coordinator to librdkafka, asked again and again, and the member never joins.
    auto offered = ConsumerGroupProtocolSupport(ConnectionProperties(impl->props), kProbeTimeout);
    if (!offered || !offered->every_broker) {
      protocol = "classic";
      impl->auto_protocol = false;
      if (!offered) {
        said.emplace();
        said->kind = Event::Kind::kError;
        said->error = "group.protocol auto: " + offered.error().message +
                      "; this member runs the classic protocol";
      }
    }
  }
  if (auto r = Open(*impl, protocol == "classic" ? "classic" : "consumer"); !r)
    return std::unexpected(r.error());
  if (said) impl->pending.push_back(std::move(*said));
  return std::unique_ptr<GroupConsumer>(new GroupConsumer(std::move(impl)));
}

std::string GroupConsumer::Protocol() const {
  return impl_->consumer_protocol ? "consumer" : "classic";
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

void GroupConsumer::Wake() {
  std::lock_guard lock(impl_->wake_mu);
  if (impl_->wake_queue) rd_kafka_queue_yield(impl_->wake_queue.get());
}

GroupConsumer::Event GroupConsumer::Poll(milliseconds timeout) {
  if (auto recovered = RecoverIfFatal(); recovered.kind != Event::Kind::kNone) return recovered;
  if (!impl_->rk) return {};
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

namespace {
// Before a handle is destroyed: Wake no longer reaches its queue.
void DropWakeQueue(GroupConsumer::Impl& impl) {
  std::lock_guard lock(impl.wake_mu);
  impl.wake_queue = QueueHandle();
}
}  // namespace

GroupConsumer::Event GroupConsumer::RecoverIfFatal() {
  Event e;
  if (!impl_->rk) {
    // The last reopening failed: again, at most once a second.
    if (std::chrono::steady_clock::now() < impl_->next_reopen) return e;
    impl_->next_reopen = std::chrono::steady_clock::now() + milliseconds(1000);
    if (auto r = Open(*impl_, impl_->consumer_protocol ? "consumer" : "classic"); !r) {
      e.kind = Event::Kind::kError;
      e.error = "group consumer: opening it again failed: " + r.error().message;
      return e;
    }
    CountRecovery("group_consumer", "rebuilt");
    return e;
  }
  char why[512] = "";
  const auto fatal = rd_kafka_fatal_error(impl_->rk.get(), why, sizeof(why));
  if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) return e;
  // A fatal error ends the handle: librdkafka has dropped the assignment without a rebalance
  // event. The broker (the group coordinator) refusing the consumer protocol is one (no
  // ConsumerGroupHeartbeat version it takes: a cluster whose group.version feature is not
  // finalized yet): "auto" runs the classic protocol from then on.
  const bool refused = fatal == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION ||
                       fatal == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE;
  const bool fall_back = impl_->auto_protocol && impl_->consumer_protocol && refused;
  std::vector<TopicPartition> held = std::move(impl_->owned);
  impl_->owned.clear();
  impl_->started.clear();
  impl_->paused.clear();
  // Destroyed once no PendingCommit holds a queue of it any more (Impl::rk).
  rd_kafka_unsubscribe(impl_->rk.get());
  DropWakeQueue(*impl_);
  impl_->rk.reset();
  if (fall_back) impl_->auto_protocol = false;  // classic for the rest of the handle's life
  const bool consumer = impl_->consumer_protocol && !fall_back;
  e.kind = Event::Kind::kError;
  e.error = fall_back ? std::string(
                            "group.protocol auto: the brokers refuse the consumer group "
                            "protocol (") +
                            why + "); this member runs the classic protocol"
                      : std::string("group consumer: fatal error (") + why +
                            "); the member joins again with a new handle";
  // Whatever was held is gone: said after the events already queued, before any of the new
  // handle's.
  if (!held.empty()) {
    Event revoked;
    revoked.kind = Event::Kind::kRevoked;
    revoked.lost = true;
    revoked.partitions = std::move(held);
    impl_->pending.push_back(std::move(revoked));
  }
  impl_->next_reopen = std::chrono::steady_clock::now() + milliseconds(1000);
  if (auto r = Open(*impl_, consumer ? "consumer" : "classic"); !r) {
    impl_->consumer_protocol = consumer;  // what the next attempt opens
    e.error += ", but opening it failed: " + r.error().message + " (tried again every second)";
    return e;
  }
  CountRecovery("group_consumer", fall_back ? "classic_fallback" : "rebuilt");
  return e;
}

Result<std::vector<TopicPartition>> GroupConsumer::Committed(
    const std::vector<TopicPartition>& partitions, milliseconds timeout) {
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
  return CommittedOffsets(impl_->rk.get(), partitions, timeout);
}

Result<void> GroupConsumer::Seek(const TopicPartition& position, milliseconds timeout) {
  auto sought = SeekNow(position, timeout);
  if (sought) {
    // A message of the partition held back behind a rebalance event (Poll) was fetched before the
    // seek: librdkafka drops the ones it still holds, this drops ours, so that the next message of
    // the partition is the one at the new position.
    std::erase_if(impl_->pending, [&](const Event& e) {
      return e.kind == Event::Kind::kMessage && e.message.topic == position.topic &&
             e.message.partition == position.partition;
    });
  }
  return sought;
}

Result<void> GroupConsumer::SeekNow(const TopicPartition& position, milliseconds timeout) {
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
  if (impl_->start == Start::kSought) {
    const bool owned = std::ranges::any_of(impl_->owned, [&](const TopicPartition& tp) {
      return tp.topic == position.topic && tp.partition == position.partition;
    });
    if (!owned) {
      return Fail(Code::kFailedPrecondition,
                  "seek: partition " + std::to_string(position.partition) + " of " +
                      position.topic + " is not assigned to this member");
    }
    if (impl_->incremental) return SeekIncremental(impl_->rk.get(), *impl_, position, timeout);
    if (auto r = AssignStarted(impl_->rk.get(), *impl_, position); !r)
      return Fail(Code::kUnavailable, "seek: " + r.error().message);
    return {};
  }
  return SeekFetched(impl_->rk.get(), {position}, timeout);
}

Result<void> GroupConsumer::Restart() {
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
  rd_kafka_topic_partition_list_t* raw = nullptr;
  if (auto err = rd_kafka_assignment(impl_->rk.get(), &raw); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "assignment"));
  PartitionList list(raw);
  if (list->cnt == 0) return {};
  if (impl_->incremental) {
    // An unassign outside the rebalance callback would acknowledge a revocation still queued
    // (SeekIncremental): not under the consumer protocol.
    return Fail(Code::kFailedPrecondition,
                "restart: not under the consumer group protocol (it would answer a queued "
                "revocation)");
  }
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
  std::shared_ptr<rd_kafka_t> rk;  // the handle the queue belongs to: outlives it
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
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
  PartitionList list = ToList(offsets);
  auto queue = std::make_unique<PendingCommit::Queue>(
      PendingCommit::Queue{impl_->rk, QueueHandle(rd_kafka_queue_new(impl_->rk.get()))});
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
  if (!impl_->rk) return {};
  rd_kafka_topic_partition_list_t* list = nullptr;
  if (rd_kafka_assignment(impl_->rk.get(), &list) != RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  PartitionList owned(list);
  return FromList(list);
}

Result<void> GroupConsumer::Pause(const std::vector<TopicPartition>& partitions) {
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
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
  if (!impl_->rk) return Fail(Code::kUnavailable, "group consumer: no handle (being opened again)");
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
  // Destroyed without a consumer close (Impl::rk): past the deadline there is no clean leave
  // (the coordinator drops the member at its session timeout), and librdkafka still ends its
  // group handling, bounded by its request timeouts.
  DropWakeQueue(*impl_);
  impl_->rk.reset();
  return closed;
}

}  // namespace kleaf::kafka
