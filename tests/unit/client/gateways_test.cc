// ParseGateways: the "host:port,..." lists HttpClient and the examples take.
#include <gtest/gtest.h>

#include "kleaf/http_client.h"

namespace kleaf {
namespace {

TEST(ParseGatewaysTest, ReadsHostsPortsAndBracketedIpv6) {
  auto list = ParseGateways("127.0.0.1:8080, gw-b.example:80 ,[::1]:9000");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(*list, (std::vector<GatewayAddress>{
                       {"127.0.0.1", 8080}, {"gw-b.example", 80}, {"::1", 9000}}));
}

TEST(ParseGatewaysTest, RejectsWhatIsNotHostColonPort) {
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:80x",
                          "a:1,,b:2", "::1:80", "[::1:80", "a:1,"}) {
    auto list = ParseGateways(bad);
    ASSERT_FALSE(list) << "accepted \"" << bad << "\"";
    EXPECT_EQ(list.error().kind, ClientError::Kind::kInvalidArgument) << bad;
  }
}

TEST(HttpClientOptionsTest, RejectsBadOptionsUpFront) {
  HttpClient::Options none;
  EXPECT_FALSE(HttpClient::Create(none));
  HttpClient::Options big;
  big.gateways = {{"127.0.0.1", 1}};
  big.buffer_size = 20000;  // more than a request may ask for
  EXPECT_FALSE(HttpClient::Create(big));
  big.buffer_size = 100;
  EXPECT_TRUE(HttpClient::Create(big));
}

TEST(HttpClientOptionsTest, BadTagAndCountFailLocallyWithoutARequest) {
  HttpClient::Options options;
  options.gateways = {{"127.0.0.1", 1}};
  auto client = HttpClient::Create(options);
  ASSERT_TRUE(client);
  auto bad_tag = (*client)->NextSegment("no spaces");
  ASSERT_FALSE(bad_tag);
  EXPECT_EQ(bad_tag.error().kind, ClientError::Kind::kInvalidArgument);
  auto bad_count = (*client)->Snowflakes("ok", 0);
  ASSERT_FALSE(bad_count);
  EXPECT_EQ(bad_count.error().kind, ClientError::Kind::kInvalidArgument);
  EXPECT_EQ((*client)->stats().requests, 0);
}

TEST(ParseGatewaysTest, ReadsTheDatacenterOfAnEntry) {
  auto list = ParseGateways("10.0.0.1:8080@0, 10.1.0.1:8080@1,[::1]:9000@12,10.2.0.1:80");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(
      *list,
      (std::vector<GatewayAddress>{
          {"10.0.0.1", 8080, 0}, {"10.1.0.1", 8080, 1}, {"::1", 9000, 12}, {"10.2.0.1", 80, -1}}));
  for (const char* bad : {"a:80@", "a:80@x", "a:80@-1", "a:@1"}) {
    EXPECT_FALSE(ParseGateways(bad)) << "accepted \"" << bad << "\"";
  }
}

// The choice and the failover order with a local datacenter: its gateways first, from the one
// that answered last; then the other datacenters'; a gateway that just failed after every other.
TEST(GatewayOrderTest, LocalDatacenterFirstThenTheOthersAndDemotedLast) {
  const std::vector<GatewayAddress> gws = {
      {"a0", 1, 0}, {"b1", 1, 1}, {"c0", 1, 0}, {"d1", 1, 1}, {"e0", 1, 0}};
  const std::vector<bool> none(gws.size(), false);
  using V = std::vector<size_t>;
  // No preference: list order from the last that answered, as without datacenters.
  EXPECT_EQ(GatewayOrder(gws, -1, 3, none), (V{3, 4, 0, 1, 2}));
  EXPECT_EQ(GatewayOrder(gws, 0, 0, none), (V{0, 2, 4, 1, 3}));
  EXPECT_EQ(GatewayOrder(gws, 0, 2, none), (V{2, 4, 0, 3, 1}));
  EXPECT_EQ(GatewayOrder(gws, 1, 0, none), (V{1, 3, 0, 2, 4}));
  // After a failover the last that answered is remote: the local ones still come first.
  EXPECT_EQ(GatewayOrder(gws, 0, 3, none), (V{4, 0, 2, 3, 1}));
  // DC 0's gateways failed a moment ago: DC 1's first, DC 0's last (tried again, never dropped).
  const std::vector<bool> dc0_down = {true, false, true, false, true};
  EXPECT_EQ(GatewayOrder(gws, 0, 0, dc0_down), (V{1, 3, 0, 2, 4}));
  // One local gateway down: the other local ones before any remote one.
  const std::vector<bool> a0_down = {true, false, false, false, false};
  EXPECT_EQ(GatewayOrder(gws, 0, 0, a0_down), (V{2, 4, 1, 3, 0}));
}

TEST(HttpClientOptionsTest, ALocalDatacenterNeedsOneOfItsGateways) {
  HttpClient::Options options;
  options.gateways = {{"127.0.0.1", 1, 1}};
  options.local_datacenter = 0;
  auto client = HttpClient::Create(options);
  ASSERT_FALSE(client);
  EXPECT_NE(client.error().message.find("local_datacenter 0"), std::string::npos);
  options.gateways.push_back({"127.0.0.1", 2, 0});
  EXPECT_TRUE(HttpClient::Create(options));
}

}  // namespace
}  // namespace kleaf
