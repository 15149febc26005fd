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

// A1's check across nodes: the rate of an owner's RAW readings against this node's, over a window
// of at least its length, with the error of half a round trip at each end.
TEST(OwnerClockRatesTest, AnOwnersRateIsEstimatedOverAWindowWithItsError) {
  constexpr int64_t kS = 1'000'000'000;
  OwnerClockRates rates(2 * kS);
  const std::string a = "alloc-a:8081";
  // The owner runs 1 % fast; its reading is taken in the middle of each 2 ms round trip.
  const auto answer = [&](const std::string& owner, int64_t here_ns, double rate,
                          int64_t owner_base) {
    rates.Note(owner, owner_base + static_cast<int64_t>(static_cast<double>(here_ns) * rate),
               here_ns - 1'000'000, here_ns + 1'000'000);
  };
  answer(a, 10 * kS, 1.01, 0);
  answer(a, 11 * kS, 1.01, 0);
  EXPECT_FALSE(rates.Of(a)) << "one second is short of the window";
  answer(a, 12 * kS, 1.01, 0);
  auto e = rates.Of(a);
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->ppm, 10'000, 1);
  EXPECT_NEAR(e->error_ppm, 1'000, 1) << "1 ms at each end over 2 s";
  // The next window starts at that answer.
  answer(a, 14 * kS, 1.01, 0);
  EXPECT_NEAR(rates.Of(a)->ppm, 10'000, 1);
  // Another owner, on this node's rate; and one whose clock goes back (another machine at the
  // address) starts a window again rather than giving an estimate.
  const std::string b = "alloc-b:8081";
  answer(b, 10 * kS, 1.0, 5 * kS);
  answer(b, 13 * kS, 1.0, 5 * kS);
  EXPECT_NEAR(rates.Of(b)->ppm, 0, 1);
  answer(b, 16 * kS, 1.0, -10 * kS);
  answer(b, 17 * kS, 1.0, -10 * kS);
  EXPECT_NEAR(rates.Of(b)->ppm, 0, 1) << "the estimate before the jump stands";
  answer(b, 18 * kS, 1.0, -10 * kS);
  EXPECT_NEAR(rates.Of(b)->ppm, 0, 1);
  EXPECT_FALSE(rates.Of("alloc-c:8081"));
}

}  // namespace
}  // namespace kleaf::cluster
