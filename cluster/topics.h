// The Kafka topics of a kleaf cluster (docs/architecture.md, "Cluster shape (Kafka)") and their
// creation.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/datacenter.h"
#include "allocator/operations.h"
#include "base/error.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::cluster {

inline constexpr char kCorrelationHeader[] = "kleaf-correlation-id";
inline constexpr char kReplyPartitionHeader[] = "kleaf-reply-partition";
// On a sequence reply: the answering owner's lease generation of the partition and its owner hop's
// address (cluster::EncodeOwnerRoute), the route a gateway learns.
inline constexpr char kOwnerRouteHeader[] = "kleaf-owner-route";

struct ClusterTopics {
  std::string requests;  // key = tag; P partitions
  std::string state;     // key = seg/<tag>; compacted; P partitions, co-partitioned with requests
  std::string replies;   // key = node id; R partitions
  int32_t partitions = 12;
  int32_t reply_partitions = 12;
  std::string ids;     // key = tag; ID batches for event-driven consumers; P partitions
  std::string layout;  // key = "layout"; one partition, compacted: the ClusterLayout record

  static ClusterTopics For(const std::string& prefix, int32_t partitions, int32_t reply_partitions);
  // The requests/state partition that owns `tag`.
  int32_t PartitionOf(std::string_view tag) const { return kafka::PartitionFor(tag, partitions); }
  // transactional.id of the owner of partition `p`.
  std::string TransactionalId(int32_t p) const { return requests + ".owner." + std::to_string(p); }
};

// Whether `request` may be served by the owner of partition `arrived_on` of a requests topic of
// `partitions` partitions: its route key (allocator::RouteKey) must map there, and a sender that
// said its partition count (`sender_partitions` > 0) must have the same one. An error names both
// partitions.
[[nodiscard]] Result<void> CheckRoute(const allocator::Request& request, int32_t sender_partitions,
                                      int32_t arrived_on, int32_t partitions);

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
// first node that finds it empty and checked by every node at start (docs/architecture.md, "What I1
// and I3 rest on": every assumption is checked): the partition count tags are routed by (a tag's
// state lives in partition PartitionFor(tag, partitions) and nowhere else), and the identity of the
// state topic (a recreated topic has lost every tag's max_id). And which datacenter the cluster is
// (datacenter.h): a node configured as another one would lease worker ids and map segment counters
// of another datacenter's slice.
struct ClusterLayout {
  int32_t partitions = 0;
  std::string state_topic_id;  // Kafka's topic id; empty when the client cannot tell
  std::string written_by;      // node id, for the operator
  int64_t written_ms = 0;
  // Records written before datacenters existed have none: they are datacenter 0 of 1.
  allocator::Datacenter datacenter = {};
};

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
                                                const allocator::Datacenter& dc = {});

// How one topic is replicated, as the brokers describe it.
struct TopicReplication {
  std::string topic;
  int32_t partitions = 0;
  int32_t replication_factor = 0;   // the fewest replicas of any partition; 0: not described
  int32_t min_insync_replicas = 0;  // the topic's, else the brokers' default; 0: not described
  // unclean.leader.election.enable is true: filled for Kafka's transaction log only (the state
  // topic's is CheckLayout's to refuse, with its own message).
  bool unclean_leader_election = false;
};

// The replication of a cluster's topics (docs/architecture.md, "What I1 and I3 rest on"). I1 (a
// committed max_id is never lost) rests on the state topic keeping what it acknowledged through the
// loss of a broker, and on the cluster still taking writes then.
struct ReplicationFacts {
  int32_t brokers = 0;  // the brokers the cluster reports (a broker that is down drops out)
  // The state, requests and layout topics, and Kafka's __transaction_state once it exists (its
  // records decide which producer of a transactional id may commit: the fence I1 and I5 rest
  // on): what uniqueness rests on.
  std::vector<TopicReplication> guarded = {};
  // The replies and ids topics and Kafka's __consumer_offsets (those the brokers described): only
  // warned about. __transaction_state is not checked while the brokers do not describe it (Kafka
  // creates it at the cluster's first transaction; a principal without Describe on it).
  std::vector<TopicReplication> others = {};
};

// Pure: whether each topic survives the loss of one broker: 3 replicas or more, and
// min.insync.replicas at least 2 (else a write is acknowledged with one copy) and below the
// replicas (else writes stop while one broker is down), and, for Kafka's transaction log, no
// unclean leader election (an out-of-sync replica elected leader forgets a fence or a commit
// decision). A cluster has as many brokers as it reports or as the most replicas any topic has,
// whichever is more. With one broker there is nothing to check. On 3 or more, a guarded topic that
// fails is refused (kInvalidArgument, naming each topic, its values and the command that fixes it)
// unless `allow_unreplicated`. Returns the warnings to log: the topics that fail and are not
// refused.
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
                                                  const allocator::Datacenter& dc = {},
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

}  // namespace kleaf::cluster
