#include "cluster/topics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "cluster/wire.h"

namespace kleaf::cluster {

namespace {

// What is left of a deadline for the next Kafka call, at least a second so the call can answer.
std::chrono::milliseconds TimeLeft(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1000),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()));
}

}  // namespace

ClusterTopics ClusterTopics::For(const std::string& prefix, int32_t partitions,
                                 int32_t reply_partitions) {
  return ClusterTopics{prefix + ".requests", prefix + ".state", prefix + ".replies", partitions,
                       reply_partitions,     prefix + ".ids",   prefix + ".layout"};
}

Result<void> CheckRoute(const allocator::Request& request, int32_t sender_partitions,
                        int32_t arrived_on, int32_t partitions) {
  if (sender_partitions > 0 && sender_partitions != partitions) {
    return Fail(Code::kFailedPrecondition,
                "request routed for " + std::to_string(sender_partitions) +
                    " partitions arrived on partition " + std::to_string(arrived_on) +
                    " of an allocator whose cluster has " + std::to_string(partitions) +
                    ": the sender's partition count is wrong; restart it without kafka.partitions");
  }
  const bool registry =
      std::visit([]<typename Op>(const Op&) { return allocator::kIsWorkerOp<Op>; }, request);
  // A sequence request's section_size; nothing for the other operations.
  const std::optional<int64_t> section_size = std::visit(
      []<typename Op>(const Op& op) -> std::optional<int64_t> {
        if constexpr (allocator::kNeedsCounters<Op>) {
          return allocator::SentSectionSize(op).value_or(0);
        } else {
          return std::nullopt;
        }
      },
      request);
  const bool sequence = section_size.has_value();
  // Sections are routed by their own route keys: a request without section_size would be served
  // by the partition of the space's name, which does not own the sections.
  if (sequence && *section_size <= 0) {
    return Fail(Code::kInvalidArgument,
                "a sequence request to an allocator must carry its space's section_size");
  }
  // Asked of every partition (each for its own records) when there is no route key.
  for (const std::string& key : allocator::RouteKeys(request)) {
    const int32_t owner = kafka::PartitionFor(key, partitions);
    if (owner == arrived_on) continue;
    const std::string what = registry   ? std::string("registry request")
                             : sequence ? "section '" + key + "'"
                                        : "tag '" + key + "'";
    return Fail(Code::kFailedPrecondition,
                what + " belongs to partition " + std::to_string(owner) + " of " +
                    std::to_string(partitions) + ", but the request arrived on partition " +
                    std::to_string(arrived_on) +
                    ": its sender routes with another partition count; refused so that no tag or "
                    "section has two owners. Restart the sender without kafka.partitions");
  }
  return {};
}

namespace {

// The specs of the cluster's topics, each with `partitions` (the ids topic: `ids_partitions`).
// Where kleaf chose 3 replicas or more it also asks for 2 in sync. Otherwise the brokers'
// min.insync.replicas stands: a topic-level 1 would override a broker's 2.
std::vector<kafka::TopicSpec> ClusterTopicSpecs(const ClusterTopics& t, int32_t partitions,
                                                std::optional<int32_t> ids_partitions,
                                                int16_t replicas) {
  std::map<std::string, std::string> durability;
  if (replicas >= 3) durability["min.insync.replicas"] = "2";
  auto with = [&durability](std::map<std::string, std::string> configs) {
    configs.insert(durability.begin(), durability.end());
    return configs;
  };
  std::vector<kafka::TopicSpec> specs{
      {t.requests, partitions, replicas, with({})},
      {t.state, partitions, replicas,
       with({{"cleanup.policy", "compact"},
             // Explicit, so a broker whose default is true cannot give it to kleaf's state topic
             // (CheckLayout refuses that).
             {"unclean.leader.election.enable", "false"},
             // Deletions must outlive the longest restore; segments roll often so compaction runs.
             {"delete.retention.ms", "86400000"},
             {"segment.ms", "3600000"},
             {"min.cleanable.dirty.ratio", "0.1"}})},
      {t.replies, t.reply_partitions, replicas, with({{"retention.ms", "3600000"}})},
  };
  if (ids_partitions) specs.push_back({t.ids, *ids_partitions, replicas, with({})});
  specs.push_back({t.layout, 1, replicas, with({{"cleanup.policy", "compact"}})});
  return specs;
}

// The partition count of `topic` if it exists, `otherwise` if it does not; any other answer
// (Kafka unreachable, frozen) is an error: every step after it would wait as long again, and a
// node must give up within its setup timeout.
[[nodiscard]] Result<int32_t> ExistingPartitions(const kafka::Properties& props,
                                                 const std::string& topic, int32_t otherwise,
                                                 std::chrono::milliseconds timeout) {
  auto existing = kafka::PartitionCount(props, topic, timeout);
  if (existing) return *existing;
  if (existing.error().code != Code::kNotFound) return std::unexpected(existing.error());
  return otherwise;
}

}  // namespace

Result<void> EnsureClusterTopics(const kafka::Properties& props, const ClusterTopics& t,
                                 int16_t replication_factor, std::chrono::milliseconds timeout) {
  const int16_t replicas =
      replication_factor > 0 ? replication_factor : kafka::kBrokerDefaultReplication;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Existing topics decide: a missing sibling gets the requests topic's count, and a configured
  // count that disagrees with it is reported by CheckLayout, naming the key.
  auto partitions = ExistingPartitions(
      props, t.requests, t.partitions > 0 ? t.partitions : kDefaultPartitions, TimeLeft(deadline));
  if (!partitions) return std::unexpected(partitions.error());
  // The ids topic routes nothing the allocators own: an existing one keeps its own count (the
  // producer reads it from the broker), so a grown requests topic is reported by CheckLayout.
  std::optional<int32_t> ids_partitions;
  if (!t.ids.empty()) {
    auto ids = ExistingPartitions(props, t.ids, *partitions, TimeLeft(deadline));
    if (!ids) return std::unexpected(ids.error());
    ids_partitions = *ids;
  }
  auto ensured = kafka::EnsureTopics(
      props, ClusterTopicSpecs(t, *partitions, ids_partitions, replicas), TimeLeft(deadline));
  // kInvalidArgument: the brokers refused the replication factor (the handle's properties were
  // accepted by the first lookup above).
  if (!ensured && ensured.error().code == Code::kInvalidArgument) {
    return Fail(Code::kInvalidArgument,
                replication_factor > 0
                    ? "kafka.replication_factor: " + std::to_string(replication_factor) +
                          " is configured, but " + ensured.error().message
                    : ensured.error().message +
                          " (kafka.replication_factor is not set: the brokers' "
                          "default.replication.factor applies; set kafka.replication_factor)");
  }
  return ensured;
}

// Long for its messages only: one refusal after another, in the order they are checked, each
// telling the operator what to do; split up, the order would be harder to see.
Result<ClusterLayout> CheckLayout(const ClusterTopics& names, const TopicFacts& now,
                                  int32_t configured, const std::vector<ClusterLayout>& recorded,
                                  const allocator::Datacenter& dc) {
  const std::string n = std::to_string(now.requests_partitions);
  if (configured > 0 && configured != now.requests_partitions) {
    return Fail(Code::kInvalidArgument,
                "kafka.partitions: " + std::to_string(configured) + " is configured, but topic " +
                    names.requests + " has " + n +
                    " partitions; this node would send tags to partitions whose allocator does not "
                    "own them. Remove kafka.partitions (nodes take the count from the topics) or "
                    "set it to " +
                    n);
  }
  if (!now.state_cleanup_policy.empty() && now.state_cleanup_policy != "compact") {
    return Fail(Code::kInvalidArgument,
                "topic " + names.state + " has cleanup.policy=" + now.state_cleanup_policy +
                    ", but kleaf's state topic must be compacted: with deletion Kafka drops tag "
                    "records by age and the max_id they hold is lost, so IDs could repeat. Fix: "
                    "kafka-configs.sh --bootstrap-server B --alter --entity-type topics "
                    "--entity-name " +
                    names.state +
                    " --add-config cleanup.policy=compact "
                    "(compose/kafka.sh tool configs ... runs it)");
  }
  if (now.state_unclean_leader_election == "true") {
    return Fail(Code::kInvalidArgument,
                "topic " + names.state +
                    " has unclean.leader.election.enable=true, but kleaf's state topic must keep "
                    "every record it committed: an unclean election makes a replica that fell "
                    "behind the leader and drops what it lacks, among it max_id records the "
                    "allocators committed and answered, so IDs could repeat. Fix: kafka-configs.sh "
                    "--bootstrap-server B --alter --entity-type topics --entity-name " +
                    names.state +
                    " --add-config unclean.leader.election.enable=false "
                    "(compose/kafka.sh tool configs ... runs it)");
  }
  if (now.requests_partitions != now.state_partitions) {
    return Fail(Code::kFailedPrecondition,
                "topics " + names.requests + " (" + n + " partitions) and " + names.state + " (" +
                    std::to_string(now.state_partitions) +
                    " partitions) differ: a tag's requests and its state must share a partition "
                    "number. Recreate the cluster's topics with one count (see docs/operations.md, "
                    "\"Layout refusals\")");
  }
  if (recorded.empty()) {
    return ClusterLayout{now.requests_partitions, now.state_topic_id, "", 0, dc};
  }
  const ClusterLayout& first = recorded.front();
  for (const auto& r : recorded) {
    if (r.datacenter != first.datacenter) {
      return Fail(Code::kFailedPrecondition,
                  "topic " + names.layout + " holds conflicting layouts (" +
                      first.datacenter.Describe() + " and " + r.datacenter.Describe() +
                      "): the first nodes of this cluster were configured as different "
                      "datacenters. Stop the cluster and see docs/operations.md, \"Layout "
                      "refusals\"");
    }
    if (r.partitions != first.partitions || r.state_topic_id != first.state_topic_id) {
      return Fail(Code::kFailedPrecondition,
                  "topic " + names.layout + " holds conflicting layouts (" +
                      std::to_string(first.partitions) + " and " + std::to_string(r.partitions) +
                      " partitions); nodes started against different topics. Stop the cluster "
                      "and see docs/operations.md, \"Layout refusals\"");
    }
  }
  if (now.requests_partitions != first.partitions) {
    return Fail(Code::kFailedPrecondition,
                "partitions were added to a live topic: " + names.requests + " has " + n +
                    " partitions, but this cluster's layout (" + names.layout + ", written by " +
                    (first.written_by.empty() ? std::string("its first node") : first.written_by) +
                    ") has " + std::to_string(first.partitions) +
                    ". Tags would move to partitions whose allocators lack their state and be "
                    "served twice, so kleaf refuses to run on these topics. To grow, move to a new "
                    "kafka.topic_prefix with the new count and carry the state over with kleaf "
                    "state export/import --bump (docs/operations.md, \"Layout refusals\")");
  }
  if (!first.state_topic_id.empty() && !now.state_topic_id.empty() &&
      first.state_topic_id != now.state_topic_id) {
    return Fail(Code::kFailedPrecondition,
                "topic " + names.state + " was deleted and recreated: its id is " +
                    now.state_topic_id + ", the layout was written for " + first.state_topic_id +
                    ". The max_id of every tag it held is gone and serving from it would hand out "
                    "IDs again. Restore the state from an export (docs/operations.md, \"Layout "
                    "refusals\")");
  }
  if (first.datacenter != dc) {
    const std::string key = first.datacenter.index != dc.index && first.datacenter.count != dc.count
                                ? "datacenter.index and datacenter.count"
                            : first.datacenter.index != dc.index ? "datacenter.index"
                                                                 : "datacenter.count";
    return Fail(Code::kInvalidArgument,
                key + ": this node is configured as " + dc.Describe() +
                    ", but this cluster's layout (" + names.layout + ", written by " +
                    (first.written_by.empty() ? std::string("its first node") : first.written_by) +
                    ") records " + first.datacenter.Describe() +
                    ". A node of another datacenter's slice would lease worker ids and hand out "
                    "segment IDs that cluster owns. If this node belongs to this cluster, set "
                    "datacenter.index: " +
                    std::to_string(first.datacenter.index) +
                    " and datacenter.count: " + std::to_string(first.datacenter.count) +
                    " in its config (was it copied from another datacenter?); if it belongs to "
                    "another datacenter, fix its kafka.bootstrap. A cluster's datacenter never "
                    "changes (docs/operations.md, \"Two datacenters\")");
  }
  ClusterLayout l = first;
  if (l.state_topic_id.empty()) l.state_topic_id = now.state_topic_id;
  return l;
}

namespace {

// What is wrong with `t` on a cluster of `brokers`, or nothing when it survives the loss of a
// broker (or is not described).
std::optional<std::string> ReplicationShortfall(const TopicReplication& t, int32_t brokers) {
  const int32_t rf = t.replication_factor;
  const int32_t isr = t.min_insync_replicas;
  if (rf <= 0) return std::nullopt;
  const bool one_copy = isr > 0 && isr < 2;
  const bool stops = isr > 0 && isr >= rf;
  if (t.unclean_leader_election) {
    return "topic " + t.topic + " has unclean.leader.election.enable=true on a cluster of " +
           std::to_string(brokers) +
           " brokers: a replica that fell behind can become leader and forget a fence or a "
           "commit decision it had acknowledged";
  }
  if (rf >= 3 && !one_copy && !stops) return std::nullopt;
  std::string text = "topic " + t.topic + " has replication factor " + std::to_string(rf) +
                     " and min.insync.replicas " + (isr > 0 ? std::to_string(isr) : "unknown") +
                     " on a cluster of " + std::to_string(brokers) + " brokers: ";
  if (one_copy) {
    text += "a write is acknowledged once one broker has it and is lost with that broker's disk";
  } else if (isr > rf) {
    text += "no write is ever acknowledged (min.insync.replicas exceeds the replicas)";
  } else if (stops) {
    text += "writes stop while any one of its brokers is down";
  } else {
    text += "it cannot keep two copies of every write while a broker is down";
  }
  return text;
}

// The commands that give `t` 3 replicas and min.insync.replicas 2 (and no unclean elections).
std::string ReplicationFix(const TopicReplication& t) {
  if (t.unclean_leader_election) {
    return "Fix: kafka-configs.sh --bootstrap-server B --alter --entity-type topics "
           "--entity-name " +
           t.topic + " --add-config unclean.leader.election.enable=false";
  }
  const std::string min_isr =
      "kafka-configs.sh --bootstrap-server B --alter --entity-type topics --entity-name " +
      t.topic + " --add-config min.insync.replicas=2";
  if (t.replication_factor >= 3) return "Fix: " + min_isr;
  std::string fix =
      "Fix: give each of its " + std::to_string(t.partitions) +
      " partitions 3 replicas with kafka-reassign-partitions.sh --bootstrap-server B "
      "--reassignment-json-file plan.json --execute (plan.json lists 3 brokers per partition; "
      "docs/operations.md, \"Replication\")";
  if (t.min_insync_replicas != 2) fix += ", then " + min_isr;
  return fix;
}

}  // namespace

Result<std::vector<std::string>> CheckReplication(const ReplicationFacts& facts,
                                                  bool allow_unreplicated) {
  // A broker that is down drops out of the count the cluster reports, but not out of the replica
  // lists of the topics it holds.
  int32_t brokers = facts.brokers;
  for (const auto* list : {&facts.guarded, &facts.others}) {
    for (const auto& t : *list) brokers = std::max(brokers, t.replication_factor);
  }
  std::vector<std::string> warnings;
  if (brokers <= 1) return warnings;
  std::string refusal;
  for (const auto& t : facts.guarded) {
    auto shortfall = ReplicationShortfall(t, brokers);
    if (!shortfall) continue;
    if (brokers >= 3 && !allow_unreplicated) {
      refusal += (refusal.empty() ? "" : "; ") + *shortfall + ". " + ReplicationFix(t);
    } else if (brokers >= 3) {
      warnings.push_back(*shortfall + " (running anyway: kafka.allow_unreplicated is set). " +
                         ReplicationFix(t));
    } else {
      warnings.push_back(*shortfall + " (a cluster of 3 brokers or more can lose one)");
    }
  }
  if (!refusal.empty()) {
    return Fail(Code::kInvalidArgument,
                refusal +
                    ". kleaf's state, requests and layout topics and Kafka's transaction log "
                    "(__transaction_state) must survive the loss of a broker: the state topic "
                    "holds the max_id of every tag, and a lost record means IDs handed out again; "
                    "the transaction log holds the fence that lets one allocator at a time commit "
                    "for a partition. To run on them on purpose, set "
                    "kafka.allow_unreplicated: true");
  }
  for (const auto& t : facts.others) {
    if (auto shortfall = ReplicationShortfall(t, brokers)) warnings.push_back(*shortfall);
  }
  return warnings;
}

Result<void> CheckPeerLayout(const ClusterLayout& ours, const ClusterLayout& peer, size_t i,
                             const std::string& bootstrap) {
  const std::string at = "datacenter.peers[" + std::to_string(i) + "] (" + bootstrap + ")";
  if (!ours.state_topic_id.empty() && peer.state_topic_id == ours.state_topic_id) {
    return Fail(Code::kInvalidArgument,
                at + ": is this cluster's own Kafka (the same state topic id " +
                    ours.state_topic_id +
                    "); list the kafka.bootstrap of the other datacenters' clusters");
  }
  if (peer.datacenter.count != ours.datacenter.count) {
    return Fail(Code::kInvalidArgument,
                "datacenter.count: this cluster is " + ours.datacenter.Describe() + ", but " + at +
                    " records " + peer.datacenter.Describe() +
                    ": the datacenters split the ID space differently and their IDs could be "
                    "equal. Every datacenter needs the same datacenter.count");
  }
  if (peer.datacenter.index == ours.datacenter.index) {
    return Fail(Code::kInvalidArgument,
                "datacenter.index: " + std::to_string(ours.datacenter.index) +
                    " is also the index of the cluster at " + at +
                    ": both would lease the same worker ids and hand out the same segment IDs. "
                    "Give every datacenter its own datacenter.index (0 to " +
                    std::to_string(ours.datacenter.count - 1) +
                    "); was this config copied from the other datacenter?");
  }
  return {};
}

namespace {

// What ResolveLayout checks, in one look at the cluster.
struct ClusterFacts {
  TopicFacts layout;
  ReplicationFacts replication;
};

// Kafka's own topics kleaf's guarantees also rest on: the transaction log, whose fence I1 and I5
// rest on (guarded once the brokers describe it: Kafka creates it at the first transaction, and
// without the right to describe it nodes only warn), and the group offsets (only warned about).
constexpr const char* kTransactionLog = "__transaction_state";
constexpr const char* kKafkaInternalTopics[] = {kTransactionLog, "__consumer_offsets"};

// Describes `all` until none of `guarded` is unknown, or until the deadline. The topics exist
// (EnsureClusterTopics made them), but a broker that has not caught up with a topic just created
// answers "unknown topic".
[[nodiscard]] Result<kafka::ClusterDescription> DescribeWhenKnown(
    const kafka::Properties& props, const std::vector<std::string>& guarded,
    const std::vector<std::string>& all, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto describe = [&] {
    return kafka::DescribeCluster(
        props, all, {"cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas"},
        TimeLeft(deadline));
  };
  auto lagging = [&guarded](const kafka::ClusterDescription& c) {
    return std::any_of(guarded.begin(), guarded.end(), [&c](const std::string& t) {
      const auto& d = c.topics.at(t);
      return !d && d.error().code == Code::kNotFound;
    });
  };
  auto cluster = describe();
  while (cluster && lagging(*cluster) &&
         std::chrono::steady_clock::now() + std::chrono::milliseconds(200) < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cluster = describe();
  }
  return cluster;
}

TopicReplication ReplicationOf(const std::string& topic, const kafka::DescribedTopic& d) {
  TopicReplication r{topic, d.info.partitions, d.info.replication_factor, 0};
  if (auto it = d.configs.find("min.insync.replicas"); it != d.configs.end()) {
    int32_t v = 0;
    if (std::from_chars(it->second.data(), it->second.data() + it->second.size(), v).ec ==
        std::errc()) {
      r.min_insync_replicas = v;
    }
  }
  return r;
}

[[nodiscard]] Result<ClusterFacts> DescribeTopics(const kafka::Properties& props,
                                                  const ClusterTopics& names,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::string> guarded{names.state, names.requests, names.layout};
  std::vector<std::string> others{names.replies};
  if (!names.ids.empty()) others.push_back(names.ids);
  for (const char* internal : kKafkaInternalTopics) others.emplace_back(internal);
  std::vector<std::string> all = guarded;
  all.insert(all.end(), others.begin(), others.end());
  auto cluster = DescribeWhenKnown(props, guarded, all, timeout);
  if (!cluster) return std::unexpected(cluster.error());
  ClusterFacts facts;
  facts.replication.brokers = cluster->brokers;
  for (const auto& topic : guarded) {
    const auto& d = cluster->topics.at(topic);
    if (!d) return std::unexpected(d.error());
    facts.replication.guarded.push_back(ReplicationOf(topic, *d));
  }
  // The others only where the brokers describe them: the replies topic of a gateway that has not
  // made it yet, Kafka's topics before their first use or without the right to describe them.
  for (const auto& topic : others) {
    if (const auto& d = cluster->topics.at(topic); d) {
      TopicReplication r = ReplicationOf(topic, *d);
      if (topic == kTransactionLog) {
        auto unclean = d->configs.find("unclean.leader.election.enable");
        r.unclean_leader_election = unclean != d->configs.end() && unclean->second == "true";
        facts.replication.guarded.push_back(std::move(r));
      } else {
        facts.replication.others.push_back(std::move(r));
      }
    }
  }
  const auto& requests = *cluster->topics.at(names.requests);
  const auto& state = *cluster->topics.at(names.state);
  auto config = [&state](const char* name) {
    auto it = state.configs.find(name);
    return it != state.configs.end() ? it->second : std::string();
  };
  facts.layout = TopicFacts{requests.info.partitions, state.info.partitions, state.info.id,
                            config("cleanup.policy"), config("unclean.leader.election.enable")};
  return facts;
}

[[nodiscard]] Result<std::vector<ClusterLayout>> ReadLayouts(kafka::PartitionReader& reader,
                                                             const ClusterTopics& names,
                                                             std::chrono::milliseconds timeout) {
  std::vector<ClusterLayout> out;
  std::optional<Error> bad;
  auto end = reader.ReadToEnd(
      names.layout, 0, 0,
      [&](const kafka::Message& m) {
        if (!m.value) return;
        auto l = wire::DecodeLayout(*m.value);
        if (l) {
          out.push_back(std::move(*l));
        } else {
          bad = l.error();
        }
      },
      timeout);
  if (!end) return std::unexpected(end.error());
  if (bad) {
    return Fail(Code::kFailedPrecondition, "topic " + names.layout + ": " + bad->message);
  }
  return out;
}

// ReadLayouts in attempts of at most 5 s, each with a new reader, until `deadline`. A reader's
// handle that learned the layout partition's leader just before that broker died keeps asking the
// dead broker (connections refused) after Kafka elected another leader; a new handle asks the
// cluster who leads it now.
[[nodiscard]] Result<std::vector<ClusterLayout>> ReadLayoutsUntil(
    const kafka::Properties& props, const ClusterTopics& names,
    std::chrono::steady_clock::time_point deadline) {
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  while (true) {
    const auto attempt_end = std::min(deadline, steady_clock::now() + milliseconds(5000));
    auto reader = kafka::PartitionReader::Create(props);
    if (!reader) return std::unexpected(reader.error());
    auto recorded = ReadLayouts(**reader, names,
                                std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                                              attempt_end - steady_clock::now())));
    if (recorded || recorded.error().code != Code::kUnavailable ||
        steady_clock::now() + milliseconds(200) >= deadline) {
      return recorded;
    }
  }
}

}  // namespace

Result<ClusterLayout> ResolveLayout(const kafka::Properties& props, const ClusterTopics& names,
                                    int32_t configured, const std::string& node_id,
                                    std::chrono::milliseconds timeout,
                                    const allocator::Datacenter& dc, bool allow_unreplicated) {
  // One deadline for the whole check: a node that cannot reach Kafka gives up within `timeout`.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto facts = DescribeTopics(props, names, TimeLeft(deadline));
  if (!facts) return std::unexpected(facts.error());
  auto warnings = CheckReplication(facts->replication, allow_unreplicated);
  // A broker applies a topic's new settings (kafka-configs.sh --alter) a moment after the
  // controller committed them, and the describe may ask one that has not yet: an operator who
  // fixed the topic and started the node at once was refused for a setting already fixed
  // (ReplicationCluster3Test, 3 runs of 3 on one machine). So a refusal is read again once,
  // after the brokers had time to catch up, before it stands.
  constexpr std::chrono::milliseconds kSettingsSettle{3000};
  if (!warnings && std::chrono::steady_clock::now() + kSettingsSettle < deadline) {
    std::this_thread::sleep_for(kSettingsSettle);
    facts = DescribeTopics(props, names, TimeLeft(deadline));
    if (!facts) return std::unexpected(facts.error());
    warnings = CheckReplication(facts->replication, allow_unreplicated);
  }
  if (!warnings) return std::unexpected(warnings.error());
  for (const auto& w : *warnings) spdlog::warn("[replication] {}", w);
  auto recorded = ReadLayoutsUntil(props, names, deadline);
  if (!recorded) return std::unexpected(recorded.error());
  auto layout = CheckLayout(names, facts->layout, configured, *recorded, dc);
  if (!layout || !recorded->empty()) return layout;
  // The first node of this cluster: record what every later node must find. Two first nodes may
  // race; both write what the broker described, and the re-read below sees any disagreement.
  layout->written_by = node_id;
  layout->written_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  auto producer = kafka::Producer::Create(props);
  if (!producer) return std::unexpected(producer.error());
  std::optional<Error> failed;
  if (auto sent = (*producer)->Send(names.layout, 0, "layout", wire::EncodeLayout(*layout), {},
                                    [&failed](Result<int64_t> r) {
                                      if (!r) failed = r.error();
                                    });
      !sent) {
    return std::unexpected(sent.error());
  }
  if (auto f = (*producer)->Flush(TimeLeft(deadline)); !f) return std::unexpected(f.error());
  if (failed) return std::unexpected(*failed);
  spdlog::info("[layout] recorded {} partitions, state topic id '{}' and {} in {}",
               layout->partitions, layout->state_topic_id, layout->datacenter.Describe(),
               names.layout);
  recorded = ReadLayoutsUntil(props, names, deadline);
  if (!recorded) return std::unexpected(recorded.error());
  return CheckLayout(names, facts->layout, configured, *recorded, dc);
}

Result<void> CheckPeers(const kafka::Properties& props, const ClusterTopics& names,
                        const ClusterLayout& ours, const std::vector<std::string>& peers,
                        std::chrono::milliseconds timeout_each) {
  for (size_t i = 0; i < peers.size(); ++i) {
    kafka::Properties peer_props = props;
    peer_props["bootstrap.servers"] = peers[i];
    peer_props["client.id"] = props.contains("client.id") ? props.at("client.id") + "-peer-check"
                                                          : std::string("kleaf-peer-check");
    auto reader = kafka::PartitionReader::Create(peer_props);
    if (!reader) return std::unexpected(reader.error());
    auto recorded = ReadLayouts(**reader, names, timeout_each);
    if (!recorded) {
      spdlog::warn(
          "[layout] datacenter.peers[{}] ({}): not checked, its layout topic {} could not be read "
          "within {} ms: {}",
          i, peers[i], names.layout, timeout_each.count(), recorded.error().message);
      continue;
    }
    if (recorded->empty()) {
      spdlog::info("[layout] datacenter.peers[{}] ({}): no layout recorded yet; not checked", i,
                   peers[i]);
      continue;
    }
    if (auto ok = CheckPeerLayout(ours, recorded->front(), i, peers[i]); !ok) return ok;
    spdlog::info("[layout] datacenter.peers[{}] ({}) is {}: checked", i, peers[i],
                 recorded->front().datacenter.Describe());
  }
  return {};
}

Result<void> CheckStoreTopic(const std::optional<std::string>& stored, const std::string& name,
                             const std::string& id, const std::string& state_path) {
  if (!stored) return {};
  const auto space = stored->find(' ');
  const std::string stored_name = stored->substr(0, space);
  const std::string stored_id = space == std::string::npos ? "" : stored->substr(space + 1);
  if (stored_name != name) {
    return Fail(Code::kFailedPrecondition,
                "state.path " + state_path + " holds the state of topic " + stored_name + ", not " +
                    name +
                    " (is kafka.topic_prefix right?). An allocator's store is a view of one "
                    "state topic; give this node its own state.path");
  }
  if (!stored_id.empty() && !id.empty() && stored_id != id) {
    return Fail(Code::kFailedPrecondition,
                "topic " + name + " was deleted and recreated (id " + id + "; state.path " +
                    state_path + " holds the state of id " + stored_id +
                    "). Its records, the max_id of every tag, are gone. Restore the state from an "
                    "export (docs/operations.md, \"Layout refusals\")");
  }
  return {};
}

Result<void> BindStoreToStateTopic(state::Store& store, const ClusterTopics& names,
                                   const ClusterLayout& layout, const std::string& state_path) {
  auto stored = store.GetText(kStateTopicText);
  if (!stored) return std::unexpected(stored.error());
  if (auto ok = CheckStoreTopic(*stored, names.state, layout.state_topic_id, state_path); !ok) {
    return ok;
  }
  const std::string now = names.state + " " + layout.state_topic_id;
  if (*stored == now) return {};
  return store.PutText(kStateTopicText, now);
}

}  // namespace kleaf::cluster
