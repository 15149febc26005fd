// Topic administration: creating topics, their partition counts, ids, replication and configs, and
// the version of librdkafka kleaf runs with. Each call ends as soon as the brokers refuse the
// client's SASL credentials or TLS handshake (kUnauthenticated, naming the kafka.properties to
// check), not at its timeout. Each call sends its admin requests to a broker that has just
// answered it, not to the controller librdkafka would pick (which may be a broker that died), and
// starts over with a new handle when an attempt gets no answer, until its timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kafka/message.h"

namespace kleaf::kafka {

// The replication factor that leaves the choice to the brokers (default.replication.factor).
inline constexpr int16_t kBrokerDefaultReplication = -1;

struct TopicSpec {
  std::string name;
  int32_t partitions = 1;
  int16_t replication_factor = kBrokerDefaultReplication;
  std::map<std::string, std::string> configs;
};

// Creates the topics that do not exist yet; existing ones are left alone (their partition counts
// are checked: fewer than asked is an error, since keys would map elsewhere).
[[nodiscard]] Result<void> EnsureTopics(const Properties& props,
                                        const std::vector<TopicSpec>& topics,
                                        std::chrono::milliseconds timeout);

// Number of partitions of `topic` (DescribeTopic): kNotFound when it does not exist.
[[nodiscard]] Result<int32_t> PartitionCount(const Properties& props, const std::string& topic,
                                             std::chrono::milliseconds timeout);

struct TopicInfo {
  int32_t partitions = 0;
  std::string id;  // Kafka's topic id (URL-safe base64, as Kafka's tools print it): a recreated
                   // topic gets a new one
  // The fewest replicas any partition has: the topic's replication factor (a reassignment in
  // progress lists more for a while).
  int32_t replication_factor = 0;
};

// The values of topic-level configs of `topic`, in one DescribeConfigs request, e.g.
// {"cleanup.policy": "compact"}: the broker's default where the topic does not set one. A name the
// broker does not describe is left out. kNotFound when the topic does not exist.
[[nodiscard]] Result<std::map<std::string, std::string>> TopicConfigs(
    const Properties& props, const std::string& topic, const std::vector<std::string>& names,
    std::chrono::milliseconds timeout);

// Describes `topic` with the admin API (DescribeTopics): kNotFound when it does not exist,
// kUnavailable when Kafka does not answer within `timeout`.
[[nodiscard]] Result<TopicInfo> DescribeTopic(const Properties& props, const std::string& topic,
                                              std::chrono::milliseconds timeout);

// A topic as DescribeCluster found it.
struct DescribedTopic {
  TopicInfo info;
  // The configs asked for, as TopicConfigs returns them.
  std::map<std::string, std::string> configs;
};

// What DescribeCluster found.
struct ClusterDescription {
  // The brokers the cluster reports: those the controller counts as alive (a broker that stopped is
  // left out once its session with the controller expired).
  int32_t brokers = 0;
  // Every topic asked for: kNotFound when it does not exist, another error when the brokers would
  // not describe it (e.g. not authorized).
  std::map<std::string, Result<DescribedTopic>> topics;
};

// The brokers, `topics` (DescribeTopics) and the configs `config_names` of those that exist (one
// DescribeConfigs), through one handle within `timeout`. Fails as a whole only when Kafka does not
// answer (kUnavailable) or refuses the client (kUnauthenticated).
[[nodiscard]] Result<ClusterDescription> DescribeCluster(
    const Properties& props, const std::vector<std::string>& topics,
    const std::vector<std::string>& config_names, std::chrono::milliseconds timeout);

// Whether every broker the cluster lists offers the consumer group protocol (KIP-848): each names
// "consumer" in its group.coordinator.rebalance.protocols (Kafka 4.x by default; 3.9 only when
// enabled). `why` names the first broker that does not. Fails when the brokers cannot be
// described (unreachable, or no DESCRIBE_CONFIGS right on the cluster).
struct GroupProtocolSupport {
  bool every_broker = false;
  std::string why;
};
[[nodiscard]] Result<GroupProtocolSupport> ConsumerGroupProtocolSupport(
    const Properties& props, std::chrono::milliseconds timeout);

// A member of a consumer group, as DescribeConsumerGroups shows it.
struct GroupMember {
  std::string member_id;
  std::string client_id;
  std::string host;
};
// The members of consumer group `group` (classic or consumer protocol; none when the group is empty
// or unknown), from its coordinator within `timeout`. Fails when Kafka does not answer in time or
// refuses (the caller needs DESCRIBE on the group, which READ implies).
[[nodiscard]] Result<std::vector<GroupMember>> DescribeGroupMembers(
    const Properties& props, const std::string& group, std::chrono::milliseconds timeout);

// The librdkafka version kleaf runs with (rd_kafka_version_str(), e.g. "2.14.2").
std::string LibraryVersion();

// kleaf's patch level of that librdkafka (scripts/install-deps.sh, patch_librdkafka): 0 for a
// librdkafka without it, whose transactions each wait 1 ms more before registering partitions.
int LibraryPatchLevel();

// What that librdkafka was built with: its "builtin.features" property, comma-separated (e.g.
// "gzip,snappy,ssl,sasl,regex,lz4,sasl_plain,sasl_scram,plugins,zstd,sasl_oauthbearer"), for
// config::CheckKafkaSasl.
std::string LibraryFeatures();

// The SASL mechanisms Cyrus SASL offers a client on this host, space-separated (e.g. "SCRAM-SHA-1
// PLAIN LOGIN"): librdkafka does GSSAPI (Kerberos) through Cyrus, and Cyrus through a plugin that
// Debian packages apart (libsasl2-modules-gssapi-mit), so a build with sasl_gssapi can still lack
// it at run time. nullopt when Cyrus cannot be initialized. For config::CheckKafkaSasl.
std::optional<std::string> HostSaslMechanisms();

}  // namespace kleaf::kafka
