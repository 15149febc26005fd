#include "base/tag.h"

#include <gtest/gtest.h>

namespace kleaf {
namespace {

TEST(TagTest, AcceptsTheAllowedAlphabet) {
  EXPECT_TRUE(IsValidTag("order"));
  EXPECT_TRUE(IsValidTag("a.b:c-d_E9"));
  EXPECT_TRUE(IsValidTag(std::string(128, 'x')));
}

TEST(TagTest, RejectsEmptyLongAndOtherCharacters) {
  EXPECT_FALSE(IsValidTag(""));
  EXPECT_FALSE(IsValidTag(std::string(129, 'x')));
  EXPECT_FALSE(IsValidTag("a b"));
  EXPECT_FALSE(IsValidTag("a/b"));
  EXPECT_FALSE(IsValidTag("a%20"));
  EXPECT_FALSE(IsValidTag("\xc3\xa9"));
  EXPECT_EQ(ValidateTag("a?").error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace kleaf
