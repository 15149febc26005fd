// One condition of a node's readiness, as /readyz lists it: each component says whether it is
// ready in these words, and the HTTP layer only renders the list (http::ReadyResponse).
#pragma once

#include <string>

namespace kleaf {

// e.g. {"worker_lease", false, "renewal failed: ..."}.
struct ReadyCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

}  // namespace kleaf
