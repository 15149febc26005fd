#include "cluster/readiness.h"

#include <chrono>
#include <string>

namespace kleaf::cluster {
namespace {

// How long a node stays ready while Kafka moves things under it: a dead broker's leaders and group
// coordinators (its session timeout, 9 s by default, then an election), and the allocators'
// rebalance and takeovers after it. One that lasts longer takes the node out of service.
constexpr std::chrono::milliseconds kKafkaMoveGrace{30'000};

std::string GraceText() {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kKafkaMoveGrace).count()) +
         " s";
}

}  // namespace

std::vector<ReadyCheck> NodeReadiness(const AllocatorNode& node, const kafka::BrokerProbe& probe) {
  auto s = node.status();
  std::vector<ReadyCheck> checks = {probe.Check()};
  // A rebalance after the node was a member (an allocator joined or left, or Kafka moves the group
  // coordinator off a dead broker: its session timeout, then the rejoin) is not a reason to take
  // the node out of service; one that lasts longer than kKafkaMoveGrace is.
  constexpr int64_t kRebalanceGraceMs = kKafkaMoveGrace.count();
  const bool rebalancing = s.left_group_ms_ago >= 0 && s.left_group_ms_ago < kRebalanceGraceMs;
  checks.push_back({"group", s.member || rebalancing,
                    s.member ? "member of the allocators' consumer group"
                    : rebalancing
                        ? "rejoining the consumer group (a rebalance for " +
                              std::to_string(s.left_group_ms_ago) + " ms)"
                        : "not (or no longer) assigned partitions by the consumer group"});
  std::string serving;
  for (int32_t p : s.serving) serving += (serving.empty() ? "" : ",") + std::to_string(p);
  // Partitions taken over after the node served all of its own (a rebalance, an allocator or a
  // broker lost): the takeover waits for Kafka to move the dead broker's leaders and coordinators,
  // and is not a reason to take the node out of service unless it lasts longer than
  // kKafkaMoveGrace.
  const bool taking_over =
      s.served_all_once && s.pending_for_ms >= 0 && s.pending_for_ms < kRebalanceGraceMs;
  checks.push_back({"partitions", s.pending == 0 || taking_over,
                    std::to_string(s.pending) +
                        " assigned partition(s) not restored yet; serving {" + serving + "}"});
  return checks;
}

std::vector<ReadyCheck> ClientReadiness(const KafkaAllocatorClient& client,
                                        const kafka::BrokerProbe& probe) {
  // While a broker dies and Kafka moves its leaders (its session timeout, 9 s by default, then an
  // election), and the allocators rebalance and take partitions over, requests are given up and
  // sent again; the gateway serves from its buffers meanwhile, so it stays ready unless no reply
  // came for kKafkaMoveGrace (the allocators' own grace for the same moves).
  constexpr int64_t kLeaderMoveGraceNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kKafkaMoveGrace).count();
  std::vector<ReadyCheck> checks = {probe.Check()};
  const int64_t reply = client.last_reply_mono_ns();
  const bool given_up = reply >= 0 && client.last_give_up_mono_ns() > reply;
  const bool answering =
      reply >= 0 && (!given_up || client.now_mono_ns() - reply < kLeaderMoveGraceNs);
  checks.push_back(
      {"allocators", answering,
       reply < 0  ? "no allocator has answered yet"
       : given_up ? (answering ? "a request got no answer after every attempt, but "
                                 "the allocators answered in the last " +
                                     GraceText()
                               : "no answer from the allocators for " + GraceText() + " and more")
                  : "the last request was answered"});
  return checks;
}

}  // namespace kleaf::cluster
