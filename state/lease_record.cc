#include "state/lease_record.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kleaf::state {

std::string EncodeLease(const LeaseRecord& r) {
  return nlohmann::json{{"generation", r.generation},
                        {"holder", r.holder},
                        {"node", r.node},
                        {"lease_ms", r.lease_ms},
                        {"waited", r.waited},
                        {"state", r.state == LeaseState::kHeld ? "held" : "released"}}
      .dump();
}

Result<LeaseRecord> DecodeLease(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(Code::kInternal, "corrupt lease record: not a JSON object");
  }
  try {
    LeaseRecord r;
    const auto& generation = j.at("generation");
    if (!generation.is_number_unsigned() || generation.get<uint64_t>() < 1) {
      throw std::invalid_argument("generation is not a positive integer");
    }
    r.generation = generation.get<uint64_t>();
    r.holder = j.at("holder").get<std::string>();
    r.node = j.value("node", "");
    const auto& lease = j.at("lease_ms");
    if (!lease.is_number_integer() || lease.get<int64_t>() < 0) {
      throw std::invalid_argument("lease_ms is not a non-negative integer");
    }
    r.lease_ms = lease.get<int64_t>();
    r.waited = j.at("waited").get<bool>();
    const std::string state = j.at("state").get<std::string>();
    if (state == "held") {
      r.state = LeaseState::kHeld;
    } else if (state == "released") {
      r.state = LeaseState::kReleased;
    } else {
      throw std::invalid_argument("state '" + state + "' is neither held nor released");
    }
    return r;
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string("corrupt lease record: ") + e.what());
  }
}

std::string LeaseKey(int32_t partition) { return "lse/" + std::to_string(partition); }

bool IsLeaseKey(std::string_view key) { return key.starts_with("lse/"); }

}  // namespace kleaf::state
