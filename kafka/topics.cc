#include "kafka/topics.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

namespace {

using SteadyClock = std::chrono::steady_clock;

// What is left until `deadline`, at least 1 ms.
milliseconds Left(SteadyClock::time_point deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
}

// Why the brokers refused a client. librdkafka reports a failed SASL authentication or TLS
// handshake through the error callback (served by rd_kafka_poll) and then retries for ever, so a
// wait on an admin request's answer alone would only end at its deadline.
struct Refusal {
  std::mutex mu;
  std::string reason;  // guarded by mu; empty: not refused
};

void OnClientError(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  if (err != RD_KAFKA_RESP_ERR__AUTHENTICATION && err != RD_KAFKA_RESP_ERR__SSL) return;
  auto* refusal = static_cast<Refusal*>(opaque);
  std::lock_guard lock(refusal->mu);
  if (refusal->reason.empty())
    refusal->reason =
        reason != nullptr ? reason : rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
}

struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
struct OptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* o) const { rd_kafka_AdminOptions_destroy(o); }
};

// One admin request (CreateTopics, DescribeTopics, DescribeConfigs).
struct AdminCall {
  rd_kafka_admin_op_t op = RD_KAFKA_ADMIN_OP_ANY;
  std::string what;  // "describing topic t", for the errors
  milliseconds request_timeout{0};
  bool operation_timeout = false;  // also the broker-side operation timeout (CreateTopics)
  // Waiting for the answer ends here: past it the answer is a timeout.
  SteadyClock::time_point deadline;
  // Sends the request through the handle with the options, to be answered on the queue.
  std::function<void(rd_kafka_t*, rd_kafka_AdminOptions_t*, rd_kafka_queue_t*)> send;
};

// Sends `call` through a new handle and hands its answer to `read`: kUnavailable "<what> timed
// out" when none came by the deadline, kUnauthenticated as soon as the brokers refused the
// client's SASL credentials or TLS handshake.
template <typename T>
Result<T> AdminRequest(const Properties& props, const AdminCall& call,
                       const std::function<Result<T>(rd_kafka_event_t*)>& read) {
  Refusal refusal;
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props, [&refusal](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_opaque(conf, &refusal);
    rd_kafka_conf_set_error_cb(conf, OnClientError);
  });
  if (!rk) return std::unexpected(rk.error());
  std::unique_ptr<rd_kafka_queue_t, QueueDeleter> queue(rd_kafka_queue_new(rk->get()));
  std::unique_ptr<rd_kafka_AdminOptions_t, OptionsDeleter> options(
      rd_kafka_AdminOptions_new(rk->get(), call.op));
  char errstr[512];
  const auto timeout_ms = static_cast<int>(call.request_timeout.count());
  rd_kafka_AdminOptions_set_request_timeout(options.get(), timeout_ms, errstr, sizeof(errstr));
  if (call.operation_timeout) {
    rd_kafka_AdminOptions_set_operation_timeout(options.get(), timeout_ms, errstr, sizeof(errstr));
  }
  call.send(rk->get(), options.get(), queue.get());
  // Short waits, looking between them for a refusal (served by rd_kafka_poll).
  constexpr milliseconds kSlice{100};
  while (true) {
    std::unique_ptr<rd_kafka_event_t, EventDeleter> event(rd_kafka_queue_poll(
        queue.get(), static_cast<int>(std::min(kSlice, Left(call.deadline)).count())));
    if (event) return read(event.get());
    rd_kafka_poll(rk->get(), 0);
    {
      std::lock_guard lock(refusal.mu);
      if (!refusal.reason.empty()) {
        return Fail(Code::kUnauthenticated,
                    call.what + ": Kafka refused the connection: " + refusal.reason +
                        " (check kafka.properties: security.protocol, sasl.mechanism, "
                        "sasl.username, sasl.password, ssl.ca.location)");
      }
    }
    if (SteadyClock::now() >= call.deadline) {
      return Fail(Code::kUnavailable, call.what + " timed out (is Kafka reachable?)");
    }
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

Result<TopicInfo> ReadTopicDescription(rd_kafka_event_t* event, const std::string& what) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(rd_kafka_event_error(event), what));
  }
  size_t n = 0;
  const rd_kafka_TopicDescription_t** descriptions =
      rd_kafka_DescribeTopics_result_topics(rd_kafka_event_DescribeTopics_result(event), &n);
  if (n != 1) return Fail(Code::kUnavailable, what + ": " + std::to_string(n) + " answers");
  if (const rd_kafka_error_t* error = rd_kafka_TopicDescription_error(descriptions[0]);
      error != nullptr && rd_kafka_error_code(error) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(rd_kafka_error_code(error), what));
  }
  size_t partitions = 0;
  rd_kafka_TopicDescription_partitions(descriptions[0], &partitions);
  const rd_kafka_Uuid_t* id = rd_kafka_TopicDescription_topic_id(descriptions[0]);
  return TopicInfo{.partitions = static_cast<int32_t>(partitions),
                   .id = id != nullptr ? KafkaUuidText(rd_kafka_Uuid_base64str(id)) : ""};
}

Result<std::map<std::string, std::string>> ReadTopicConfigs(rd_kafka_event_t* event,
                                                            const std::vector<std::string>& names,
                                                            const std::string& what) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(rd_kafka_event_error(event), what));
  }
  size_t n = 0;
  const rd_kafka_ConfigResource_t** described =
      rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(event), &n);
  if (n != 1) return Fail(Code::kUnavailable, what + ": " + std::to_string(n) + " answers");
  if (rd_kafka_ConfigResource_error(described[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(rd_kafka_ConfigResource_error(described[0]), what));
  }
  size_t count = 0;
  const rd_kafka_ConfigEntry_t** entries = rd_kafka_ConfigResource_configs(described[0], &count);
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < count; ++i) {
    const std::string name = rd_kafka_ConfigEntry_name(entries[i]);
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    const char* value = rd_kafka_ConfigEntry_value(entries[i]);
    out[name] = value != nullptr ? value : "";
  }
  return out;
}

}  // namespace

Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                milliseconds timeout) {
  const char* names[] = {topic.c_str()};
  rd_kafka_TopicCollection_t* topics = rd_kafka_TopicCollection_of_topic_names(names, 1);
  const std::string what = "describing topic " + topic;
  AdminCall call{
      .op = RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
      .what = what,
      .request_timeout = timeout,
      // The request timeout ends the request; the margin only covers handing the
      // result over.
      .deadline = SteadyClock::now() + timeout + milliseconds(1000),
      .send = [topics](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
        rd_kafka_DescribeTopics(rk, topics, options, queue);
      }};
  auto result = AdminRequest<TopicInfo>(
      props, call, [&what](rd_kafka_event_t* e) { return ReadTopicDescription(e, what); });
  rd_kafka_TopicCollection_destroy(topics);
  return result;
}

Result<std::map<std::string, std::string>> TopicConfigs(const Properties& props,
                                                        const std::string& topic,
                                                        const std::vector<std::string>& names,
                                                        milliseconds timeout) {
  rd_kafka_ConfigResource_t* resource =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  const std::string what = "describing the configs of topic " + topic;
  AdminCall call{.op = RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS,
                 .what = what,
                 .request_timeout = timeout,
                 .deadline = SteadyClock::now() + timeout + milliseconds(1000),
                 .send = [&resource](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
                                     rd_kafka_queue_t* queue) {
                   rd_kafka_DescribeConfigs(rk, &resource, 1, options, queue);
                 }};
  auto result = AdminRequest<std::map<std::string, std::string>>(
      props, call, [&](rd_kafka_event_t* e) { return ReadTopicConfigs(e, names, what); });
  rd_kafka_ConfigResource_destroy(resource);
  return result;
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

namespace {

// The outcome of a CreateTopics request: ok when every topic was created or existed already.
Result<void> CreateTopicsResult(rd_kafka_event_t* event) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Fail(Code::kUnavailable,
                std::string("creating topics: ") + rd_kafka_event_error_string(event));
  }
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &n);
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      const char* msg = rd_kafka_topic_result_error_string(results[i]);
      return Fail(Code::kUnavailable, std::string("creating topic ") +
                                          rd_kafka_topic_result_name(results[i]) + ": " +
                                          (msg ? msg : rd_kafka_err2str(err)));
    }
  }
  return {};
}

// Asks the cluster to create `topics` and waits for its answer until `deadline`.
Result<void> CreateTopics(const Properties& props, const std::vector<TopicSpec>& topics,
                          SteadyClock::time_point deadline) {
  std::vector<rd_kafka_NewTopic_t*> new_topics;
  auto destroy = [&new_topics] {
    for (auto* n : new_topics) rd_kafka_NewTopic_destroy(n);
  };
  char errstr[512];
  for (const auto& t : topics) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(t.name.c_str(), t.partitions,
                                                    t.replication_factor, errstr, sizeof(errstr));
    if (nt == nullptr) {
      destroy();
      return Fail(Code::kInvalidArgument, "topic " + t.name + ": " + errstr);
    }
    for (const auto& [k, v] : t.configs) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
    new_topics.push_back(nt);
  }
  // No margin past the deadline: an answer that has not come by then is a timeout (the request is
  // dropped with the handle).
  AdminCall call{.op = RD_KAFKA_ADMIN_OP_CREATETOPICS,
                 .what = "creating topics",
                 .request_timeout = Left(deadline),
                 .operation_timeout = true,
                 .deadline = deadline,
                 .send = [&new_topics](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
                                       rd_kafka_queue_t* queue) {
                   rd_kafka_CreateTopics(rk, new_topics.data(), new_topics.size(), options, queue);
                 }};
  auto result = AdminRequest<void>(props, call, CreateTopicsResult);
  destroy();
  return result;
}

// Checks that each topic has at least its configured partitions, asking until `deadline`.
Result<void> CheckPartitionCounts(const Properties& props, const std::vector<TopicSpec>& topics,
                                  SteadyClock::time_point deadline) {
  for (const auto& t : topics) {
    // A broker's metadata can lag a topic just created (more so while it rejoins its controller,
    // e.g. after a stall): ask again until the deadline.
    if (SteadyClock::now() >= deadline) {
      return Fail(Code::kUnavailable,
                  "checking topic " + t.name + " timed out (is Kafka reachable?)");
    }
    auto count = PartitionCount(props, t.name, Left(deadline));
    while (!count && count.error().code == Code::kNotFound &&
           SteadyClock::now() + milliseconds(200) < deadline) {
      std::this_thread::sleep_for(milliseconds(200));
      count = PartitionCount(props, t.name, Left(deadline));
    }
    if (!count) return std::unexpected(count.error());
    if (*count < t.partitions) {
      return Fail(Code::kFailedPrecondition, "topic " + t.name + " has " + std::to_string(*count) +
                                                 " partitions, " + std::to_string(t.partitions) +
                                                 " are configured");
    }
  }
  return {};
}

}  // namespace

// One deadline for the whole call: creating the topics and checking their partition counts share
// `timeout` (each step gets what is left, so the call returns within `timeout` plus the time
// librdkafka takes to drop a handle: 1.0 s with a frozen broker).
Result<void> EnsureTopics(const Properties& props, const std::vector<TopicSpec>& topics,
                          milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  if (auto r = CreateTopics(props, topics, deadline); !r) return r;
  return CheckPartitionCounts(props, topics, deadline);
}

}  // namespace kleaf::kafka
