#include "allocator/readiness.h"

#include <string>

namespace kleaf::allocator {

std::vector<ReadyCheck> NodeReadiness(const AllocatorNode& node, const kafka::BrokerProbe& probe) {
  auto s = node.status();
  std::vector<ReadyCheck> checks = {probe.Check()};
  checks.push_back({"group", s.member,
                    s.member ? "member of the allocators' consumer group"
                             : "not (or no longer) assigned partitions by the consumer group"});
  std::string serving;
  for (int32_t p : s.serving) serving += (serving.empty() ? "" : ",") + std::to_string(p);
  checks.push_back({"partitions", s.pending == 0,
                    std::to_string(s.pending) +
                        " assigned partition(s) not restored yet; serving {" + serving + "}"});
  return checks;
}

std::vector<ReadyCheck> ClientReadiness(const KafkaAllocatorClient& client,
                                        const kafka::BrokerProbe& probe) {
  std::vector<ReadyCheck> checks = {probe.Check()};
  const int64_t reply = client.last_reply_mono_ns();
  const bool answering = reply >= 0 && client.last_give_up_mono_ns() < reply;
  checks.push_back({"allocators", answering,
                    answering   ? "the last request was answered"
                    : reply < 0 ? "no allocator has answered yet"
                                : "a request got no answer after every attempt"});
  return checks;
}

}  // namespace kleaf::allocator
