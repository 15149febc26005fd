// kleaf's configuration as plain structs with defaults, and the YAML loader that fills them.
// The only component that sees yaml-cpp; everything else receives these structs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace kleaf::config {

struct Node {
  std::string id;  // stable node identity; default: the host name
  bool operator==(const Node&) const = default;
};

// http.tls: HTTPS on the HTTP listener. Both files or neither; client_ca_file adds mutual TLS (a
// client certificate signed by that CA is required). Read at start and again on SIGHUP.
struct HttpTls {
  std::string cert_file;       // PEM certificate chain, the server's first
  std::string key_file;        // PEM private key of that certificate
  std::string client_ca_file;  // PEM CA certificates; empty: no client certificate asked for
  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const HttpTls&) const = default;
};

struct Http {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 picks a free port
  // http.listen was given. Allocators serve /metrics, /healthz, /readyz only then, so that an
  // allocator started with the defaults never takes the port a gateway on the same host expects.
  bool listen_set = false;
  int threads = 2;                        // I/O threads
  int64_t max_batch = 10000;              // largest count= a batch request may ask for
  int64_t header_limit_bytes = 8192;
  int64_t body_limit_bytes = 65536;
  int64_t idle_timeout_ms = 30000;        // a connection silent this long is closed
  int max_connections = 10000;            // further connections are refused until some close
  // How often the monitoring page's per-tag history takes a point (60 points are kept).
  int64_t status_history_interval_ms = 5000;
  HttpTls tls;
  bool operator==(const Http&) const = default;
};

struct State {
  std::string path = "./data";  // RocksDB directory (created if missing)
  bool operator==(const State&) const = default;
};

struct Admin {
  std::string token;  // bearer token for /api/v1/tags; empty: generated into <state.path>/admin.token
  // A file holding the token (a mounted secret); read at config load into `token`. Excludes
  // admin.token.
  std::string token_file;
  bool operator==(const Admin&) const = default;
};

struct Segment {
  bool auto_create = false;       // create unknown tags on first use instead of answering 404
  int64_t default_step = 1000;    // step of auto-created tags and of PUT without a step
  int64_t max_step = 1000000;     // cap of the dynamic step
  int preload_percent = 10;       // start fetching the next segment at this much use
  int64_t wait_ms = 100;          // how long a request waits when both segments are empty
  int fetch_threads = 2;          // threads that talk to the store / allocator
  int retry_after_s = 1;          // Retry-After on 503
  // id_mode of tags created without one (auto-created, or PUT without id_mode): plain,
  // obfuscated or obfuscated_time (state/records.h IdMode). Read by allocators.
  std::string default_id_mode = "plain";
  bool operator==(const Segment&) const = default;
};

struct Snowflake {
  int64_t worker_id = 0;
  int64_t epoch_ms = 1288834974657;  // Twitter/Leaf epoch
  int timestamp_bits = 41;
  int worker_bits = 10;
  int sequence_bits = 12;
  int64_t time_unit_ms = 1;
  bool random_sequence_start = true;  // start each tick's sequence at a random value in [0,100)
  int64_t max_backward_ms = 5;        // clock moved back this much or less: wait; more: 503
  int64_t persist_interval_ms = 1000; // how often the timestamp high-water mark is made durable
  int64_t reserve_ms = 3000;          // how far ahead of the clock the durable mark is set
  int64_t max_startup_wait_ms = 5000; // clock behind the durable mark by more: refuse to start
  bool operator==(const Snowflake&) const = default;
};

struct Kafka {
  std::string bootstrap;               // host:port[,host:port]; required by the cluster shape
  std::string topic_prefix = "kleaf";  // topics <prefix>.requests, .state, .replies
  // Of the requests and state topics. 0: take the count from the topics (12 when kleaf creates
  // them). Set, it must equal the topics' count or the node refuses to start.
  int partitions = 0;
  int reply_partitions = 12;
  int reply_partition = -1;            // this node's reply partition; -1: derived from node.id
  // Replicas of the topics kleaf creates; 0: the brokers' default.replication.factor (kleaf then
  // leaves min.insync.replicas to the brokers too).
  int replication_factor = 0;
  // Lets the cluster roles start on topics that cannot survive the loss of a broker (fewer than
  // 3 replicas, min.insync.replicas below 2 or not below the replicas) on a cluster of 3 or more
  // brokers: warned about instead of refused.
  bool allow_unreplicated = false;
  int64_t request_timeout_ms = 2000;   // per attempt of a gateway's request to the allocators
  int request_attempts = 3;
  int64_t session_timeout_ms = 6000;   // allocator group membership: failover takes about this long
  // The allocators' group protocol: "classic" (eager rebalances, kafka.session_timeout_ms),
  // "consumer" (KIP-848: incremental hand-over, the broker's session timeout) or "auto" (the
  // consumer protocol where the brokers accept it, classic otherwise).
  std::string group_protocol = "classic";
  int64_t transaction_timeout_ms = 10000;
  // librdkafka properties for the connection to the brokers (security.protocol, sasl.*, ssl.*,
  // socket.*, ...), passed to every Kafka client of every role. Keys kleaf sets itself, or that
  // would change its guarantees, are refused (AllowedKafkaProperty).
  std::map<std::string, std::string> properties = {};
  bool operator==(const Kafka&) const = default;
};

// Whether kafka.properties may carry `name`: connection, security and diagnostics settings only.
bool AllowedKafkaProperty(const std::string& name);

struct Allocator {
  int batch_max = 256;  // requests per transaction at most
  bool operator==(const Allocator&) const = default;
};

// Sequence ownership in the cluster shape (docs/architecture.md, "I5 with a lease"): L, ρ and δ,
// the renewal interval and the idle release. An owner holds a lease on a partition with sequence
// calls, renews it and releases it; after each takeover it waits out the leases of other owners,
// L_w·(1+ρ) + δ of its clocks.
struct Sequence {
  int64_t lease_ms = 5000;         // L: 0, or 1000-60000
  int64_t clock_drift_ppm = 1000;  // ρ in millionths: the bound on this node's oscillator
  int64_t lease_margin_ms = 100;   // δ: 0 to L/10 (0-1000 when L is 0)
  // How long p may go without a commit before a `held` record is committed: 0 is L/3; else 100 to
  // (L(1−ρ) − δ)/2. Unused when L is 0.
  int64_t lease_renew_ms = 0;
  // A partition with no sequence call for this long releases its lease (0: never; else at least
  // 3 × the renewal interval). Unused when L is 0.
  int64_t idle_release_ms = 60000;
  // The owner hop (issue 38 item 2): an allocator answers sequence calls of the partitions it
  // owns from memory, under their leases, at POST /internal/v1/seq/<p> of its http.listen; a
  // gateway sends them there, to the route each owner sends with its answers.
  bool owner_hop = false;
  // Where gateways reach an allocator's owner hop ("host:port"); empty: http.listen, with the
  // machine's host name for a wildcard host and the port bound for port 0.
  std::string hop_address;
  // The renewal interval these settings give (lease_renew_ms, or L/3 for 0).
  int64_t RenewIntervalMs() const { return lease_renew_ms != 0 ? lease_renew_ms : lease_ms / 3; }
  // R6: a section is raised by one more step ahead of need once less than this share of a step
  // is left (standalone and allocators).
  int64_t raise_ahead_percent = 50;  // 10-100
  bool operator==(const Sequence&) const = default;
};

// The snowflake worker-id registry of the cluster shape (gateways lease their worker id).
struct Workers {
  int64_t lease_ttl_ms = 60000;       // allocator: a lease not renewed for this long expires
  int64_t renew_interval_ms = 3000;   // gateway: how often it renews
  int64_t safety_margin_ms = 5000;    // gateway: stops issuing at ttl - margin without a renewal
  int64_t max_clock_skew_ms = 1000;   // allocator: refuses a claim from a clock this far off
  int64_t claim_timeout_ms = 30000;   // gateway: how long startup tries to claim
  bool operator==(const Workers&) const = default;
};

// `kleaf producer`: keeps ID batches ahead of the consumers on the ids topic.
//
// A stream's batch_size when the config gives none. A consumer claims batches with one offset
// commit (a broker round trip) each, so the batch size bounds a consumer's IDs/s; a segment batch
// is two numbers on the topic whatever its size, so its default is large (docs/benchmarks.md).
// A snowflake, uuid7 or ulid batch lists every ID (22 to 39 bytes each) and one worker issues at
// most 4.096 M IDs/s, so it stays smaller.
inline constexpr int64_t kDefaultSegmentBatchSize = 10000;
inline constexpr int64_t kDefaultListBatchSize = 1000;

struct ProducerStream {
  // uuid7 and ulid: 128-bit IDs made of the producer's snowflake draws (snowflake/id128.h).
  enum class Mode { kSegment, kSnowflake, kUuid7, kUlid };
  std::string tag;
  Mode mode = Mode::kSegment;
  int64_t batch_size = kDefaultSegmentBatchSize;  // IDs per batch; the mode's default if unset
  bool operator==(const ProducerStream&) const = default;
};
// A uuid7 or ulid batch of this many IDs stays below Kafka's default 1 MB record limit.
inline constexpr int64_t kMaxId128BatchSize = 20000;
// With more than one datacenter a segment batch lists its IDs (they are not consecutive): as
// large a batch as a uuid7 one stays below Kafka's record limit.
inline constexpr int64_t kMaxListedSegmentBatchSize = 20000;
// The most datacenters: each needs at least one snowflake worker id of the default 10 bits.
inline constexpr int64_t kMaxDatacenters = 1024;

struct Producer {
  std::string topic;           // empty: <kafka.topic_prefix>.ids
  std::string group;           // the consumers' group; empty: <topic>.consumers
  int64_t batches_ahead = 4;   // per (tag, mode), ahead of the group's committed offsets
  int64_t check_interval_ms = 200;
  std::vector<ProducerStream> streams;

  // The topic and group with their defaults applied.
  std::string TopicFor(const std::string& topic_prefix) const {
    return topic.empty() ? topic_prefix + ".ids" : topic;
  }
  std::string GroupFor(const std::string& topic_prefix) const {
    return group.empty() ? TopicFor(topic_prefix) + ".consumers" : group;
  }
  bool operator==(const Producer&) const = default;
};

// More than one datacenter (docs/operations.md, "Two datacenters"): each runs its own cluster on
// its own Kafka, and the clusters never hand out the same ID because datacenter `index` of `count`
// leases snowflake worker ids only from its own slice of the worker-id space and maps segment
// counters to its own residue class (id = counter * count + index). Recorded in the layout topic
// by the cluster's first node; a node configured otherwise refuses to start. The defaults (0 of 1)
// are a single datacenter: IDs exactly as without this section.
struct Datacenter {
  int64_t index = 0;
  int64_t count = 1;
  // The kafka.bootstrap of the other datacenters' clusters (same kafka.topic_prefix), checked at
  // start when reachable: a peer that recorded the same index, or another count, is refused.
  std::vector<std::string> peers = {};
  // Milliseconds a node gives each peer at start before it goes on without checking it.
  int64_t peer_check_timeout_ms = 3000;
  bool operator==(const Datacenter&) const = default;
};

struct Log {
  std::string level = "info";  // trace, debug, info, warn, error
  std::string format = "text";  // text: "<UTC time> <level> [component] message"; json: one object per line
  bool operator==(const Log&) const = default;
};

struct Config {
  Node node;
  Http http;
  State state;
  Admin admin;
  Segment segment;
  Snowflake snowflake;
  Kafka kafka;
  Allocator allocator;
  Sequence sequence;
  Workers workers;
  Producer producer;
  Datacenter datacenter;
  Log log;
  // Key by key (every section has its ==): a config printed and read back is the same.
  bool operator==(const Config&) const = default;
};

// Environment variables that override config keys: KLEAF_<SECTION>__<KEY>, upper case, the
// section and the key separated by two underscores (KLEAF_KAFKA__BOOTSTRAP is kafka.bootstrap,
// KLEAF_SEGMENT__MAX_STEP is segment.max_step). Lists take YAML flow text
// (KLEAF_PRODUCER__STREAMS='[{tag: order}]'). Other KLEAF_ variables are not config.
using Environment = std::vector<std::pair<std::string, std::string>>;
// The process's KLEAF_*__* variables.
Environment ConfigEnvironment();

// Parses YAML text, then applies `env` over it (a variable wins over the file). Errors are
// kInvalidArgument with a message that starts with the key (or the variable).
[[nodiscard]] Result<Config> ParseConfig(const std::string& yaml_text, const Environment& env = {});
// Reads and parses a file; a missing file is an error naming it.
[[nodiscard]] Result<Config> LoadConfigFile(const std::string& path, const Environment& env = {});
// Defaults, with node.id filled from the host name.
Config DefaultConfig();

// Splits "host:port"; port must be 0-65535.
[[nodiscard]] Result<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& s);
// host:port of an address to connect to: a host name, an IPv4 address or a bracketed IPv6 one, and
// a port 1-65535 (sequence.hop_address, an owner's route).
[[nodiscard]] Result<std::pair<std::string, uint16_t>> ParseEndpoint(const std::string& s);

// The subcommands that start a node or a state tool.
enum class Role { kStandalone, kAllocator, kGateway, kProducer, kStateTool };

// One settable key as docs/operations.md's reference table lists it (a test compares the two).
struct KeyReference {
  std::string key;  // dotted, e.g. "http.threads"; http.tls is listed as its three sub-keys
  // The accepted range of an integer key, both ends included; none for other keys.
  std::optional<std::pair<int64_t, int64_t>> range;
  // The serving roles whose nodes read the key (kStandalone, kAllocator, kGateway, kProducer,
  // in that order). The state commands read what the role they stand in for reads.
  std::vector<Role> read_by;
};
// Every key, in the parser's order.
std::vector<KeyReference> KeyReferences();

// Whether a key's value is a secret that `kleaf config check` prints as kMaskedSecret: admin.token,
// and any key (a kafka.properties name included) whose name says password, passphrase, secret or
// token, or that holds a private key inline (ssl.key.pem). A key naming a file (admin.token_file,
// *.location) is not: the secret is in the file.
bool IsSecretKey(std::string_view key);
inline constexpr std::string_view kMaskedSecret = "***";
// The effective config as YAML in the config file's shape, every key with its value (defaults
// included), secrets as kMaskedSecret: what `kleaf config check` prints. Read back by ParseConfig,
// a printout without secrets gives the same config.
std::string EffectiveConfigYaml(const Config& c);

// The SASL mechanism of kafka.properties against what the linked librdkafka can do:
// `builtin_features` is its "builtin.features" property (e.g. "gzip,ssl,sasl,sasl_plain,
// sasl_scram,sasl_oauthbearer"). Refused, naming the key, the mechanism and the reason: GSSAPI
// without sasl_gssapi (librdkafka's default mechanism when security.protocol is SASL_* and none is
// set); OAUTHBEARER without sasl_oauthbearer, or without `sasl.oauthbearer.method: oidc` (any other
// method needs a token refresh callback of the application's, which kleaf has not), or with oidc
// but without the oidc feature (librdkafka built without libcurl). `host_mechanisms`, when
// given, is asked (only for GSSAPI: it loads Cyrus SASL's plugins) what Cyrus SASL offers on this
// host, space-separated (kafka::HostSaslMechanisms): GSSAPI is refused too when Cyrus lacks its
// GSSAPI plugin, which Debian packages apart; nullopt from it skips that check.
[[nodiscard]] Result<void> CheckKafkaSasl(
    const Kafka& k, std::string_view builtin_features,
    const std::function<std::optional<std::string>()>& host_mechanisms = {});
// Nodes of this role issue snowflake IDs, so their layout must be valid at start
// (snowflake::CheckLayoutAt).
bool IssuesSnowflakeIds(Role role);
// Fails when kafka.bootstrap is empty: every role but standalone talks to Kafka.
[[nodiscard]] Result<void> CheckKafkaBootstrap(const Config& c);
// What only the role can tell about a config: the Kafka bootstrap a cluster role needs, a
// producer without streams. Runs before anything is created in state.path; a failure is a config
// error (exit 2) like a bad key.
[[nodiscard]] Result<void> CheckConfigFor(Role role, const Config& c);

}  // namespace kleaf::config
