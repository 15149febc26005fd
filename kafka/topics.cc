#include "kafka/topics.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "kafka/internal.h"

namespace kleaf::kafka {

using std::chrono::milliseconds;

Result<int32_t> PartitionCount(const Properties& props, const std::string& topic,
                               milliseconds timeout) {
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk->get(), topic.c_str(), nullptr);
  rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk->get(), 0, rkt, &md, static_cast<int>(timeout.count()));
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::unexpected(KafkaError(err, "metadata of " + topic));
  int32_t count = -1;
  if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
    count = md->topics[0].partition_cnt;
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

Result<std::string> TopicConfig(const Properties& props, const std::string& topic,
                                const std::string& name, milliseconds timeout) {
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  rd_kafka_ConfigResource_t* resource =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk->get());
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk->get(), RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
  char errstr[512];
  rd_kafka_AdminOptions_set_request_timeout(options, static_cast<int>(timeout.count()), errstr,
                                            sizeof(errstr));
  rd_kafka_DescribeConfigs(rk->get(), &resource, 1, options, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, static_cast<int>(timeout.count()) + 1000);
  const std::string what = "describing the configs of topic " + topic;
  Result<std::string> result = Fail(Code::kUnavailable, what + " timed out");
  if (event != nullptr && rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(KafkaError(rd_kafka_event_error(event), what));
  } else if (event != nullptr) {
    size_t n = 0;
    const rd_kafka_ConfigResource_t** described =
        rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(event), &n);
    if (n != 1) {
      result = Fail(Code::kUnavailable, what + ": " + std::to_string(n) + " answers");
    } else if (rd_kafka_ConfigResource_error(described[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = std::unexpected(KafkaError(rd_kafka_ConfigResource_error(described[0]), what));
    } else {
      result = Fail(Code::kNotFound, what + ": no config " + name);
      size_t count = 0;
      const rd_kafka_ConfigEntry_t** entries =
          rd_kafka_ConfigResource_configs(described[0], &count);
      for (size_t i = 0; i < count; ++i) {
        if (name == rd_kafka_ConfigEntry_name(entries[i])) {
          const char* value = rd_kafka_ConfigEntry_value(entries[i]);
          result = std::string(value != nullptr ? value : "");
        }
      }
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_queue_destroy(queue);
  rd_kafka_ConfigResource_destroy(resource);
  return result;
}

std::string LibraryVersion() { return rd_kafka_version_str(); }

namespace {

using SteadyClock = std::chrono::steady_clock;

// What is left until `deadline`, at least 1 ms.
milliseconds Left(SteadyClock::time_point deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()));
}

// The outcome of a CreateTopics request: ok when every topic was created or existed already.
Result<void> CreateTopicsResult(rd_kafka_event_t* event) {
  if (event == nullptr) {
    return Fail(Code::kUnavailable, "creating topics timed out (is Kafka reachable?)");
  }
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

// Asks the cluster to create `topics` through `rk` and waits for its answer until `deadline`.
Result<void> CreateTopics(rd_kafka_t* rk, const std::vector<TopicSpec>& topics,
                          SteadyClock::time_point deadline) {
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
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  const auto create_timeout = static_cast<int>(Left(deadline).count());
  rd_kafka_AdminOptions_set_operation_timeout(options, create_timeout, errstr, sizeof(errstr));
  rd_kafka_AdminOptions_set_request_timeout(options, create_timeout, errstr, sizeof(errstr));
  rd_kafka_CreateTopics(rk, new_topics.data(), new_topics.size(), options, queue);
  // No margin past the deadline: an answer that has not come by then is a timeout (the request is
  // dropped with the queue).
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, static_cast<int>(Left(deadline).count()));
  Result<void> result = CreateTopicsResult(event);
  if (event) rd_kafka_event_destroy(event);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_queue_destroy(queue);
  for (auto* n : new_topics) rd_kafka_NewTopic_destroy(n);
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
  auto rk = NewHandle(RD_KAFKA_PRODUCER, props);
  if (!rk) return std::unexpected(rk.error());
  if (auto r = CreateTopics(rk->get(), topics, deadline); !r) return r;
  return CheckPartitionCounts(props, topics, deadline);
}

}  // namespace kleaf::kafka
