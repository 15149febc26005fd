#include "kafka/message.h"

namespace kleaf::kafka {

const std::string* Message::header(std::string_view name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->name == name) return &it->value;
  }
  return nullptr;
}

bool IsAuthorizationFailure(std::string_view message) {
  // rd_kafka_err2str of every *_AUTHORIZATION_FAILED code ("Broker: Group authorization failed");
  // the broker's own message, where librdkafka passes it on, says the same.
  return message.find("authorization failed") != std::string_view::npos ||
         message.find("Authorization failed") != std::string_view::npos;
}

int32_t PartitionFor(std::string_view key, int32_t partitions) {
  uint32_t h = 2166136261u;
  for (unsigned char c : key) {
    h ^= c;
    h *= 16777619u;
  }
  return static_cast<int32_t>(h % static_cast<uint32_t>(partitions));
}

}  // namespace kleaf::kafka
