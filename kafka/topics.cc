#include "kafka/topics.h"

#include <sasl/sasl.h>

#include <algorithm>
#include <chrono>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/mutex.h"
#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

// What is left until `deadline`, at least 1 ms.
milliseconds Left(TimePoint deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
}

// The first attempt of a call ends after this long without an answer, each later one after twice
// as long as the one before, all within the call's timeout. Long enough for a cluster under load
// to create topics; short enough that a call whose broker died while it waited tries again well
// within a node's 30 s setup timeout.
constexpr milliseconds kFirstAttempt{5000};
// Between attempts that failed at once (e.g. the connection to their broker was refused).
constexpr milliseconds kRetryPause{200};

// Why the brokers refused a client. librdkafka reports a failed SASL authentication or TLS
// handshake through the error callback (served by rd_kafka_poll) and then retries for ever, so a
// wait on an admin request's answer alone would only end at its deadline.
struct Refusal {
  Mutex mu;
  std::string reason KLEAF_GUARDED_BY(mu);  // empty: not refused
};

void OnClientError(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  if (err != RD_KAFKA_RESP_ERR__AUTHENTICATION && err != RD_KAFKA_RESP_ERR__SSL) return;
  auto* refusal = static_cast<Refusal*>(opaque);
  MutexLock lock(refusal->mu);
  if (refusal->reason.empty())
    refusal->reason =
        reason != nullptr ? reason : rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
}

// Why an attempt failed, and whether another attempt (with a new handle) may succeed.
struct Failure {
  Error error;
  bool again = false;
};
template <typename T>
using Attempt = std::expected<T, Failure>;

std::unexpected<Failure> Final(Error error) { return std::unexpected(Failure{std::move(error)}); }
std::unexpected<Failure> Again(Error error) {
  return std::unexpected(Failure{std::move(error), true});
}

std::string TimedOut(const std::string& what) { return what + " timed out (is Kafka reachable?)"; }

// Errors of a whole admin request after which a new attempt may be answered: the broker was lost,
// did not answer in time, or was not the controller a ZooKeeper-mode cluster wants.
bool Transient(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__DESTROY:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_CONTROLLER:
      return true;
    default:
      return false;
  }
}

// One admin request (CreateTopics, DescribeTopics, DescribeConfigs).
struct AdminCall {
  rd_kafka_admin_op_t op = RD_KAFKA_ADMIN_OP_ANY;
  std::string what;                // "describing topic t", for the errors
  bool operation_timeout = false;  // also the broker-side operation timeout (CreateTopics)
  // Where librdkafka sends it by itself (the controller it picks: CreateTopics on a ZooKeeper-mode
  // cluster, whose other brokers answer NOT_CONTROLLER; the broker a broker resource names)
  // instead of the broker that answered.
  bool to_controller = false;
  // Sends the request through the handle with the options, to be answered on the queue.
  std::function<void(rd_kafka_t*, rd_kafka_AdminOptions_t*, rd_kafka_queue_t*)> send;
};

// A short-lived handle for one call's admin requests, and the broker they go to.
//
// librdkafka sends DescribeTopics, DescribeConfigs and CreateTopics to the controller its last
// metadata answer named. A KRaft broker names a random broker it counts as alive, and it counts a
// broker that was just killed as alive until the broker's session with the controller expires
// (broker.session.timeout.ms, 9 s by default). A handle told so waits for a connection to a dead
// broker until the request times out: nothing makes librdkafka ask for metadata again (it does
// only when a broker it was connected to goes down, or every 5 minutes). So the requests go to the
// broker that answered this handle's own metadata request, which every KRaft broker serves
// (CreateTopics is forwarded to the active controller).
class AdminClient {
 public:
  // A new handle, once a broker answered its metadata request (by `deadline`).
  static Attempt<std::unique_ptr<AdminClient>> Open(const Properties& props,
                                                    const std::string& what, TimePoint deadline);

  // How many brokers the cluster has: those the metadata answer listed.
  Attempt<int32_t> BrokerCount(const std::string& what, TimePoint deadline);
  // Their node ids.
  const std::vector<int32_t>& BrokerIds() const { return broker_ids_; }

  // Sends `call` and waits for its answer until `deadline`; an answer with a whole-request error
  // after which another attempt may succeed is a Failure with `again`.
  Attempt<EventHandle> Request(const AdminCall& call, TimePoint deadline);

 private:
  AdminClient() = default;
  // The refusal of the handle's error callback, if any.
  std::optional<Error> Refused(const std::string& what);

  Refusal refusal_;  // the handle's error callback writes it: declared before the handle
  KafkaHandle rk_;
  int32_t broker_ = -1;  // where requests go; -1: the controller librdkafka picks
  std::vector<int32_t> broker_ids_;  // as the metadata answer listed them
};

std::optional<Error> AdminClient::Refused(const std::string& what) {
  rd_kafka_poll(rk_.get(), 0);  // serves the error callback
  MutexLock lock(refusal_.mu);
  if (refusal_.reason.empty()) return std::nullopt;
  return Error{Code::kUnauthenticated,
               what + ": Kafka refused the connection: " + refusal_.reason +
                   " (check kafka.properties: security.protocol, sasl.mechanism, "
                   "sasl.username, sasl.password, ssl.ca.location)"};
}

Attempt<std::unique_ptr<AdminClient>> AdminClient::Open(const Properties& props,
                                                        const std::string& what,
                                                        TimePoint deadline) {
  std::unique_ptr<AdminClient> client(new AdminClient);
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props, [&client](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_opaque(conf, &client->refusal_);
    rd_kafka_conf_set_error_cb(conf, OnClientError);
  });
  if (!rk) return Final(rk.error());
  client->rk_ = std::move(*rk);
  // A metadata request for brokers only (no topic: none is created where brokers auto-create
  // topics), in short waits with a look for a refusal between them. The first answer may come
  // through the bootstrap connection, which librdkafka knows by its node id only from that answer
  // on: a second request then names the broker.
  milliseconds slice{250};
  for (int answers = 0;;) {
    const rd_kafka_metadata_t* raw = nullptr;
    const milliseconds wait = std::min(slice, Left(deadline));
    const rd_kafka_resp_err_t err =
        rd_kafka_metadata(client->rk_.get(), 0, nullptr, &raw, static_cast<int>(wait.count()));
    MetadataHandle metadata(raw);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR && metadata) {
      client->broker_ids_.clear();
      for (int i = 0; i < metadata->broker_cnt; ++i)
        client->broker_ids_.push_back(metadata->brokers[i].id);
      client->broker_ = metadata->orig_broker_id;
      if (client->broker_ >= 0 || ++answers == 2) return client;
      continue;
    }
    if (auto refused = client->Refused(what)) return Final(*refused);
    if (SteadyClock::now() >= deadline) return Again({Code::kUnavailable, TimedOut(what)});
    slice = std::min(slice * 2, milliseconds(2000));
  }
}

Attempt<EventHandle> AdminClient::Request(const AdminCall& call, TimePoint deadline) {
  QueueHandle queue(rd_kafka_queue_new(rk_.get()));
  AdminOptionsHandle options(rd_kafka_AdminOptions_new(rk_.get(), call.op));
  char errstr[512];
  const auto timeout_ms = static_cast<int>(Left(deadline).count());
  rd_kafka_AdminOptions_set_request_timeout(options.get(), timeout_ms, errstr, sizeof(errstr));
  if (call.operation_timeout) {
    rd_kafka_AdminOptions_set_operation_timeout(options.get(), timeout_ms, errstr, sizeof(errstr));
  }
  if (broker_ >= 0 && !call.to_controller) {
    rd_kafka_AdminOptions_set_broker(options.get(), broker_, errstr, sizeof(errstr));
  }
  call.send(rk_.get(), options.get(), queue.get());
  // Short waits, looking between them for a refusal. The request's own timeout ends it at the
  // deadline; the grace only covers handing that answer over.
  const TimePoint give_up = deadline + milliseconds(500);
  constexpr milliseconds kSlice{100};
  while (true) {
    EventHandle event(rd_kafka_queue_poll(
        queue.get(), static_cast<int>(std::min(kSlice, Left(give_up)).count())));
    if (event) {
      const rd_kafka_resp_err_t err = rd_kafka_event_error(event.get());
      if (Transient(err)) {
        return Again(
            {Code::kUnavailable, call.what + ": " + rd_kafka_event_error_string(event.get())});
      }
      return event;
    }
    if (auto refused = Refused(call.what)) return Final(*refused);
    if (SteadyClock::now() >= give_up) return Again({Code::kUnavailable, TimedOut(call.what)});
  }
}

// librdkafka 2.8 ended a timed wait early when the wall clock had moved forward past its deadline
// (or was faked for this process), so Open could return before the metadata answer and the
// brokers were counted by a DescribeCluster here. librdkafka 2.10 and later wait by the monotonic
// clock (tinycthread_extra.c cnd_timedwait_ms, commit 5b1efa4ab): the metadata answer counts them.
Attempt<int32_t> AdminClient::BrokerCount(const std::string&, TimePoint) {
  return static_cast<int32_t>(broker_ids_.size());
}

// Runs `attempt` on a new AdminClient until it succeeds, fails for good, or `deadline` passes:
// then the last attempt's error (kUnavailable "<what> timed out" when no broker answered).
template <typename T>
[[nodiscard]] Result<T> WithRetries(
    const Properties& props, const std::string& what, TimePoint deadline,
    const std::function<Attempt<T>(AdminClient&, TimePoint)>& attempt) {
  milliseconds bound = kFirstAttempt;
  while (true) {
    const TimePoint attempt_deadline = std::min(deadline, SteadyClock::now() + bound);
    bound *= 2;
    const TimePoint started = SteadyClock::now();
    Attempt<T> result = [&]() -> Attempt<T> {
      auto client = AdminClient::Open(props, what, attempt_deadline);
      if (!client) return std::unexpected(client.error());
      return attempt(**client, attempt_deadline);
    }();  // the handle is destroyed here, before another one is made
    if (result) {
      if constexpr (std::is_void_v<T>) {
        return {};
      } else {
        return std::move(*result);
      }
    }
    if (!result.error().again || SteadyClock::now() + kRetryPause >= deadline) {
      return std::unexpected(result.error().error);
    }
    if (SteadyClock::now() - started < kRetryPause) std::this_thread::sleep_for(kRetryPause);
  }
}

// librdkafka prints a Uuid in standard base64; Kafka's own tools print it URL-safe ('-' and '_'
// for '+' and '/'), which is what an operator compares with.
std::string KafkaUuidText(std::string text) {
  for (char& c : text) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return text;
}

// The fewest replicas of any of the partitions of `description`.
int32_t ReplicationFactor(const rd_kafka_TopicDescription_t* description) {
  size_t n = 0;
  const rd_kafka_TopicPartitionInfo_t** partitions =
      rd_kafka_TopicDescription_partitions(description, &n);
  int32_t fewest = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t replicas = 0;
    rd_kafka_TopicPartitionInfo_replicas(partitions[i], &replicas);
    if (i == 0 || static_cast<int32_t>(replicas) < fewest) fewest = static_cast<int32_t>(replicas);
  }
  return fewest;
}

// The topics of a DescribeTopics answer by name, each kNotFound when it does not exist.
Attempt<std::map<std::string, Result<TopicInfo>>> ReadTopicDescriptions(rd_kafka_event_t* event,
                                                                        const std::string& what) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Final(KafkaError(rd_kafka_event_error(event), what));
  }
  size_t n = 0;
  const rd_kafka_TopicDescription_t** descriptions =
      rd_kafka_DescribeTopics_result_topics(rd_kafka_event_DescribeTopics_result(event), &n);
  std::map<std::string, Result<TopicInfo>> out;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = rd_kafka_TopicDescription_name(descriptions[i]);
    if (const rd_kafka_error_t* error = rd_kafka_TopicDescription_error(descriptions[i]);
        error != nullptr && rd_kafka_error_code(error) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.emplace(name, std::unexpected(
                            KafkaError(rd_kafka_error_code(error), "describing topic " + name)));
      continue;
    }
    size_t partitions = 0;
    rd_kafka_TopicDescription_partitions(descriptions[i], &partitions);
    const rd_kafka_Uuid_t* id = rd_kafka_TopicDescription_topic_id(descriptions[i]);
    out.emplace(name,
                TopicInfo{.partitions = static_cast<int32_t>(partitions),
                          .id = id != nullptr ? KafkaUuidText(rd_kafka_Uuid_base64str(id)) : "",
                          .replication_factor = ReplicationFactor(descriptions[i])});
  }
  return out;
}

// The configs `names` of each topic of a DescribeConfigs answer, by topic: the value the broker
// reports (the topic's own, else the broker's default); a name it does not describe is left out.
Attempt<std::map<std::string, Result<std::map<std::string, std::string>>>> ReadTopicConfigs(
    rd_kafka_event_t* event, const std::vector<std::string>& names, const std::string& what) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Final(KafkaError(rd_kafka_event_error(event), what));
  }
  size_t n = 0;
  const rd_kafka_ConfigResource_t** described =
      rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(event), &n);
  std::map<std::string, Result<std::map<std::string, std::string>>> out;
  for (size_t r = 0; r < n; ++r) {
    const std::string topic = rd_kafka_ConfigResource_name(described[r]);
    if (rd_kafka_ConfigResource_error(described[r]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.emplace(topic, std::unexpected(KafkaError(rd_kafka_ConfigResource_error(described[r]),
                                                    "describing the configs of topic " + topic)));
      continue;
    }
    size_t count = 0;
    const rd_kafka_ConfigEntry_t** entries = rd_kafka_ConfigResource_configs(described[r], &count);
    std::map<std::string, std::string> configs;
    for (size_t i = 0; i < count; ++i) {
      const std::string name = rd_kafka_ConfigEntry_name(entries[i]);
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      const char* value = rd_kafka_ConfigEntry_value(entries[i]);
      configs[name] = value != nullptr ? value : "";
    }
    out.emplace(topic, std::move(configs));
  }
  return out;
}

// DescribeTopics of `topics` through `client`.
Attempt<std::map<std::string, Result<TopicInfo>>> DescribeTopicsWith(
    AdminClient& client, const std::vector<std::string>& topics, const std::string& what,
    TimePoint deadline) {
  std::vector<const char*> names;
  for (const auto& t : topics) names.push_back(t.c_str());
  TopicCollectionHandle collection(
      rd_kafka_TopicCollection_of_topic_names(names.data(), names.size()));
  auto event = client.Request({.op = RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
                               .what = what,
                               .send =
                                   [&collection](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
                                                 rd_kafka_queue_t* queue) {
                                     rd_kafka_DescribeTopics(rk, collection.get(), options, queue);
                                   }},
                              deadline);
  if (!event) return std::unexpected(event.error());
  return ReadTopicDescriptions(event->get(), what);
}

// DescribeConfigs of `topics` (one request) through `client`; of brokers (by node id) with
// RD_KAFKA_RESOURCE_BROKER.
Attempt<std::map<std::string, Result<std::map<std::string, std::string>>>> TopicConfigsWith(
    AdminClient& client, const std::vector<std::string>& topics,
    const std::vector<std::string>& names, const std::string& what, TimePoint deadline,
    rd_kafka_ResourceType_t type = RD_KAFKA_RESOURCE_TOPIC) {
  std::vector<ConfigResourceHandle> owned;
  std::vector<rd_kafka_ConfigResource_t*> resources;  // the array librdkafka reads
  for (const auto& t : topics) {
    owned.emplace_back(rd_kafka_ConfigResource_new(type, t.c_str()));
    resources.push_back(owned.back().get());
  }
  auto event = client.Request(
      {.op = RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS,
       .what = what,
       // A broker resource is described by that broker only (others refuse it): librdkafka sends
       // the request there unless a broker is set.
       .to_controller = type == RD_KAFKA_RESOURCE_BROKER,
       .send =
           [&resources](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
             rd_kafka_DescribeConfigs(rk, resources.data(), resources.size(), options, queue);
           }},
      deadline);
  owned.clear();
  if (!event) return std::unexpected(event.error());
  return ReadTopicConfigs(event->get(), names, what);
}

// The entry of `topic` in a per-topic answer: an answer that leaves it out is a failure.
template <typename T>
Attempt<T> EntryOf(std::map<std::string, Result<T>>& answer, const std::string& topic,
                   const std::string& what) {
  auto it = answer.find(topic);
  if (it == answer.end()) return Again({Code::kUnavailable, what + ": no answer for " + topic});
  if (!it->second) return Final(it->second.error());
  return std::move(*it->second);
}

}  // namespace

Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                milliseconds timeout) {
  const std::string what = "describing topic " + topic;
  return WithRetries<TopicInfo>(props, what, SteadyClock::now() + timeout,
                                [&](AdminClient& client, TimePoint deadline) -> Attempt<TopicInfo> {
                                  auto described =
                                      DescribeTopicsWith(client, {topic}, what, deadline);
                                  if (!described) return std::unexpected(described.error());
                                  return EntryOf(*described, topic, what);
                                });
}

Result<std::map<std::string, std::string>> TopicConfigs(const Properties& props,
                                                        const std::string& topic,
                                                        const std::vector<std::string>& names,
                                                        milliseconds timeout) {
  const std::string what = "describing the configs of topic " + topic;
  using Configs = std::map<std::string, std::string>;
  return WithRetries<Configs>(props, what, SteadyClock::now() + timeout,
                              [&](AdminClient& client, TimePoint deadline) -> Attempt<Configs> {
                                auto described =
                                    TopicConfigsWith(client, {topic}, names, what, deadline);
                                if (!described) return std::unexpected(described.error());
                                return EntryOf(*described, topic, what);
                              });
}

Result<ClusterDescription> DescribeCluster(const Properties& props,
                                           const std::vector<std::string>& topics,
                                           const std::vector<std::string>& config_names,
                                           milliseconds timeout) {
  const std::string what = "describing the cluster's topics";
  return WithRetries<ClusterDescription>(
      props, what, SteadyClock::now() + timeout,
      [&](AdminClient& client, TimePoint deadline) -> Attempt<ClusterDescription> {
        auto described = DescribeTopicsWith(client, topics, what, deadline);
        if (!described) return std::unexpected(described.error());
        auto brokers = client.BrokerCount(what, deadline);
        if (!brokers) return std::unexpected(brokers.error());
        ClusterDescription out{.brokers = *brokers, .topics = {}};
        std::vector<std::string> existing;
        for (const auto& t : topics) {
          auto it = described->find(t);
          if (it == described->end()) {
            return Again({Code::kUnavailable, what + ": no answer for " + t});
          }
          if (it->second) {
            out.topics.emplace(t, DescribedTopic{*it->second, {}});
            existing.push_back(t);
          } else {
            out.topics.emplace(t, std::unexpected(it->second.error()));
          }
        }
        if (existing.empty() || config_names.empty()) return out;
        auto configs = TopicConfigsWith(client, existing, config_names, what, deadline);
        if (!configs) return std::unexpected(configs.error());
        for (const auto& t : existing) {
          auto it = configs->find(t);
          if (it == configs->end()) {
            return Again({Code::kUnavailable, what + ": no configs for " + t});
          }
          if (it->second) {
            out.topics.at(t)->configs = std::move(*it->second);
          } else {
            out.topics.at(t) = std::unexpected(it->second.error());
          }
        }
        return out;
      });
}

Result<std::vector<GroupMember>> DescribeGroupMembers(const Properties& props,
                                                      const std::string& group,
                                                      milliseconds timeout) {
  const std::string what = "describing consumer group " + group;
  using Members = std::vector<GroupMember>;
  return WithRetries<Members>(
      props, what, SteadyClock::now() + timeout,
      [&](AdminClient& client, TimePoint deadline) -> Attempt<Members> {
        // To the group's coordinator, which librdkafka looks up itself.
        const AdminCall call{
            RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, what, false, true,
            [&group](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
              const char* names[] = {group.c_str()};
              rd_kafka_DescribeConsumerGroups(rk, names, 1, options, queue);
            }};
        auto event = client.Request(call, deadline);
        if (!event) return std::unexpected(event.error());
        if (const auto err = rd_kafka_event_error(event->get());
            err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          return Final(KafkaError(err, what));
        }
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t** groups =
            rd_kafka_DescribeConsumerGroups_result_groups(
                rd_kafka_event_DescribeConsumerGroups_result(event->get()), &n);
        if (n != 1) return Again({Code::kUnavailable, what + ": no description of the group"});
        if (const rd_kafka_error_t* e = rd_kafka_ConsumerGroupDescription_error(groups[0])) {
          const rd_kafka_resp_err_t code = rd_kafka_error_code(e);
          if (code == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) return Members{};
          Error error = KafkaError(code, what + ": " + rd_kafka_error_string(e));
          if (Transient(code) || code == RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS ||
              code == RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE ||
              code == RD_KAFKA_RESP_ERR_NOT_COORDINATOR) {
            return Again(std::move(error));
          }
          return Final(std::move(error));
        }
        Members out;
        const size_t count = rd_kafka_ConsumerGroupDescription_member_count(groups[0]);
        for (size_t i = 0; i < count; ++i) {
          const rd_kafka_MemberDescription_t* m =
              rd_kafka_ConsumerGroupDescription_member(groups[0], i);
          const auto text = [](const char* s) { return s == nullptr ? std::string() : s; };
          out.push_back({text(rd_kafka_MemberDescription_consumer_id(m)),
                         text(rd_kafka_MemberDescription_client_id(m)),
                         text(rd_kafka_MemberDescription_host(m))});
        }
        return out;
      });
}

Result<GroupProtocolSupport> ConsumerGroupProtocolSupport(const Properties& props,
                                                          milliseconds timeout) {
  const std::string what = "describing the brokers' group protocols";
  const std::string key = "group.coordinator.rebalance.protocols";
  return WithRetries<GroupProtocolSupport>(
      props, what, SteadyClock::now() + timeout,
      [&](AdminClient& client, TimePoint deadline) -> Attempt<GroupProtocolSupport> {
        std::vector<std::string> ids;
        for (int32_t id : client.BrokerIds()) ids.push_back(std::to_string(id));
        if (ids.empty()) return Again({Code::kUnavailable, what + ": no broker listed"});
        GroupProtocolSupport out{.every_broker = true, .why = {}};
        for (const auto& id : ids) {
          // One request per broker: librdkafka refuses more than one broker resource in one.
          auto configs =
              TopicConfigsWith(client, {id}, {key}, what, deadline, RD_KAFKA_RESOURCE_BROKER);
          if (!configs) return std::unexpected(configs.error());
          auto entry = EntryOf(*configs, id, what);
          if (!entry) return std::unexpected(entry.error());
          auto it = entry->find(key);
          if (it == entry->end()) {
            out.every_broker = false;
            out.why = "broker " + id + " has no " + key + " (Kafka before 3.7)";
            break;
          }
          if (it->second.find("consumer") == std::string::npos) {
            out.every_broker = false;
            out.why = "broker " + id + " has " + key + "=" + it->second;
            break;
          }
        }
        return out;
      });
}

// Through the admin API rather than a metadata request: a refusal ends it at once, and it never
// creates the topic (a producer's metadata request does where the brokers auto-create topics).
Result<int32_t> PartitionCount(const Properties& props, const std::string& topic,
                               milliseconds timeout) {
  auto info = DescribeTopic(props, topic, timeout);
  if (!info && info.error().code == Code::kNotFound) {
    return Fail(Code::kNotFound, "topic " + topic + " does not exist");
  }
  if (!info) return std::unexpected(info.error());
  return info->partitions;
}

std::string LibraryVersion() { return rd_kafka_version_str(); }

int LibraryPatchLevel() { return KLEAF_RDKAFKA_PATCH; }

std::string LibraryFeatures() {
  ConfHandle conf(rd_kafka_conf_new());
  char features[512] = {};
  size_t size = sizeof(features);
  if (rd_kafka_conf_get(conf.get(), "builtin.features", features, &size) != RD_KAFKA_CONF_OK) {
    return "";
  }
  return features;
}

std::optional<std::string> HostSaslMechanisms() {
  // Cyrus counts its initializations (librdkafka makes one too), so this one is harmless to it;
  // the mechanism list is built from the plugins found, once, at the first.
  static const std::optional<std::string> mechanisms = []() -> std::optional<std::string> {
    if (sasl_client_init(nullptr) != SASL_OK) return std::nullopt;
    const char** list = sasl_global_listmech();
    std::string joined;
    for (size_t i = 0; list != nullptr && list[i] != nullptr; ++i) {
      if (!joined.empty()) joined += ' ';
      joined += list[i];
    }
    return joined;
  }();
  return mechanisms;
}

namespace {

// The outcome of a CreateTopics request: ok when every topic was created or existed already. A
// broker that is not the controller of a ZooKeeper-mode cluster refuses with NOT_CONTROLLER: the
// next attempt asks the controller (`to_controller`).
Attempt<void> CreateTopicsResult(rd_kafka_event_t* event, bool& to_controller) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Final({Code::kUnavailable,
                  std::string("creating topics: ") + rd_kafka_event_error_string(event)});
  }
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &n);
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      continue;
    }
    const char* msg = rd_kafka_topic_result_error_string(results[i]);
    Error error{Code::kUnavailable, std::string("creating topic ") +
                                        rd_kafka_topic_result_name(results[i]) + ": " +
                                        (msg ? msg : rd_kafka_err2str(err))};
    if (err == RD_KAFKA_RESP_ERR_NOT_CONTROLLER) {
      to_controller = true;
      return Again(std::move(error));
    }
    // More replicas than brokers (or a broker default that asks for that): the configuration's
    // fault, not the cluster's.
    if (err == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR) error.code = Code::kInvalidArgument;
    if (IsAuthorizationError(err)) {
      error.code = Code::kFailedPrecondition;
      error.message.append(": the Kafka principal needs CREATE on topic ")
          .append(rd_kafka_topic_result_name(results[i]))
          .append(", or the topics must be created by hand (")
          .append(kAclHint)
          .append(")");
    }
    return Final(std::move(error));
  }
  return {};
}

// Asks the cluster to create `topics` and waits for its answer until `deadline`.
[[nodiscard]] Result<void> CreateTopics(const Properties& props,
                                        const std::vector<TopicSpec>& topics, TimePoint deadline) {
  std::vector<NewTopicHandle> owned;
  std::vector<rd_kafka_NewTopic_t*> new_topics;  // the array librdkafka reads
  char errstr[512];
  for (const auto& t : topics) {
    NewTopicHandle nt(rd_kafka_NewTopic_new(t.name.c_str(), t.partitions, t.replication_factor,
                                            errstr, sizeof(errstr)));
    if (!nt) return Fail(Code::kInvalidArgument, "topic " + t.name + ": " + errstr);
    for (const auto& [k, v] : t.configs) {
      rd_kafka_NewTopic_set_config(nt.get(), k.c_str(), v.c_str());
    }
    new_topics.push_back(nt.get());
    owned.push_back(std::move(nt));
  }
  // A later attempt finds the topics an earlier one created (TOPIC_ALREADY_EXISTS: fine).
  bool to_controller = false;
  auto result = WithRetries<void>(
      props, "creating topics", deadline,
      [&](AdminClient& client, TimePoint attempt_deadline) -> Attempt<void> {
        auto event = client.Request(
            {.op = RD_KAFKA_ADMIN_OP_CREATETOPICS,
             .what = "creating topics",
             .operation_timeout = true,
             .to_controller = to_controller,
             .send =
                 [&new_topics](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
                               rd_kafka_queue_t* queue) {
                   rd_kafka_CreateTopics(rk, new_topics.data(), new_topics.size(), options, queue);
                 }},
            attempt_deadline);
        if (!event) return std::unexpected(event.error());
        return CreateTopicsResult(event->get(), to_controller);
      });
  return result;
}

// The topics of `topics` that do not exist yet, and a check that those that do have at least
// their configured partitions (fewer: keys would map elsewhere). Asks until `deadline`.
[[nodiscard]] Result<std::vector<TopicSpec>> MissingTopics(const Properties& props,
                                                           const std::vector<TopicSpec>& topics,
                                                           TimePoint deadline) {
  std::vector<std::string> names;
  for (const auto& t : topics) names.push_back(t.name);
  auto described = DescribeCluster(props, names, {}, Left(deadline));
  if (!described) return std::unexpected(described.error());
  std::vector<TopicSpec> missing;
  for (const auto& t : topics) {
    const auto& found = described->topics.at(t.name);
    if (!found && found.error().code == Code::kNotFound) {
      missing.push_back(t);
      continue;
    }
    if (!found) return std::unexpected(found.error());
    if (found->info.partitions < t.partitions) {
      return Fail(Code::kFailedPrecondition,
                  "topic " + t.name + " has " + std::to_string(found->info.partitions) +
                      " partitions, " + std::to_string(t.partitions) + " are configured");
    }
  }
  return missing;
}

}  // namespace

// One deadline for the whole call: looking the topics up, creating the missing ones and looking
// again share `timeout` (each step gets what is left, so the call returns within `timeout` plus the
// time librdkafka takes to drop a handle: 1.0 s with a frozen broker). Topics that exist are not
// created again: a node's restart needs nothing but answers to describe requests.
Result<void> EnsureTopics(const Properties& props, const std::vector<TopicSpec>& topics,
                          milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  auto missing = MissingTopics(props, topics, deadline);
  if (!missing) return std::unexpected(missing.error());
  if (missing->empty()) return {};
  if (auto r = CreateTopics(props, *missing, deadline); !r) return r;
  // A broker's metadata can lag a topic just created (more so while it rejoins its controller,
  // e.g. after a stall): ask again until the deadline.
  while (true) {
    auto still = MissingTopics(props, *missing, deadline);
    if (!still) return std::unexpected(still.error());
    if (still->empty()) return {};
    if (SteadyClock::now() + milliseconds(200) >= deadline) {
      return Fail(Code::kUnavailable,
                  "checking topic " + still->front().name + " timed out (is Kafka reachable?)");
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

}  // namespace kleaf::kafka
