#include "kafka/message.h"

namespace kleaf::kafka {

const std::string* Message::header(std::string_view name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->name == name) return &it->value;
  }
  return nullptr;
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
