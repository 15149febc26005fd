// The gateway's route table of the owner hop (cluster/owner_hop.h): the route an owner sends with
// its answers, and R8's net: an answer of an older lease generation than one seen is dropped.
#include <gtest/gtest.h>

#include "cluster/owner_hop.h"

namespace kleaf::cluster {
namespace {

TEST(OwnerRouteTest, ARouteIsAGenerationAndAnOptionalAddress) {
  EXPECT_EQ(EncodeOwnerRoute({7, "10.0.0.5:8081"}), "7 10.0.0.5:8081");
  EXPECT_EQ(EncodeOwnerRoute({3, ""}), "3");
  EXPECT_EQ(DecodeOwnerRoute("7 10.0.0.5:8081"), (OwnerRoute{7, "10.0.0.5:8081"}));
  EXPECT_EQ(DecodeOwnerRoute("12 alloc-0.alloc.kleaf:8081"),
            (OwnerRoute{12, "alloc-0.alloc.kleaf:8081"}));
  EXPECT_EQ(DecodeOwnerRoute("9 [::1]:8081"), (OwnerRoute{9, "[::1]:8081"}));
  EXPECT_EQ(DecodeOwnerRoute("3"), (OwnerRoute{3, ""}));
  for (const char* bad : {"", "x", "3 ", "3x", "-1 a:1", "3 host", "3 host:0", "3 a b:1"}) {
    EXPECT_FALSE(DecodeOwnerRoute(bad)) << bad;
  }
}

TEST(OwnerRoutesTest, ARouteIsLearnedFromAnAnswerAndReplacedByANewerGeneration) {
  OwnerRoutes routes(4);
  EXPECT_FALSE(routes.RouteOf(1));
  EXPECT_TRUE(routes.Note(1, {2, "a:1"}));
  EXPECT_EQ(routes.RouteOf(1), (OwnerRoute{2, "a:1"}));
  EXPECT_FALSE(routes.RouteOf(0)) << "a route is a partition's own";
  EXPECT_TRUE(routes.Note(1, {3, "b:1"}));
  EXPECT_EQ(routes.RouteOf(1), (OwnerRoute{3, "b:1"}));
  // A newer owner without the hop: its answers come through the requests topic only.
  EXPECT_TRUE(routes.Note(1, {4, ""}));
  EXPECT_FALSE(routes.RouteOf(1));
  // Out of range and generation 0 (no lease) are neither kept nor dropped.
  EXPECT_TRUE(routes.Note(9, {5, "c:1"}));
  EXPECT_TRUE(routes.Note(-1, {5, "c:1"}));
  EXPECT_TRUE(routes.Note(2, {0, "c:1"}));
  EXPECT_FALSE(routes.RouteOf(2));
}

TEST(OwnerRoutesTest, AnAnswerOfAnOlderGenerationThanOneSeenIsDropped) {
  OwnerRoutes routes(4);
  ASSERT_TRUE(routes.Note(2, {5, "new:1"}));
  EXPECT_FALSE(routes.Note(2, {4, "old:1"})) << "R8: an older generation's answer after a newer";
  EXPECT_EQ(routes.RouteOf(2), (OwnerRoute{5, "new:1"})) << "and its route is not learned";
  EXPECT_TRUE(routes.Note(2, {5, "new:1"}));
  EXPECT_TRUE(routes.Note(3, {1, "old:1"})) << "generations are per partition";
}

TEST(OwnerRoutesTest, AStaleRouteIsForgottenOnlyIfItIsStillTheOneKept) {
  OwnerRoutes routes(2);
  ASSERT_TRUE(routes.Note(0, {1, "a:1"}));
  ASSERT_TRUE(routes.Note(0, {2, "b:1"}));
  routes.Forget(0, {1, "a:1"});  // a call on the old route failed after the new one was learned
  EXPECT_EQ(routes.RouteOf(0), (OwnerRoute{2, "b:1"}));
  routes.Forget(0, {2, "b:1"});
  EXPECT_FALSE(routes.RouteOf(0));
  // Forgotten, not unseen: generation 2 still drops an older answer.
  EXPECT_FALSE(routes.Note(0, {1, "a:1"}));
}

}  // namespace
}  // namespace kleaf::cluster
