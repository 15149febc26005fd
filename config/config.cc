#include "config/config.h"

#include <arpa/inet.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

namespace kleaf::config {
namespace {

// Which serving roles read a key (KeyReference::read_by), as bits.
enum ReadBy : unsigned {
  kByStandalone = 1u << 0,
  kByAllocator = 1u << 1,
  kByGateway = 1u << 2,
  kByProducer = 1u << 3,
  kByAll = kByStandalone | kByAllocator | kByGateway | kByProducer,
  kByCluster = kByAllocator | kByGateway | kByProducer,
  kByIdServers = kByStandalone | kByGateway,         // the HTTP ID API
  kBySnowflakeIssuers = kByIdServers | kByProducer,  // snowflake::SnowflakeNode
  kByLeaseHolders = kByGateway | kByProducer,        // snowflake::WorkerLease
};

// One settable key: its dotted name, how to read it into a Config, who reads it, and the range
// of an integer key (the one IntField enforces).
struct Field {
  std::string key;
  std::function<Result<void>(const YAML::Node&, Config&)> set;
  unsigned read_by = kByAll;
  std::optional<std::pair<int64_t, int64_t>> range = std::nullopt;
  // The sub-keys of a key set as one mapping (http.tls), as the reference lists them.
  std::vector<std::string> sub_keys = {};
};

Error KeyError(const std::string& key, const std::string& what) {
  return Error{Code::kInvalidArgument, key + ": " + what};
}

Field IntField(std::string key, unsigned read_by, int64_t min, int64_t max,
               std::function<void(Config&, int64_t)> assign) {
  return Field{key,
               [key, min, max, assign](const YAML::Node& n, Config& c) -> Result<void> {
                 if (!n.IsScalar()) return std::unexpected(KeyError(key, "expected an integer"));
                 const std::string& s = n.Scalar();
                 int64_t v = 0;
                 auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
                 if (ec != std::errc() || ptr != s.data() + s.size()) {
                   return std::unexpected(KeyError(key, "expected an integer, got '" + s + "'"));
                 }
                 if (v < min || v > max) {
                   return std::unexpected(KeyError(key, "must be between " + std::to_string(min) +
                                                            " and " + std::to_string(max) +
                                                            ", got " + s));
                 }
                 assign(c, v);
                 return {};
               },
               read_by, std::make_pair(min, max)};
}

Field BoolField(std::string key, unsigned read_by, std::function<void(Config&, bool)> assign) {
  return Field{key,
               [key, assign](const YAML::Node& n, Config& c) -> Result<void> {
                 if (!n.IsScalar()) return std::unexpected(KeyError(key, "expected true or false"));
                 const std::string& s = n.Scalar();
                 if (s == "true") {
                   assign(c, true);
                 } else if (s == "false") {
                   assign(c, false);
                 } else {
                   return std::unexpected(KeyError(key, "expected true or false, got '" + s + "'"));
                 }
                 return {};
               },
               read_by};
}

Field StringField(std::string key, unsigned read_by,
                  std::function<Result<void>(Config&, const std::string&)> assign) {
  return Field{key,
               [key, assign](const YAML::Node& n, Config& c) -> Result<void> {
                 if (!n.IsScalar()) return std::unexpected(KeyError(key, "expected a string"));
                 auto r = assign(c, n.Scalar());
                 if (!r) return std::unexpected(KeyError(key, r.error().message));
                 return {};
               },
               read_by};
}

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

[[nodiscard]] Result<void> SetKafkaProperties(const YAML::Node& n, Config& c) {
  const std::string key = "kafka.properties";
  if (n.IsNull()) return {};
  if (!n.IsMap()) {
    return std::unexpected(KeyError(key, "expected a mapping of librdkafka properties"));
  }
  std::map<std::string, std::string> properties;
  for (const auto& entry : n) {
    const std::string name = entry.first.as<std::string>();
    if (!entry.second.IsScalar()) {
      return std::unexpected(KeyError(key + "." + name, "expected a string"));
    }
    if (!AllowedKafkaProperty(name)) {
      return std::unexpected(KeyError(
          key + "." + name,
          "not passed to librdkafka: kleaf sets it itself or it would change kleaf's guarantees "
          "(allowed: security.protocol, sasl.*, ssl.*, enable.ssl.certificate.verification, "
          "socket.*, broker.address.*, client.dns.lookup, client.rack, connections.max.idle.ms, "
          "debug; brokers: kafka.bootstrap)"));
    }
    if (!properties.emplace(name, entry.second.Scalar()).second) {
      return std::unexpected(KeyError(key + "." + name, "duplicate key"));
    }
  }
  c.kafka.properties = std::move(properties);
  return {};
}

// http.tls: a mapping of cert_file, key_file, client_ca_file; errors name http.tls.<key>.
[[nodiscard]] Result<void> SetHttpTls(const YAML::Node& n, Config& c) {
  const std::string key = "http.tls";
  c.http.tls = HttpTls{};
  if (n.IsNull()) return {};
  if (!n.IsMap()) {
    return std::unexpected(
        KeyError(key, "expected a mapping of cert_file, key_file, client_ca_file"));
  }
  std::set<std::string> seen;
  for (const auto& entry : n) {
    const std::string name = entry.first.as<std::string>();
    const std::string k = key + "." + name;
    if (!seen.insert(name).second) return std::unexpected(KeyError(k, "duplicate key"));
    if (!entry.second.IsScalar() || entry.second.Scalar().empty()) {
      return std::unexpected(KeyError(k, "expected a file path"));
    }
    const std::string& v = entry.second.Scalar();
    if (name == "cert_file") {
      c.http.tls.cert_file = v;
    } else if (name == "key_file") {
      c.http.tls.key_file = v;
    } else if (name == "client_ca_file") {
      c.http.tls.client_ca_file = v;
    } else {
      return std::unexpected(KeyError(k, "unknown key (cert_file, key_file, client_ca_file)"));
    }
  }
  return {};
}

// http.tls: the certificate and its key together; a client CA only with them.
[[nodiscard]] Result<void> CheckHttpTls(const HttpTls& t) {
  if (!t.cert_file.empty() && t.key_file.empty()) {
    return Fail(Code::kInvalidArgument, "http.tls.key_file: required with http.tls.cert_file");
  }
  if (t.cert_file.empty() && !t.key_file.empty()) {
    return Fail(Code::kInvalidArgument, "http.tls.cert_file: required with http.tls.key_file");
  }
  if (t.cert_file.empty() && !t.client_ca_file.empty()) {
    return Fail(Code::kInvalidArgument,
                "http.tls.client_ca_file: needs http.tls.cert_file and http.tls.key_file");
  }
  return {};
}

// A Kafka topic or group name: 1-249 characters of [A-Za-z0-9._-], or empty for the default.
[[nodiscard]] Result<void> CheckKafkaName(const std::string& s) {
  if (s.size() > 249) return Fail(Code::kInvalidArgument, "must be at most 249 characters");
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') {
      return Fail(Code::kInvalidArgument, "may hold only [A-Za-z0-9._-]");
    }
  }
  return {};
}

// A tag as the API accepts it: 1-128 characters of [A-Za-z0-9_.:-].
[[nodiscard]] Result<void> CheckTag(const std::string& s) {
  if (s.empty() || s.size() > 128) return Fail(Code::kInvalidArgument, "must be 1-128 characters");
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != ':' &&
        ch != '-') {
      return Fail(Code::kInvalidArgument, "may hold only [A-Za-z0-9_.:-], got '" + s + "'");
    }
  }
  return {};
}

// producer.streams[i].mode, `k` its key.
[[nodiscard]] Result<ProducerStream::Mode> ParseStreamMode(const std::string& v,
                                                           const std::string& k) {
  if (v == "segment") return ProducerStream::Mode::kSegment;
  if (v == "snowflake") return ProducerStream::Mode::kSnowflake;
  if (v == "uuid7") return ProducerStream::Mode::kUuid7;
  if (v == "ulid") return ProducerStream::Mode::kUlid;
  return std::unexpected(
      KeyError(k, "expected segment, snowflake, uuid7 or ulid, got '" + v + "'"));
}

// producer.streams[i].batch_size, `k` its key: an integer in [1, 100000].
[[nodiscard]] Result<int64_t> ParseStreamBatchSize(const std::string& v, const std::string& k) {
  int64_t b = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), b);
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    return std::unexpected(KeyError(k, "expected an integer, got '" + v + "'"));
  }
  if (b < 1 || b > 100000) {
    return std::unexpected(KeyError(k, "must be between 1 and 100000, got " + v));
  }
  return b;
}

// The batch size of a parsed stream: the mode's default where none was given, the 128-bit
// modes' bound where one was.
[[nodiscard]] Result<void> SettleStreamBatchSize(ProducerStream& s, bool has_batch_size,
                                                 const std::string& at) {
  // A batch is one Kafka record, and records above 1 MB are refused by default (librdkafka's
  // message.max.bytes, the broker's): 20000 UUIDv7s take 780 kB of JSON.
  const bool id128 =
      s.mode == ProducerStream::Mode::kUuid7 || s.mode == ProducerStream::Mode::kUlid;
  if (id128 && s.batch_size > kMaxId128BatchSize) {
    return std::unexpected(KeyError(
        at + ".batch_size", "must be between 1 and " + std::to_string(kMaxId128BatchSize) +
                                " for mode uuid7 or ulid, got " + std::to_string(s.batch_size)));
  }
  if (!has_batch_size) {
    s.batch_size =
        s.mode == ProducerStream::Mode::kSegment ? kDefaultSegmentBatchSize : kDefaultListBatchSize;
  }
  return {};
}

// One entry of producer.streams, `at` its key ("producer.streams[i]").
[[nodiscard]] Result<ProducerStream> ParseStream(const YAML::Node& e, const std::string& at) {
  if (!e.IsMap()) {
    return std::unexpected(KeyError(at, "expected a mapping {tag, mode, batch_size}"));
  }
  ProducerStream s;
  bool has_tag = false;
  bool has_batch_size = false;
  std::set<std::string> seen;
  for (const auto& kv : e) {
    const std::string name = kv.first.as<std::string>();
    const std::string k = at + "." + name;
    if (!seen.insert(name).second) return std::unexpected(KeyError(k, "duplicate key"));
    if (!kv.second.IsScalar()) return std::unexpected(KeyError(k, "expected a scalar"));
    const std::string& v = kv.second.Scalar();
    if (name == "tag") {
      if (auto r = CheckTag(v); !r) return std::unexpected(KeyError(k, r.error().message));
      s.tag = v;
      has_tag = true;
    } else if (name == "mode") {
      auto mode = ParseStreamMode(v, k);
      if (!mode) return std::unexpected(mode.error());
      s.mode = *mode;
    } else if (name == "batch_size") {
      auto batch_size = ParseStreamBatchSize(v, k);
      if (!batch_size) return std::unexpected(batch_size.error());
      s.batch_size = *batch_size;
      has_batch_size = true;
    } else {
      return std::unexpected(KeyError(k, "unknown key"));
    }
  }
  if (!has_tag) return std::unexpected(KeyError(at + ".tag", "required"));
  if (auto r = SettleStreamBatchSize(s, has_batch_size, at); !r) return std::unexpected(r.error());
  return s;
}

// producer.streams: a list of {tag, mode, batch_size}; errors name producer.streams[i].<key>.
[[nodiscard]] Result<void> SetStreams(const YAML::Node& n, Config& c) {
  const std::string key = "producer.streams";
  if (n.IsNull()) {
    c.producer.streams.clear();
    return {};
  }
  if (!n.IsSequence()) {
    return std::unexpected(KeyError(key, "expected a list of {tag, mode, batch_size}"));
  }
  std::vector<ProducerStream> streams;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = key + "[" + std::to_string(i) + "]";
    auto s = ParseStream(n[i], at);
    if (!s) return std::unexpected(s.error());
    for (size_t j = 0; j < streams.size(); ++j) {
      if (streams[j].tag == s->tag && streams[j].mode == s->mode) {
        return std::unexpected(KeyError(at, "repeats the tag and mode of " + key + "[" +
                                                std::to_string(j) + "]"));
      }
    }
    streams.push_back(std::move(*s));
  }
  c.producer.streams = std::move(streams);
  return {};
}

// datacenter.peers: a list of kafka.bootstrap strings (host:port[,host:port]).
[[nodiscard]] Result<void> SetPeers(const YAML::Node& n, Config& c) {
  const std::string key = "datacenter.peers";
  if (n.IsNull()) {
    c.datacenter.peers.clear();
    return {};
  }
  if (!n.IsSequence()) {
    return std::unexpected(KeyError(key, "expected a list of kafka.bootstrap strings"));
  }
  std::vector<std::string> peers;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = key + "[" + std::to_string(i) + "]";
    if (!n[i].IsScalar() || n[i].Scalar().empty()) {
      return std::unexpected(KeyError(at, "expected host:port[,host:port]"));
    }
    peers.push_back(n[i].Scalar());
  }
  c.datacenter.peers = std::move(peers);
  return {};
}

// The table of every key: long, and best read as the one list of keys it is.
std::vector<Field> AllFields() {
  std::vector<Field> f;
  f.push_back(StringField("node.id", kByAll, [](Config& c, const std::string& s) -> Result<void> {
    if (s.empty() || s.size() > 128)
      return Fail(Code::kInvalidArgument, "must be 1-128 characters");
    c.node.id = s;
    return {};
  }));
  f.push_back(
      StringField("http.listen", kByAll, [](Config& c, const std::string& s) -> Result<void> {
        auto hp = ParseHostPort(s);
        if (!hp) return std::unexpected(hp.error());
        c.http.listen = s;
        c.http.listen_set = true;
        return {};
      }));
  f.push_back(IntField("http.threads", kByAll, 1, 256,
                       [](Config& c, int64_t v) { c.http.threads = static_cast<int>(v); }));
  f.push_back(IntField("http.max_batch", kByIdServers, 1, 1000000,
                       [](Config& c, int64_t v) { c.http.max_batch = v; }));
  f.push_back(IntField("http.header_limit_bytes", kByAll, 1024, 1 << 20,
                       [](Config& c, int64_t v) { c.http.header_limit_bytes = v; }));
  f.push_back(IntField("http.body_limit_bytes", kByAll, 1024, 16 << 20,
                       [](Config& c, int64_t v) { c.http.body_limit_bytes = v; }));
  f.push_back(IntField("http.idle_timeout_ms", kByAll, 100, 3600000,
                       [](Config& c, int64_t v) { c.http.idle_timeout_ms = v; }));
  f.push_back(IntField("http.max_connections", kByAll, 1, 1000000,
                       [](Config& c, int64_t v) { c.http.max_connections = static_cast<int>(v); }));
  f.push_back(IntField("http.status_history_interval_ms", kByIdServers, 100, 60000,
                       [](Config& c, int64_t v) { c.http.status_history_interval_ms = v; }));
  f.push_back(
      StringField("state.path", kByAll, [](Config& c, const std::string& s) -> Result<void> {
        if (s.empty()) return Fail(Code::kInvalidArgument, "must not be empty");
        c.state.path = s;
        return {};
      }));
  f.push_back(
      StringField("admin.token", kByIdServers, [](Config& c, const std::string& s) -> Result<void> {
        if (!s.empty() && s.size() < 16) {
          return Fail(Code::kInvalidArgument,
                      "must be at least 16 characters (or empty to generate one)");
        }
        c.admin.token = s;
        return {};
      }));
  f.push_back(StringField("admin.token_file", kByIdServers,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (s.empty()) return Fail(Code::kInvalidArgument, "must not be empty");
                            c.admin.token_file = s;
                            return {};
                          }));
  f.push_back(BoolField("segment.auto_create", kByStandalone | kByAllocator,
                        [](Config& c, bool v) { c.segment.auto_create = v; }));
  f.push_back(StringField("segment.default_id_mode", kByStandalone | kByAllocator,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (s != "plain" && s != "obfuscated" && s != "obfuscated_time") {
                              return Fail(Code::kInvalidArgument,
                                          "must be plain, obfuscated or obfuscated_time");
                            }
                            c.segment.default_id_mode = s;
                            return {};
                          }));
  f.push_back(IntField("segment.default_step", kByStandalone | kByAllocator, 1, 1000000000,
                       [](Config& c, int64_t v) { c.segment.default_step = v; }));
  f.push_back(IntField("segment.max_step", kByIdServers | kByAllocator, 1, 1000000000,
                       [](Config& c, int64_t v) { c.segment.max_step = v; }));
  f.push_back(IntField("segment.preload_percent", kByIdServers, 1, 99, [](Config& c, int64_t v) {
    c.segment.preload_percent = static_cast<int>(v);
  }));
  f.push_back(IntField("segment.wait_ms", kByIdServers, 0, 60000,
                       [](Config& c, int64_t v) { c.segment.wait_ms = v; }));
  f.push_back(IntField("segment.fetch_threads", kByStandalone, 1, 64, [](Config& c, int64_t v) {
    c.segment.fetch_threads = static_cast<int>(v);
  }));
  f.push_back(IntField("segment.retry_after_s", kByIdServers, 1, 3600, [](Config& c, int64_t v) {
    c.segment.retry_after_s = static_cast<int>(v);
  }));
  f.push_back(IntField("snowflake.worker_id", kByStandalone, 0, (1 << 22) - 1,
                       [](Config& c, int64_t v) { c.snowflake.worker_id = v; }));
  f.push_back(IntField("snowflake.epoch_ms", kBySnowflakeIssuers, 0, kMaxInt,
                       [](Config& c, int64_t v) { c.snowflake.epoch_ms = v; }));
  f.push_back(
      IntField("snowflake.timestamp_bits", kBySnowflakeIssuers, 20, 61,
               [](Config& c, int64_t v) { c.snowflake.timestamp_bits = static_cast<int>(v); }));
  f.push_back(IntField("snowflake.worker_bits", kByAll, 1, 22, [](Config& c, int64_t v) {
    c.snowflake.worker_bits = static_cast<int>(v);
  }));
  f.push_back(
      IntField("snowflake.sequence_bits", kBySnowflakeIssuers, 1, 22,
               [](Config& c, int64_t v) { c.snowflake.sequence_bits = static_cast<int>(v); }));
  f.push_back(IntField("snowflake.time_unit_ms", kBySnowflakeIssuers, 1, 60000,
                       [](Config& c, int64_t v) { c.snowflake.time_unit_ms = v; }));
  f.push_back(BoolField("snowflake.random_sequence_start", kBySnowflakeIssuers,
                        [](Config& c, bool v) { c.snowflake.random_sequence_start = v; }));
  f.push_back(IntField("snowflake.max_backward_ms", kBySnowflakeIssuers, 0, 1000,
                       [](Config& c, int64_t v) { c.snowflake.max_backward_ms = v; }));
  f.push_back(IntField("snowflake.persist_interval_ms", kBySnowflakeIssuers, 10, 60000,
                       [](Config& c, int64_t v) { c.snowflake.persist_interval_ms = v; }));
  f.push_back(IntField("snowflake.reserve_ms", kBySnowflakeIssuers, 20, 600000,
                       [](Config& c, int64_t v) { c.snowflake.reserve_ms = v; }));
  f.push_back(IntField("snowflake.max_startup_wait_ms", kBySnowflakeIssuers, 0, 3600000,
                       [](Config& c, int64_t v) { c.snowflake.max_startup_wait_ms = v; }));
  f.push_back(StringField("kafka.bootstrap", kByCluster,
                          [](Config& c, const std::string& s) -> Result<void> {
                            c.kafka.bootstrap = s;
                            return {};
                          }));
  f.push_back(StringField("kafka.topic_prefix", kByCluster,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (s.empty() || s.size() > 200)
                              return Fail(Code::kInvalidArgument, "must be 1-200 characters");
                            for (char ch : s) {
                              if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' &&
                                  ch != '_' && ch != '-') {
                                return Fail(Code::kInvalidArgument, "may hold only [A-Za-z0-9._-]");
                              }
                            }
                            c.kafka.topic_prefix = s;
                            return {};
                          }));
  f.push_back(IntField("kafka.partitions", kByCluster, 1, 10000,
                       [](Config& c, int64_t v) { c.kafka.partitions = static_cast<int>(v); }));
  f.push_back(IntField("kafka.reply_partitions", kByCluster, 1, 10000, [](Config& c, int64_t v) {
    c.kafka.reply_partitions = static_cast<int>(v);
  }));
  f.push_back(
      IntField("kafka.reply_partition", kByLeaseHolders, -1, 9999,
               [](Config& c, int64_t v) { c.kafka.reply_partition = static_cast<int>(v); }));
  f.push_back(IntField("kafka.replication_factor", kByCluster, 0, 16, [](Config& c, int64_t v) {
    c.kafka.replication_factor = static_cast<int>(v);
  }));
  f.push_back(BoolField("kafka.allow_unreplicated", kByCluster,
                        [](Config& c, bool v) { c.kafka.allow_unreplicated = v; }));
  f.push_back(IntField("kafka.request_timeout_ms", kByLeaseHolders, 50, 600000,
                       [](Config& c, int64_t v) { c.kafka.request_timeout_ms = v; }));
  f.push_back(IntField("kafka.request_attempts", kByLeaseHolders, 1, 100, [](Config& c, int64_t v) {
    c.kafka.request_attempts = static_cast<int>(v);
  }));
  f.push_back(IntField("kafka.session_timeout_ms", kByAllocator, 1000, 300000,
                       [](Config& c, int64_t v) { c.kafka.session_timeout_ms = v; }));
  f.push_back(StringField(
      "kafka.group_protocol", kByAllocator, [](Config& c, const std::string& s) -> Result<void> {
        if (s != "classic" && s != "consumer" && s != "auto")
          return Fail(Code::kInvalidArgument, "must be classic, consumer or auto");
        c.kafka.group_protocol = s;
        return {};
      }));
  f.push_back(IntField("kafka.transaction_timeout_ms", kByAllocator | kByProducer, 2000, 900000,
                       [](Config& c, int64_t v) { c.kafka.transaction_timeout_ms = v; }));
  f.push_back(IntField("allocator.batch_max", kByAllocator, 1, 100000,
                       [](Config& c, int64_t v) { c.allocator.batch_max = static_cast<int>(v); }));
  f.push_back(IntField("sequence.lease_ms", kByAllocator, 0, 60000,
                       [](Config& c, int64_t v) { c.sequence.lease_ms = v; }));
  f.push_back(IntField("sequence.clock_drift_ppm", kByAllocator, 1, 100000,
                       [](Config& c, int64_t v) { c.sequence.clock_drift_ppm = v; }));
  f.push_back(IntField("sequence.lease_margin_ms", kByAllocator, 0, 6000,
                       [](Config& c, int64_t v) { c.sequence.lease_margin_ms = v; }));
  f.push_back(IntField("sequence.lease_renew_ms", kByAllocator, 0, 30000,
                       [](Config& c, int64_t v) { c.sequence.lease_renew_ms = v; }));
  f.push_back(IntField("sequence.idle_release_ms", kByAllocator, 0, 86400000,
                       [](Config& c, int64_t v) { c.sequence.idle_release_ms = v; }));
  f.push_back(BoolField("sequence.owner_hop", kByAllocator | kByGateway,
                        [](Config& c, bool v) { c.sequence.owner_hop = v; }));
  f.push_back(StringField("sequence.hop_address", kByAllocator,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (auto hp = ParseEndpoint(s); !s.empty() && !hp) {
                              return std::unexpected(hp.error());
                            }
                            c.sequence.hop_address = s;
                            return {};
                          }));
  f.push_back(IntField("sequence.raise_ahead_percent", kByStandalone | kByAllocator, 10, 100,
                       [](Config& c, int64_t v) { c.sequence.raise_ahead_percent = v; }));
  f.push_back(IntField("workers.lease_ttl_ms", kByCluster, 1000, 3600000,
                       [](Config& c, int64_t v) { c.workers.lease_ttl_ms = v; }));
  f.push_back(IntField("workers.renew_interval_ms", kByLeaseHolders, 100, 600000,
                       [](Config& c, int64_t v) { c.workers.renew_interval_ms = v; }));
  f.push_back(IntField("workers.safety_margin_ms", kByLeaseHolders, 0, 600000,
                       [](Config& c, int64_t v) { c.workers.safety_margin_ms = v; }));
  f.push_back(IntField("workers.max_clock_skew_ms", kByAllocator, 0, 600000,
                       [](Config& c, int64_t v) { c.workers.max_clock_skew_ms = v; }));
  f.push_back(IntField("workers.claim_timeout_ms", kByLeaseHolders, 100, 3600000,
                       [](Config& c, int64_t v) { c.workers.claim_timeout_ms = v; }));
  f.push_back(StringField("producer.topic", kByProducer,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (auto r = CheckKafkaName(s); !r) return r;
                            c.producer.topic = s;
                            return {};
                          }));
  f.push_back(StringField("producer.group", kByProducer,
                          [](Config& c, const std::string& s) -> Result<void> {
                            if (auto r = CheckKafkaName(s); !r) return r;
                            c.producer.group = s;
                            return {};
                          }));
  f.push_back(IntField("producer.batches_ahead", kByProducer, 1, 10000,
                       [](Config& c, int64_t v) { c.producer.batches_ahead = v; }));
  f.push_back(IntField("producer.check_interval_ms", kByProducer, 10, 600000,
                       [](Config& c, int64_t v) { c.producer.check_interval_ms = v; }));
  f.push_back(Field{"producer.streams", SetStreams, kByProducer});
  f.push_back(Field{"kafka.properties", SetKafkaProperties, kByCluster});
  f.push_back(Field{
      "http.tls", SetHttpTls, kByAll, std::nullopt, {"cert_file", "key_file", "client_ca_file"}});
  f.push_back(IntField("datacenter.index", kByCluster, 0, kMaxDatacenters - 1,
                       [](Config& c, int64_t v) { c.datacenter.index = v; }));
  f.push_back(IntField("datacenter.count", kByCluster, 1, kMaxDatacenters,
                       [](Config& c, int64_t v) { c.datacenter.count = v; }));
  f.push_back(Field{"datacenter.peers", SetPeers, kByCluster});
  f.push_back(IntField("datacenter.peer_check_timeout_ms", kByCluster, 100, 60000,
                       [](Config& c, int64_t v) { c.datacenter.peer_check_timeout_ms = v; }));
  f.push_back(StringField("log.level", kByAll, [](Config& c, const std::string& s) -> Result<void> {
    if (s != "trace" && s != "debug" && s != "info" && s != "warn" && s != "error") {
      return Fail(Code::kInvalidArgument, "expected one of trace, debug, info, warn, error; got '" + s + "'");
    }
    c.log.level = s;
    return {};
  }));
  f.push_back(
      StringField("log.format", kByAll, [](Config& c, const std::string& s) -> Result<void> {
        if (s != "text" && s != "json") {
          return Fail(Code::kInvalidArgument, "expected text or json; got '" + s + "'");
        }
        c.log.format = s;
        return {};
      }));
  return f;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "kleaf";
  return buf;
}

// datacenter.index and datacenter.count: an index below the count, and a worker id for each.
[[nodiscard]] Result<void> CheckDatacenterNumbers(const Config& c) {
  const auto& d = c.datacenter;
  if (d.index >= d.count) {
    return Fail(Code::kInvalidArgument, "datacenter.index: must be below datacenter.count (" +
                                            std::to_string(d.count) + "), got " +
                                            std::to_string(d.index) +
                                            "; datacenters are numbered 0 to count-1");
  }
  const int64_t workers = int64_t{1} << c.snowflake.worker_bits;
  if (d.count > workers) {
    return Fail(Code::kInvalidArgument,
                "datacenter.count: " + std::to_string(d.count) +
                    " datacenters cannot each have a worker id of the 2^snowflake.worker_bits = " +
                    std::to_string(workers) + "; use more worker bits or fewer datacenters");
  }
  return {};
}

// datacenter.peers: only with other datacenters, at most one per other datacenter, never this
// cluster itself.
[[nodiscard]] Result<void> CheckDatacenterPeers(const Config& c) {
  const auto& d = c.datacenter;
  if (d.count == 1 && !d.peers.empty()) {
    return Fail(Code::kInvalidArgument,
                "datacenter.peers: given, but datacenter.count is 1; set datacenter.count to the "
                "number of datacenters");
  }
  if (static_cast<int64_t>(d.peers.size()) > d.count - 1) {
    return Fail(Code::kInvalidArgument, "datacenter.peers: lists " +
                                            std::to_string(d.peers.size()) +
                                            " peers, more than the other datacenters (" +
                                            std::to_string(d.count - 1) + ")");
  }
  for (size_t i = 0; i < d.peers.size(); ++i) {
    if (d.peers[i] == c.kafka.bootstrap) {
      return Fail(Code::kInvalidArgument, "datacenter.peers[" + std::to_string(i) +
                                              "]: is this cluster's own kafka.bootstrap");
    }
  }
  return {};
}

// With more than one datacenter: no obfuscated default mode, and segment batches small enough to
// list their IDs.
[[nodiscard]] Result<void> CheckMultiDatacenterModes(const Config& c) {
  const auto& d = c.datacenter;
  if (d.count == 1) return {};
  if (c.segment.default_id_mode != "plain") {
    return Fail(Code::kInvalidArgument,
                "segment.default_id_mode: " + c.segment.default_id_mode +
                    " tags are refused with more than one datacenter (datacenter.count " +
                    std::to_string(d.count) +
                    "): each cluster's permutation key is its own, so two datacenters' permuted "
                    "IDs could meet; use plain");
  }
  for (size_t i = 0; i < c.producer.streams.size(); ++i) {
    const auto& s = c.producer.streams[i];
    if (s.mode == ProducerStream::Mode::kSegment && s.batch_size > kMaxListedSegmentBatchSize) {
      return Fail(Code::kInvalidArgument,
                  "producer.streams[" + std::to_string(i) + "].batch_size: must be at most " +
                      std::to_string(kMaxListedSegmentBatchSize) +
                      " with more than one datacenter (a segment batch then lists its IDs), "
                      "got " +
                      std::to_string(s.batch_size));
    }
  }
  return {};
}

// The datacenter keys against each other and against what they split (worker ids, segment IDs).
Result<void> CheckDatacenter(const Config& c) {
  if (auto r = CheckDatacenterNumbers(c); !r) return r;
  if (auto r = CheckDatacenterPeers(c); !r) return r;
  return CheckMultiDatacenterModes(c);
}

// Checks that span several keys; each message names the key to change.
[[nodiscard]] Result<void> CrossCheck(const Config& c) {
  if (auto r = CheckHttpTls(c.http.tls); !r) return r;
  const auto& s = c.snowflake;
  if (s.timestamp_bits + s.worker_bits + s.sequence_bits != 63) {
    return Fail(Code::kInvalidArgument,
                "snowflake.timestamp_bits: timestamp_bits + worker_bits + sequence_bits must be 63, got " +
                    std::to_string(s.timestamp_bits + s.worker_bits + s.sequence_bits));
  }
  if (s.worker_id >= (int64_t{1} << s.worker_bits)) {
    return Fail(Code::kInvalidArgument, "snowflake.worker_id: must be below 2^worker_bits = " +
                                            std::to_string(int64_t{1} << s.worker_bits) + ", got " +
                                            std::to_string(s.worker_id));
  }
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (s.epoch_ms > now_ms) {
    return Fail(Code::kInvalidArgument, "snowflake.epoch_ms: must not be in the future");
  }
  if (s.reserve_ms > s.max_startup_wait_ms && s.max_startup_wait_ms != 0) {
    // A kill -9 leaves the durable mark up to reserve_ms ahead; startup must be allowed to wait it out.
    return Fail(Code::kInvalidArgument,
                "snowflake.max_startup_wait_ms: must be at least snowflake.reserve_ms (" +
                    std::to_string(s.reserve_ms) + ")");
  }
  if (s.persist_interval_ms * 2 > s.reserve_ms) {
    return Fail(Code::kInvalidArgument,
                "snowflake.reserve_ms: must be at least twice snowflake.persist_interval_ms");
  }
  if (c.kafka.reply_partition >= c.kafka.reply_partitions) {
    return Fail(Code::kInvalidArgument, "kafka.reply_partition: must be below kafka.reply_partitions");
  }
  const auto& q = c.sequence;
  if (q.lease_ms != 0 && q.lease_ms < 1000) {
    return Fail(Code::kInvalidArgument,
                "sequence.lease_ms: must be 0 (no lease held) or between 1000 and 60000, got " +
                    std::to_string(q.lease_ms));
  }
  if (const int64_t most = q.lease_ms == 0 ? 1000 : q.lease_ms / 10; q.lease_margin_ms > most) {
    return Fail(
        Code::kInvalidArgument,
        "sequence.lease_margin_ms: must be at most " + std::to_string(most) +
            (q.lease_ms == 0 ? " when sequence.lease_ms is 0" : " (a tenth of sequence.lease_ms)") +
            ", got " + std::to_string(q.lease_margin_ms));
  }
  if (q.lease_ms > 0) {
    // The lease's settings: a node that holds none (L 0) has nothing to renew or release.
    const double hold_ms =
        static_cast<double>(q.lease_ms) * (1 - static_cast<double>(q.clock_drift_ppm) / 1e6) -
        static_cast<double>(q.lease_margin_ms);
    const auto most_renew = static_cast<int64_t>(hold_ms / 2);
    if (q.lease_renew_ms != 0 && (q.lease_renew_ms < 100 || q.lease_renew_ms > most_renew)) {
      return Fail(Code::kInvalidArgument,
                  "sequence.lease_renew_ms: must be 0 (a third of sequence.lease_ms) or between "
                  "100 and " +
                      std::to_string(most_renew) + " (half of what a lease lasts, L(1-ρ)-δ), got " +
                      std::to_string(q.lease_renew_ms));
    }
    if (q.RenewIntervalMs() > most_renew) {
      return Fail(Code::kInvalidArgument,
                  "sequence.lease_ms: a lease of L(1-ρ)-δ = " + std::to_string(int64_t(hold_ms)) +
                      " ms is below twice its renewal interval (" +
                      std::to_string(q.RenewIntervalMs()) + " ms): lower the margin or the drift");
    }
    if (q.idle_release_ms != 0 && q.idle_release_ms < 3 * q.RenewIntervalMs()) {
      return Fail(Code::kInvalidArgument,
                  "sequence.idle_release_ms: must be 0 (never) or at least three renewal "
                  "intervals (" +
                      std::to_string(3 * q.RenewIntervalMs()) + " ms), got " +
                      std::to_string(q.idle_release_ms));
    }
  }
  const auto& w = c.workers;
  if (w.renew_interval_ms * 2 + w.safety_margin_ms > w.lease_ttl_ms) {
    return Fail(Code::kInvalidArgument,
                "workers.lease_ttl_ms: must be at least 2 * workers.renew_interval_ms + "
                "workers.safety_margin_ms (" +
                    std::to_string(w.renew_interval_ms * 2 + w.safety_margin_ms) + ")");
  }
  if (w.safety_margin_ms < w.max_clock_skew_ms) {
    // A recycled id starts after the old lease's end by the allocator's clock; the old holder
    // stops by its own clock, so the margin must cover the largest skew a claim may have.
    return Fail(Code::kInvalidArgument,
                "workers.safety_margin_ms: must be at least workers.max_clock_skew_ms");
  }
  if (c.segment.default_step > c.segment.max_step) {
    return Fail(Code::kInvalidArgument, "segment.default_step: must not exceed segment.max_step");
  }
  return CheckDatacenter(c);
}

[[nodiscard]] Result<Config> ParseSections(const YAML::Node& root, const std::vector<Field>& fields,
                                           Config c);
[[nodiscard]] Result<void> ApplyEnvironment(const Environment& env,
                                            const std::vector<Field>& fields, Config& c);
[[nodiscard]] Result<void> ReadTokenFile(Config& c);
constexpr const char* kEnvPrefix = "KLEAF_";

}  // namespace

Config DefaultConfig() {
  Config c;
  c.node.id = HostName();
  return c;
}

Result<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Fail(Code::kInvalidArgument, "expected host:port, got '" + s + "'");
  }
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned char addr[sizeof(in6_addr)];
  if (host != "localhost" && inet_pton(AF_INET, host.c_str(), addr) != 1 &&
      inet_pton(AF_INET6, host.c_str(), addr) != 1) {
    return Fail(Code::kInvalidArgument,
                "expected an IP address or localhost before the port, got '" + host + "'");
  }
  std::string port_text = s.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port > 65535) {
    return Fail(Code::kInvalidArgument, "expected host:port with a port 0-65535, got '" + s + "'");
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

Result<std::pair<std::string, uint16_t>> ParseEndpoint(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Fail(Code::kInvalidArgument, "expected host:port, got '" + s + "'");
  }
  std::string host = s.substr(0, colon);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  unsigned char addr[sizeof(in6_addr)];
  if (bracketed ? inet_pton(AF_INET6, host.c_str(), addr) != 1
                : host.empty() || host.size() > 253 ||
                      host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789.-") != std::string::npos) {
    return Fail(Code::kInvalidArgument,
                "expected a host name, an IPv4 address or a bracketed IPv6 address before the "
                "port, got '" +
                    s + "'");
  }
  std::string port_text = s.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port == 0 || port > 65535) {
    return Fail(Code::kInvalidArgument, "expected host:port with a port 1-65535, got '" + s + "'");
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

bool AllowedKafkaProperty(const std::string& name) {
  static const std::set<std::string> kExact = {
      "security.protocol",       "enable.ssl.certificate.verification",
      "client.dns.lookup",       "client.rack",
      "connections.max.idle.ms", "debug"};
  static const char* const kPrefixes[] = {"sasl.", "ssl.", "ssl_", "socket.", "broker.address."};
  if (kExact.contains(name)) return true;
  for (const char* prefix : kPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

Result<Config> ParseConfig(const std::string& yaml_text, const Environment& env) {
  Config c = DefaultConfig();
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Fail(Code::kInvalidArgument, std::string("config is not valid YAML: ") + e.what());
  }
  if (!root.IsNull() && !root.IsMap()) {
    return Fail(Code::kInvalidArgument, "config: expected a mapping of sections");
  }
  static const std::vector<Field> fields = AllFields();
  if (root.IsMap()) {
    try {
      auto parsed = ParseSections(root, fields, c);
      if (!parsed) return parsed;
      c = std::move(*parsed);
    } catch (const YAML::Exception& e) {
      // e.g. a key that is a list or a mapping: not a name
      return Fail(Code::kInvalidArgument,
                  std::string("config: keys must be plain names (") + e.what() + ")");
    }
  }
  if (auto applied = ApplyEnvironment(env, fields, c); !applied) {
    return std::unexpected(applied.error());
  }
  if (auto token = ReadTokenFile(c); !token) return std::unexpected(token.error());
  auto check = CrossCheck(c);
  if (!check) return std::unexpected(check.error());
  return c;
}

Environment ConfigEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = entry.substr(0, eq);
    if (name.starts_with(kEnvPrefix) && name.find("__") != std::string_view::npos) {
      env.emplace_back(std::string(name), std::string(entry.substr(eq + 1)));
    }
  }
  return env;
}

namespace {

[[nodiscard]] Result<void> ApplyEnvironment(const Environment& env,
                                            const std::vector<Field>& fields, Config& c) {
  for (const auto& [name, value] : env) {
    // KLEAF_SEGMENT__MAX_STEP -> segment.max_step
    const std::string_view rest = std::string_view(name).substr(std::strlen(kEnvPrefix));
    const size_t sep = rest.find("__");
    std::string key;
    for (char ch : rest.substr(0, sep)) key += static_cast<char>(std::tolower(ch));
    key += '.';
    for (char ch : rest.substr(sep == std::string_view::npos ? rest.size() : sep + 2)) {
      key += static_cast<char>(std::tolower(ch));
    }
    const Field* field = nullptr;
    for (const auto& f : fields) {
      if (f.key == key) field = &f;
    }
    if (sep == std::string_view::npos || field == nullptr) {
      return Fail(
          Code::kInvalidArgument,
          name + ": not a config key (KLEAF_<SECTION>__<KEY>, e.g. KLEAF_KAFKA__BOOTSTRAP)");
    }
    // A list or a mapping is YAML: flow text (`{a: b}`, `[x]`, leading blanks allowed), or block
    // text over several lines (what `kubectl create secret --from-file` holds: `a: b` lines). A
    // single line that is not flow text is the value as written (a token may hold '#' or ': ',
    // which YAML would read otherwise), and so is multi-line text that YAML reads as a scalar.
    YAML::Node node(value);
    const size_t first = value.find_first_not_of(" \t\r\n");
    const bool flow = first != std::string::npos && (value[first] == '[' || value[first] == '{');
    const bool lines = value.find('\n') != std::string::npos;
    if (flow || lines) {
      try {
        YAML::Node parsed = YAML::Load(value);
        if (flow || parsed.IsMap() || parsed.IsSequence()) node = parsed;
      } catch (const YAML::Exception& e) {
        if (flow) return Fail(Code::kInvalidArgument, name + ": not valid YAML: " + e.what());
      }
    }
    if (auto r = field->set(node, c); !r) {
      return Fail(Code::kInvalidArgument, name + " (" + r.error().message + ")");
    }
  }
  return {};
}

// admin.token_file: the token is the file's content up to its first line end.
[[nodiscard]] Result<void> ReadTokenFile(Config& c) {
  if (c.admin.token_file.empty()) return {};
  if (!c.admin.token.empty()) {
    return Fail(Code::kInvalidArgument,
                "admin.token_file: set together with admin.token; keep one of the two");
  }
  std::ifstream in(c.admin.token_file);
  std::string token;
  if (!in || !std::getline(in, token)) {
    return Fail(Code::kInvalidArgument,
                "admin.token_file: cannot read '" + c.admin.token_file + "'");
  }
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.size() < 16) {
    return Fail(Code::kInvalidArgument, "admin.token_file: the token in '" + c.admin.token_file +
                                            "' must be at least 16 characters");
  }
  c.admin.token = std::move(token);
  return {};
}

[[nodiscard]] Result<Config> ParseSections(const YAML::Node& root, const std::vector<Field>& fields,
                                           Config c) {
  // yaml-cpp keeps every pair of a mapping, repeated keys too; a repeated key would otherwise be
  // merged silently (which of two values wins depends on the reader), so it is an error.
  std::set<std::string> seen;
  for (const auto& section : root) {
    std::string name = section.first.as<std::string>();
    if (!seen.insert(name).second) return Fail(Code::kInvalidArgument, name + ": duplicate key");
    const YAML::Node& body = section.second;
    bool known_section = false;
    for (const auto& f : fields) {
      if (f.key.starts_with(name + ".")) known_section = true;
    }
    if (!known_section) return Fail(Code::kInvalidArgument, name + ": unknown key");
    if (body.IsNull()) continue;
    if (!body.IsMap()) return Fail(Code::kInvalidArgument, name + ": expected a mapping");
    for (const auto& entry : body) {
      std::string key = name + "." + entry.first.as<std::string>();
      if (!seen.insert(key).second) return Fail(Code::kInvalidArgument, key + ": duplicate key");
      const Field* field = nullptr;
      for (const auto& f : fields) {
        if (f.key == key) field = &f;
      }
      if (field == nullptr) return Fail(Code::kInvalidArgument, key + ": unknown key");
      auto r = field->set(entry.second, c);
      if (!r) return std::unexpected(r.error());
    }
  }
  return c;
}

}  // namespace

Result<Config> LoadConfigFile(const std::string& path, const Environment& env) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Fail(Code::kInvalidArgument, "cannot read config file '" + path + "' (not a file)");
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || in.bad()) return Fail(Code::kInvalidArgument, "cannot read config file '" + path + "'");
  auto r = ParseConfig(ss.str(), env);
  if (!r) return Fail(r.error().code, path + ": " + r.error().message);
  return r;
}

bool IssuesSnowflakeIds(Role role) {
  return role == Role::kStandalone || role == Role::kGateway || role == Role::kProducer;
}

Result<void> CheckKafkaBootstrap(const Config& c) {
  if (c.kafka.bootstrap.empty()) {
    return Fail(Code::kInvalidArgument,
                "kafka.bootstrap: required for this subcommand (host:port[,host:port])");
  }
  return {};
}

Result<void> CheckConfigFor(Role role, const Config& c) {
  if (role != Role::kStandalone) {
    if (auto r = CheckKafkaBootstrap(c); !r) return r;
  }
  if (role == Role::kStandalone && c.datacenter.count > 1) {
    return Fail(Code::kInvalidArgument,
                "datacenter.count: more than one datacenter needs the cluster shape (kleaf "
                "allocator and gateway), whose layout topic records and checks it; a standalone "
                "node has none. Remove the datacenter section or run a cluster per datacenter");
  }
  if (role == Role::kAllocator && c.sequence.owner_hop && !c.http.listen_set) {
    return Fail(Code::kInvalidArgument,
                "sequence.owner_hop: needs http.listen, the address the hop is served on");
  }
  if (role == Role::kAllocator && c.sequence.owner_hop && c.sequence.lease_ms == 0) {
    return Fail(Code::kInvalidArgument,
                "sequence.owner_hop: answers only under a lease; sequence.lease_ms is 0");
  }
  if (role == Role::kProducer && c.producer.streams.empty()) {
    return Fail(Code::kInvalidArgument,
                "producer.streams: no stream configured (a list of {tag, mode, batch_size})");
  }
  return {};
}

std::vector<KeyReference> KeyReferences() {
  static const std::pair<unsigned, Role> kRoleBits[] = {{kByStandalone, Role::kStandalone},
                                                        {kByAllocator, Role::kAllocator},
                                                        {kByGateway, Role::kGateway},
                                                        {kByProducer, Role::kProducer}};
  std::vector<KeyReference> keys;
  for (const Field& f : AllFields()) {
    std::vector<Role> read_by;
    for (const auto& [bit, role] : kRoleBits) {
      if (f.read_by & bit) read_by.push_back(role);
    }
    if (f.sub_keys.empty()) {
      keys.push_back({f.key, f.range, read_by});
    } else {
      for (const std::string& sub : f.sub_keys)
        keys.push_back({f.key + "." + sub, f.range, read_by});
    }
  }
  return keys;
}

bool IsSecretKey(std::string_view key) {
  std::string name;
  for (char ch : key) name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // A path to a secret (admin.token_file, ssl.keystore.location) is not one.
  if (name.ends_with("_file") || name.ends_with(".location")) return false;
  for (std::string_view word : {"password", "passphrase", "secret", "token"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return name.ends_with("ssl.key.pem");  // a private key inline (librdkafka's ssl.key.pem)
}

namespace {

std::string_view StreamModeName(ProducerStream::Mode mode) {
  switch (mode) {
    case ProducerStream::Mode::kSegment:
      return "segment";
    case ProducerStream::Mode::kSnowflake:
      return "snowflake";
    case ProducerStream::Mode::kUuid7:
      return "uuid7";
    case ProducerStream::Mode::kUlid:
      return "ulid";
  }
  return "segment";
}

// `name: value`, the value masked when `dotted` (the key's full name) is a secret that is set.
template <typename T>
void EmitNamed(YAML::Emitter& out, const std::string& name, const std::string& dotted,
               const T& value) {
  out << YAML::Key << name << YAML::Value;
  if constexpr (std::is_convertible_v<T, std::string_view>) {
    const std::string_view text(value);
    if (!text.empty() && IsSecretKey(dotted)) {
      out << std::string(kMaskedSecret);
    } else {
      out << std::string(text);
    }
  } else {
    out << value;
  }
}

// A key of a section by its dotted name ("http.threads" is `threads:` in `http:`).
template <typename T>
void EmitKey(YAML::Emitter& out, const std::string& dotted, const T& value) {
  EmitNamed(out, dotted.substr(dotted.rfind('.') + 1), dotted, value);
}

// An empty mapping or list reads better as `{}` or `[]` on the key's line.
void BeginMap(YAML::Emitter& out, bool empty) {
  if (empty) out << YAML::Flow;
  out << YAML::BeginMap;
}
void BeginSeq(YAML::Emitter& out, bool empty) {
  if (empty) out << YAML::Flow;
  out << YAML::BeginSeq;
}

void EmitHttp(YAML::Emitter& out, const Http& h) {
  out << YAML::Key << "http" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "http.listen", h.listen);
  if (!h.listen_set) {
    out << YAML::Comment("the default: allocators and producers serve no HTTP without the key");
  }
  EmitKey(out, "http.threads", h.threads);
  EmitKey(out, "http.max_batch", h.max_batch);
  EmitKey(out, "http.header_limit_bytes", h.header_limit_bytes);
  EmitKey(out, "http.body_limit_bytes", h.body_limit_bytes);
  EmitKey(out, "http.idle_timeout_ms", h.idle_timeout_ms);
  EmitKey(out, "http.max_connections", h.max_connections);
  EmitKey(out, "http.status_history_interval_ms", h.status_history_interval_ms);
  out << YAML::Key << "tls" << YAML::Value;
  BeginMap(out, h.tls.cert_file.empty() && h.tls.key_file.empty() && h.tls.client_ca_file.empty());
  if (!h.tls.cert_file.empty()) EmitKey(out, "http.tls.cert_file", h.tls.cert_file);
  if (!h.tls.key_file.empty()) EmitKey(out, "http.tls.key_file", h.tls.key_file);
  if (!h.tls.client_ca_file.empty()) {
    EmitKey(out, "http.tls.client_ca_file", h.tls.client_ca_file);
  }
  out << YAML::EndMap << YAML::EndMap;
}

void EmitSegmentAndSnowflake(YAML::Emitter& out, const Segment& g, const Snowflake& s) {
  out << YAML::Key << "segment" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "segment.auto_create", g.auto_create);
  EmitKey(out, "segment.default_id_mode", g.default_id_mode);
  EmitKey(out, "segment.default_step", g.default_step);
  EmitKey(out, "segment.max_step", g.max_step);
  EmitKey(out, "segment.preload_percent", g.preload_percent);
  EmitKey(out, "segment.wait_ms", g.wait_ms);
  EmitKey(out, "segment.fetch_threads", g.fetch_threads);
  EmitKey(out, "segment.retry_after_s", g.retry_after_s);
  out << YAML::EndMap;
  out << YAML::Key << "snowflake" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "snowflake.worker_id", s.worker_id);
  EmitKey(out, "snowflake.epoch_ms", s.epoch_ms);
  EmitKey(out, "snowflake.timestamp_bits", s.timestamp_bits);
  EmitKey(out, "snowflake.worker_bits", s.worker_bits);
  EmitKey(out, "snowflake.sequence_bits", s.sequence_bits);
  EmitKey(out, "snowflake.time_unit_ms", s.time_unit_ms);
  EmitKey(out, "snowflake.random_sequence_start", s.random_sequence_start);
  EmitKey(out, "snowflake.max_backward_ms", s.max_backward_ms);
  EmitKey(out, "snowflake.persist_interval_ms", s.persist_interval_ms);
  EmitKey(out, "snowflake.reserve_ms", s.reserve_ms);
  EmitKey(out, "snowflake.max_startup_wait_ms", s.max_startup_wait_ms);
  out << YAML::EndMap;
}

void EmitKafka(YAML::Emitter& out, const Kafka& k) {
  out << YAML::Key << "kafka" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "kafka.bootstrap", k.bootstrap);
  EmitKey(out, "kafka.topic_prefix", k.topic_prefix);
  // Unset (0) is no value the key takes: the line is left out, the count the topics have applies.
  if (k.partitions != 0) EmitKey(out, "kafka.partitions", k.partitions);
  EmitKey(out, "kafka.reply_partitions", k.reply_partitions);
  EmitKey(out, "kafka.reply_partition", k.reply_partition);
  EmitKey(out, "kafka.replication_factor", k.replication_factor);
  EmitKey(out, "kafka.allow_unreplicated", k.allow_unreplicated);
  EmitKey(out, "kafka.request_timeout_ms", k.request_timeout_ms);
  EmitKey(out, "kafka.request_attempts", k.request_attempts);
  EmitKey(out, "kafka.session_timeout_ms", k.session_timeout_ms);
  EmitKey(out, "kafka.group_protocol", k.group_protocol);
  EmitKey(out, "kafka.transaction_timeout_ms", k.transaction_timeout_ms);
  out << YAML::Key << "properties" << YAML::Value;
  BeginMap(out, k.properties.empty());
  for (const auto& [name, value] : k.properties) {
    EmitNamed(out, name, "kafka.properties." + name, value);
  }
  out << YAML::EndMap << YAML::EndMap;
}

void EmitProducer(YAML::Emitter& out, const Producer& p) {
  out << YAML::Key << "producer" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "producer.topic", p.topic);
  EmitKey(out, "producer.group", p.group);
  EmitKey(out, "producer.batches_ahead", p.batches_ahead);
  EmitKey(out, "producer.check_interval_ms", p.check_interval_ms);
  out << YAML::Key << "streams" << YAML::Value;
  BeginSeq(out, p.streams.empty());
  for (const auto& stream : p.streams) {
    out << YAML::BeginMap;
    out << YAML::Key << "tag" << YAML::Value << stream.tag;
    out << YAML::Key << "mode" << YAML::Value << std::string(StreamModeName(stream.mode));
    out << YAML::Key << "batch_size" << YAML::Value << stream.batch_size;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
}

}  // namespace

std::string EffectiveConfigYaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "node" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "node.id", c.node.id);
  out << YAML::EndMap;
  EmitHttp(out, c.http);
  out << YAML::Key << "state" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "state.path", c.state.path);
  out << YAML::EndMap;
  out << YAML::Key << "admin" << YAML::Value << YAML::BeginMap;
  // With a token file, the token read from it is the file's to show (admin.token beside it would
  // be refused).
  if (c.admin.token_file.empty()) {
    EmitKey(out, "admin.token", c.admin.token);
    if (c.admin.token.empty()) out << YAML::Comment("generated into <state.path>/admin.token");
  } else {
    EmitKey(out, "admin.token_file", c.admin.token_file);
  }
  out << YAML::EndMap;
  EmitSegmentAndSnowflake(out, c.segment, c.snowflake);
  EmitKafka(out, c.kafka);
  out << YAML::Key << "allocator" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "allocator.batch_max", c.allocator.batch_max);
  out << YAML::EndMap;
  out << YAML::Key << "sequence" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "sequence.lease_ms", c.sequence.lease_ms);
  EmitKey(out, "sequence.clock_drift_ppm", c.sequence.clock_drift_ppm);
  EmitKey(out, "sequence.lease_margin_ms", c.sequence.lease_margin_ms);
  EmitKey(out, "sequence.lease_renew_ms", c.sequence.lease_renew_ms);
  EmitKey(out, "sequence.idle_release_ms", c.sequence.idle_release_ms);
  EmitKey(out, "sequence.owner_hop", c.sequence.owner_hop);
  EmitKey(out, "sequence.hop_address", c.sequence.hop_address);
  if (c.sequence.hop_address.empty()) out << YAML::Comment("http.listen's host and port bound");
  EmitKey(out, "sequence.raise_ahead_percent", c.sequence.raise_ahead_percent);
  out << YAML::EndMap;
  out << YAML::Key << "workers" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "workers.lease_ttl_ms", c.workers.lease_ttl_ms);
  EmitKey(out, "workers.renew_interval_ms", c.workers.renew_interval_ms);
  EmitKey(out, "workers.safety_margin_ms", c.workers.safety_margin_ms);
  EmitKey(out, "workers.max_clock_skew_ms", c.workers.max_clock_skew_ms);
  EmitKey(out, "workers.claim_timeout_ms", c.workers.claim_timeout_ms);
  out << YAML::EndMap;
  EmitProducer(out, c.producer);
  out << YAML::Key << "datacenter" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "datacenter.index", c.datacenter.index);
  EmitKey(out, "datacenter.count", c.datacenter.count);
  out << YAML::Key << "peers" << YAML::Value;
  BeginSeq(out, c.datacenter.peers.empty());
  for (const auto& peer : c.datacenter.peers) out << peer;
  out << YAML::EndSeq;
  EmitKey(out, "datacenter.peer_check_timeout_ms", c.datacenter.peer_check_timeout_ms);
  out << YAML::EndMap;
  out << YAML::Key << "log" << YAML::Value << YAML::BeginMap;
  EmitKey(out, "log.level", c.log.level);
  EmitKey(out, "log.format", c.log.format);
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// The words of `text` separated by `separator`.
std::set<std::string, std::less<>> WordsOf(std::string_view text, char separator) {
  std::set<std::string, std::less<>> words;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    words.emplace(text.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

}  // namespace

Result<void> CheckKafkaSasl(const Kafka& k, std::string_view builtin_features,
                            const std::function<std::optional<std::string>()>& host_mechanisms) {
  const auto features = WordsOf(builtin_features, ',');
  auto upper = [](std::string_view v) {
    std::string u;
    for (char ch : v) {
      if (ch != ' ') u += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    return u;
  };
  const std::string prefix = "kafka.properties.";
  // The mechanism and the key that chose it: sasl.mechanism or its alias sasl.mechanisms, or,
  // with neither, librdkafka's default GSSAPI under a SASL security.protocol.
  std::vector<std::pair<std::string, std::string>> chosen;
  for (const char* name : {"sasl.mechanism", "sasl.mechanisms"}) {
    if (auto it = k.properties.find(name); it != k.properties.end()) {
      chosen.emplace_back(prefix + name, upper(it->second));
    }
  }
  std::string defaulted;  // "SASL_SSL without sasl.mechanism means GSSAPI ...; "
  if (chosen.empty()) {
    auto protocol = k.properties.find("security.protocol");
    if (protocol == k.properties.end() || !upper(protocol->second).starts_with("SASL_")) return {};
    chosen.emplace_back(prefix + "security.protocol", "GSSAPI");
    defaulted = protocol->second + " without sasl.mechanism means GSSAPI (librdkafka's default); ";
  }
  const std::string built =
      "the librdkafka kleaf links was built without it (its builtin.features: " +
      std::string(builtin_features) + ")";
  for (const auto& [key, mechanism] : chosen) {
    const std::string at = key + ": " + defaulted;
    if (mechanism == "GSSAPI" && !features.contains("sasl_gssapi")) {
      return Fail(Code::kInvalidArgument, at + "GSSAPI (Kerberos) needs sasl_gssapi, and " + built +
                                              "; use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN");
    }
    const std::optional<std::string> host =
        mechanism == "GSSAPI" && host_mechanisms ? host_mechanisms() : std::nullopt;
    if (host && !WordsOf(*host, ' ').contains("GSSAPI")) {
      return Fail(Code::kInvalidArgument,
                  at +
                      "GSSAPI (Kerberos) needs Cyrus SASL's GSSAPI plugin on this host, which it "
                      "lacks (Cyrus SASL offers: " +
                      (host->empty() ? std::string("nothing") : *host) +
                      "); install it (Debian: libsasl2-modules-gssapi-mit) or use SCRAM-SHA-512, "
                      "SCRAM-SHA-256 or PLAIN");
    }
    if (mechanism != "OAUTHBEARER") continue;
    if (!features.contains("sasl_oauthbearer")) {
      return Fail(Code::kInvalidArgument, at + "OAUTHBEARER needs sasl_oauthbearer, and " + built +
                                              "; use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN");
    }
    auto method = k.properties.find("sasl.oauthbearer.method");
    if (method == k.properties.end() || upper(method->second) != "OIDC") {
      return Fail(Code::kInvalidArgument,
                  at + "OAUTHBEARER is supported only with sasl.oauthbearer.method: oidc; any "
                       "other method needs the application to hand librdkafka its tokens through "
                       "a refresh callback, which kleaf does not have, so no client would ever "
                       "authenticate");
    }
    if (!features.contains("oidc")) {
      return Fail(Code::kInvalidArgument,
                  prefix +
                      "sasl.oauthbearer.method: oidc (for OAUTHBEARER) needs the oidc "
                      "feature (libcurl), and " +
                      built + "; use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN");
    }
  }
  return {};
}

}  // namespace kleaf::config
