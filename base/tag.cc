#include "base/tag.h"

namespace kleaf {

bool IsValidTag(std::string_view tag) {
  if (tag.empty() || tag.size() > kMaxTagLength) return false;
  for (char c : tag) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<void> ValidateTag(std::string_view tag) {
  if (IsValidTag(tag)) return {};
  return Fail(Code::kInvalidArgument,
              "invalid tag: a tag is 1-128 characters of [A-Za-z0-9_.:-]");
}

}  // namespace kleaf
