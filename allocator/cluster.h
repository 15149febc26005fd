// The Kafka topics of a kleaf cluster (DESIGN.md, "Topics") and their creation.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/datacenter.h"
#include "base/error.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::allocator {

inline constexpr char kCorrelationHeader[] = "kleaf-correlation-id";
inline constexpr char kReplyPartitionHeader[] = "kleaf-reply-partition";

struct ClusterTopics {
  std::string requests;  // key = tag; P partitions
  std::string state;     // key = seg/<tag>; compacted; P partitions, co-partitioned with requests
  std::string replies;   // key = node id; R partitions
  int32_t partitions = 12;
  int32_t reply_partitions = 12;
  std::string ids;       // key = tag; ID batches for event-driven consumers; P partitions
  std::string layout;    // key = "layout"; one partition, compacted: the ClusterLayout record

  static ClusterTopics For(const std::string& prefix, int32_t partitions, int32_t reply_partitions);
  // The requests/state partition that owns `tag`.
  int32_t PartitionOf(std::string_view tag) const { return kafka::PartitionFor(tag, partitions); }
  // transactional.id of the owner of partition `p`.
  std::string TransactionalId(int32_t p) const { return requests + ".owner." + std::to_string(p); }
};

// Creates the missing topics (state and layout compacted; ids only when named), requests and state
// with `topics.partitions`, or 12 when it is 0. Existing topics are left as they are.
// `replication_factor` 0 (or less) leaves replicas and min.insync.replicas to the brokers'
// defaults; 3 or more sets min.insync.replicas=2 on the topics; 1 or 2 only the replicas.
[[nodiscard]] Result<void> EnsureClusterTopics(const kafka::Properties& props,
                                               const ClusterTopics& topics,
                                               int16_t replication_factor,
                                               std::chrono::milliseconds timeout);

inline constexpr int32_t kDefaultPartitions = 12;

// What a cluster's uniqueness rests on besides its code, recorded once in the layout topic by the
// first node that finds it empty and checked by every node at start (DESIGN.md: every assumption is
// checked): the partition count tags are routed by (a tag's state lives in partition
// PartitionFor(tag, partitions) and nowhere else), and the identity of the state topic (a
// recreated topic has lost every tag's max_id).
// And which datacenter the cluster is (datacenter.h): a node configured as another one would
// lease worker ids and map segment counters of another datacenter's slice.
struct ClusterLayout {
  int32_t partitions = 0;
  std::string state_topic_id;  // Kafka's topic id; empty when the client cannot tell
  std::string written_by;      // node id, for the operator
  int64_t written_ms = 0;
  // Records written before datacenters existed have none: they are datacenter 0 of 1.
  Datacenter datacenter = {};
};
std::string EncodeLayout(const ClusterLayout& layout);
[[nodiscard]] Result<ClusterLayout> DecodeLayout(std::string_view json);

// The topics as the broker describes them now.
struct TopicFacts {
  int32_t requests_partitions = 0;
  int32_t state_partitions = 0;
  std::string state_topic_id;
  // The state topic's cleanup.policy as the broker describes it (empty: not described, as in
  // tests of the other facts). Anything but "compact" lets Kafka delete tag records by age.
  std::string state_cleanup_policy = {};
  // Its unclean.leader.election.enable (empty: not described). "true" lets a replica that fell
  // behind become leader and drop records the cluster committed.
  std::string state_unclean_leader_election = {};
};

// Pure: the layout to run with, or the refusal that names what is wrong and what to do.
// `configured` is kafka.partitions (0: not configured), `dc` datacenter.index and .count;
// `recorded` the layout topic's records (empty: none yet, the facts and `dc` become the layout).
// kInvalidArgument: the configuration disagrees with the topics or the recorded datacenter;
// kFailedPrecondition: the topics changed under a live cluster.
[[nodiscard]] Result<ClusterLayout> CheckLayout(const ClusterTopics& names, const TopicFacts& now,
                                                int32_t configured,
                                                const std::vector<ClusterLayout>& recorded,
                                                const Datacenter& dc = {});

// How one topic is replicated, as the brokers describe it.
struct TopicReplication {
  std::string topic;
  int32_t partitions = 0;
  int32_t replication_factor = 0;   // the fewest replicas of any partition; 0: not described
  int32_t min_insync_replicas = 0;  // the topic's, else the brokers' default; 0: not described
};

// The replication of a cluster's topics (DESIGN.md: every assumption is checked). I1 (a committed
// max_id is never lost) rests on the state topic keeping what it acknowledged through the loss of
// a broker, and on the cluster still taking writes then.
struct ReplicationFacts {
  int32_t brokers = 0;  // the brokers the cluster reports (a broker that is down drops out)
  // The state, requests and layout topics: what uniqueness rests on.
  std::vector<TopicReplication> guarded = {};
  // The replies and ids topics and Kafka's __transaction_state and __consumer_offsets (those the
  // brokers described): only warned about.
  std::vector<TopicReplication> others = {};
};

// Pure: whether each topic survives the loss of one broker: 3 replicas or more, and
// min.insync.replicas at least 2 (else a write is acknowledged with one copy) and below the
// replicas (else writes stop while one broker is down). A cluster has as many brokers as it reports
// or as the most replicas any topic has, whichever is more. With one broker there is nothing to
// check. On 3 or more, a guarded topic that fails is refused (kInvalidArgument, naming each topic,
// its values and the command that fixes it) unless `allow_unreplicated`. Returns the warnings to
// log: the topics that fail and are not refused.
[[nodiscard]] Result<std::vector<std::string>> CheckReplication(const ReplicationFacts& facts,
                                                                bool allow_unreplicated);

// Reads the topics' facts and the layout topic, writes the layout record when there is none, and
// returns CheckLayout's verdict. Every node calls it before it routes, serves or reads state. It
// refuses topics CheckReplication refuses (`allow_unreplicated`: kafka.allow_unreplicated) and logs
// its warnings.
[[nodiscard]] Result<ClusterLayout> ResolveLayout(const kafka::Properties& props,
                                                  const ClusterTopics& names, int32_t configured,
                                                  const std::string& node_id,
                                                  std::chrono::milliseconds timeout,
                                                  const Datacenter& dc = {},
                                                  bool allow_unreplicated = false);

// Pure: whether the layout `peer` recorded by the cluster of datacenter.peers[`i`] (`bootstrap`)
// fits ours: the same datacenter count, another index, another state topic (not our own Kafka
// listed as a peer). kInvalidArgument naming the key to fix.
[[nodiscard]] Result<void> CheckPeerLayout(const ClusterLayout& ours, const ClusterLayout& peer,
                                           size_t i, const std::string& bootstrap);

// Reads the layout topic of every peer cluster (`props` with each peer's bootstrap.servers, the
// same topic names) within `timeout_each`, and applies CheckPeerLayout. A peer that does not
// answer in time, or has recorded no layout yet, is logged and skipped: the check catches what it
// can see, it is no lock.
[[nodiscard]] Result<void> CheckPeers(const kafka::Properties& props, const ClusterTopics& names,
                                      const ClusterLayout& ours,
                                      const std::vector<std::string>& peers,
                                      std::chrono::milliseconds timeout_each);

// Name of the store text recording which state topic (name and id) a store is a view of.
inline constexpr char kStateTopicText[] = "state_topic";
// Pure: whether a store that recorded `stored` ("<name> <id>", or nullopt for a new store) may
// serve as the view of state topic `name` with id `id`.
[[nodiscard]] Result<void> CheckStoreTopic(const std::optional<std::string>& stored,
                                           const std::string& name, const std::string& id,
                                           const std::string& state_path);
// Checks the store against the layout and records the state topic's name and id in it.
[[nodiscard]] Result<void> BindStoreToStateTopic(state::Store& store, const ClusterTopics& names,
                                                 const ClusterLayout& layout,
                                                 const std::string& state_path);

// A record restored from the state topic, merged with what the store already holds: max_id never
// goes down (a record of a recreated or truncated topic cannot undo reservations the store saw).
state::TagRecord MergeRestored(const std::optional<state::TagRecord>& existing,
                               state::TagRecord incoming);

struct RestoreResult {
  int64_t records = 0;
  int64_t from = 0;
  int64_t end = 0;  // next offset to apply
  // The next offset of requests partition `p` to serve, as the last committed batch recorded it
  // (RequestsOffsetKey), or nullopt when no batch of this version was ever committed on p.
  std::optional<int64_t> requests_offset;
};

// Applies state-topic partition `p` from the store's applied offset up to the last stable offset
// into the store (with MergeRestored), and records the new applied offset and the requests offset
// the restored records carry.
[[nodiscard]] Result<RestoreResult> RestorePartition(kafka::PartitionReader& reader,
                                                     state::Store& store,
                                                     const ClusterTopics& topics, int32_t p,
                                                     std::chrono::milliseconds timeout);

// Name of the store value holding the next state-topic offset to apply for partition `p`.
std::string AppliedOffsetKey(int32_t p);

// The consumed position of requests partition `p`: every batch's transaction puts a record with
// this key (in the state topic, partition p) and the next request offset as decimal text beside
// its state records and replies, so the position commits exactly with what it answered. The store
// keeps the last one under the same name. Other readers of the state topic skip the key.
std::string RequestsOffsetKey(int32_t p);
std::string EncodeRequestsOffset(int64_t next);
std::optional<int64_t> DecodeRequestsOffset(std::string_view value);

}  // namespace kleaf::allocator
