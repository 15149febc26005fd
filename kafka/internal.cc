#include "kafka/internal.h"

namespace kleaf::kafka {

bool IsAuthorizationError(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
         err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED ||
         err == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
         err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED;
}

Error KafkaError(rd_kafka_resp_err_t err, std::string_view what) {
  Code code = Code::kUnavailable;
  if (err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
    code = Code::kNotFound;
  } else if (err == RD_KAFKA_RESP_ERR__INVALID_ARG) {
    code = Code::kInvalidArgument;
  }
  std::string message = std::string(what) + ": " + rd_kafka_err2str(err);
  if (IsAuthorizationError(err)) {
    code = Code::kFailedPrecondition;
    message.append(" (the Kafka principal lacks an ACL: ").append(kAclHint).append(")");
  }
  return Error{code, std::move(message)};
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

Result<KafkaHandle> NewHandle(rd_kafka_type_t type, const Properties& props,
                              const std::function<void(rd_kafka_conf_t*)>& setup) {
  ConfHandle conf(rd_kafka_conf_new());
  char errstr[512];
  // No KIP-714 metrics push: nothing of kleaf's reads it (kleaf exports its own metrics). First
  // set against librdkafka 2.8, whose destroy of a handle whose telemetry started often waited a
  // full second for the last push (a gateway's dozen short-lived admin handles took 1-4 s at
  // start instead of 0.2 s); 2.14.2 does not (measured 2026-12-06 on Kafka 4.4.0: handles held
  // 1.5 s after a metadata answer were destroyed in 0.8 ms on average with the push left on).
  Properties all = props;
  all.emplace("enable.metrics.push", "false");
  for (const auto& [k, v] : all) {
    if (rd_kafka_conf_set(conf.get(), k.c_str(), v.c_str(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      return Fail(Code::kInvalidArgument, "kafka property " + k + ": " + errstr);
    }
  }
  InstallLogSink(conf.get());
  if (setup) setup(conf.get());
  KafkaHandle rk(rd_kafka_new(type, conf.get(), errstr, sizeof(errstr)));
  if (!rk) return Fail(Code::kInvalidArgument, std::string("kafka client: ") + errstr);
  (void)conf.release();  // rd_kafka_new took the configuration over
  return rk;
}

Result<void> PrepareTopic(rd_kafka_t* rk, const std::string& topic,
                          std::chrono::milliseconds timeout) {
  TopicHandle rkt(rd_kafka_topic_new(rk, topic.c_str(), nullptr));
  if (!rkt) {
    return std::unexpected(KafkaError(rd_kafka_last_error(), "looking up topic " + topic));
  }
  const rd_kafka_metadata_t* raw = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, 0, rkt.get(), &raw, static_cast<int>(timeout.count()));
  MetadataHandle metadata(raw);  // only the error matters
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // No broker to ask: perhaps none left at all (RestoreBootstrapIfNoBroker says when).
    if (err == RD_KAFKA_RESP_ERR__TRANSPORT &&
        RestoreBootstrapIfNoBroker(rk, std::chrono::milliseconds(0))) {
      CountRecovery("topic_lookup", "bootstrap_restored");
    }
    return std::unexpected(KafkaError(err, "looking up topic " + topic));
  }
  return {};
}

bool RestoreBootstrapIfNoBroker(rd_kafka_t* rk, std::chrono::milliseconds wait) {
  const rd_kafka_metadata_t* raw = nullptr;
  // No topic: only the brokers. With a broker to send it to, the request goes out and its answer
  // refreshes the cache; the wait may end before it (only "no broker" matters here).
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, 0, nullptr, &raw, static_cast<int>(wait.count()));
  MetadataHandle metadata(raw);
  if (err != RD_KAFKA_RESP_ERR__TRANSPORT) return false;
  char servers[1024];
  size_t size = sizeof(servers);
  if (rd_kafka_conf_get(rd_kafka_conf(rk), "bootstrap.servers", servers, &size) !=
          RD_KAFKA_CONF_OK ||
      servers[0] == '\0') {
    return false;
  }
  return rd_kafka_brokers_add(rk, servers) > 0;
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
    for (size_t i = 0;
         rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
      out.headers.push_back({name, std::string(static_cast<const char*>(val), size)});
    }
  }
  return out;
}

rd_kafka_resp_err_t ProduceOne(rd_kafka_t* rk, const std::string& topic, int32_t partition,
                               std::string_view key, const std::optional<std::string>& value,
                               const std::vector<Header>& headers, void* opaque) {
  HeadersHandle hdrs(rd_kafka_headers_new(headers.size()));
  for (const auto& h : headers) {
    rd_kafka_header_add(hdrs.get(), h.name.data(), static_cast<ssize_t>(h.name.size()),
                        h.value.data(), static_cast<ssize_t>(h.value.size()));
  }
  void* payload = value ? const_cast<char*>(value->data()) : nullptr;
  size_t payload_len = value ? value->size() : 0;
  rd_kafka_resp_err_t err = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(payload, payload_len),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs.get()),
      RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) (void)hdrs.release();  // the message took them over
  return err;
}

TxnError ToTxnError(ErrorHandle owned) {
  rd_kafka_error_t* error = owned.get();
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
  return e;
}

TxnResult<void> Check(rd_kafka_error_t* error) {
  if (error == nullptr) return {};
  return std::unexpected(ToTxnError(ErrorHandle(error)));
}

Result<std::vector<TopicPartition>> CommittedOffsets(rd_kafka_t* rk,
                                                     const std::vector<TopicPartition>& partitions,
                                                     std::chrono::milliseconds timeout) {
  PartitionList list = ToList(partitions);
  auto err = rd_kafka_committed(rk, list.get(), static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(KafkaError(err, "committed offsets"));
  }
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return std::unexpected(KafkaError(e.err, "committed offset of " + std::string(e.topic) + "/" +
                                                   std::to_string(e.partition)));
    }
  }
  return FromList(list.get());
}

}  // namespace kleaf::kafka
