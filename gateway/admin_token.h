// The admin token that guards the gateway's admin routes (/api/v1/tags, /api/v1/workers).
#pragma once

#include <string>

#include "base/error.h"

namespace kleaf::gateway {

// `configured` (admin.token) when set, else the token in <state_path>/admin.token, created with a
// random value (mode 0600 from the start) if missing or shorter than 16 characters.
[[nodiscard]] Result<std::string> AdminToken(const std::string& configured,
                                             const std::string& state_path);

}  // namespace kleaf::gateway
