// One condition of a node's readiness, as /readyz lists it: each component says whether it is
// ready in these words, and the HTTP layer only renders the list (http::ReadyResponse).
#pragma once

#include <string>

namespace kleaf {

// e.g. {"worker_lease", false, "renewal failed: ..."}. A check that is not `required` is listed
// (with its ok and detail, for people and alerts) but does not make the node unready: a gateway
// stays ready while Kafka is away as long as it can hand out IDs from its buffers and lease.
struct ReadyCheck {
  std::string name;
  bool ok = false;
  std::string detail;
  bool required = true;
};

}  // namespace kleaf
