// Business tags (biz_tag): 1-128 characters of [A-Za-z0-9_.:-].
#pragma once

#include <string_view>

#include "base/error.h"

namespace kleaf {

inline constexpr size_t kMaxTagLength = 128;

bool IsValidTag(std::string_view tag);

// kInvalidArgument naming the rule when `tag` is not valid.
[[nodiscard]] Result<void> ValidateTag(std::string_view tag);

}  // namespace kleaf
