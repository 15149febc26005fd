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

}  // namespace
}  // namespace kleaf
