// The datacenter keys: defaults that change nothing, errors that name the key, the environment.
#include <gtest/gtest.h>

#include "config/config.h"

namespace kleaf::config {
namespace {

bool Says(const Result<Config>& c, std::string_view prefix) {
  return !c && c.error().message.starts_with(prefix);
}

TEST(DatacenterConfigTest, DefaultsAreOneDatacenter) {
  auto c = ParseConfig("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->datacenter.index, 0);
  EXPECT_EQ(c->datacenter.count, 1);
  EXPECT_TRUE(c->datacenter.peers.empty());
}

TEST(DatacenterConfigTest, ReadsIndexCountAndPeers) {
  auto c = ParseConfig(
      "kafka: {bootstrap: 'a:9092'}\n"
      "datacenter: {index: 1, count: 3, peers: ['b:9092', 'c:9092,c2:9092']}\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->datacenter.index, 1);
  EXPECT_EQ(c->datacenter.count, 3);
  EXPECT_EQ(c->datacenter.peers, (std::vector<std::string>{"b:9092", "c:9092,c2:9092"}));
}

TEST(DatacenterConfigTest, ErrorsNameTheKey) {
  EXPECT_TRUE(Says(ParseConfig("datacenter: {index: 2, count: 2}"), "datacenter.index:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {index: 1}"), "datacenter.index:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {count: 0}"), "datacenter.count:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {count: 1025}"), "datacenter.count:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {index: -1}"), "datacenter.index:"));
  // 4 worker bits hold 16 ids: 17 datacenters cannot each have one.
  EXPECT_TRUE(Says(ParseConfig("snowflake: {worker_bits: 4, sequence_bits: 18}\n"
                               "datacenter: {count: 17}"),
                   "datacenter.count:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {peers: ['b:9092']}"), "datacenter.peers:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {count: 2, peers: ['b:9092', 'c:9092']}"),
                   "datacenter.peers:"));
  EXPECT_TRUE(Says(ParseConfig("kafka: {bootstrap: 'a:9092'}\n"
                               "datacenter: {index: 1, count: 2, peers: ['a:9092']}"),
                   "datacenter.peers[0]:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {peers: 'b:9092'}"), "datacenter.peers:"));
  EXPECT_TRUE(Says(ParseConfig("datacenter: {region: eu}"), "datacenter.region: unknown key"));
}

TEST(DatacenterConfigTest, ObfuscatedDefaultsAndLargeListedBatchesAreRefused) {
  EXPECT_TRUE(Says(ParseConfig("segment: {default_id_mode: obfuscated}\n"
                               "datacenter: {count: 2}"),
                   "segment.default_id_mode:"));
  EXPECT_TRUE(Says(ParseConfig("producer: {streams: [{tag: order, batch_size: 50000}]}\n"
                               "datacenter: {count: 2}"),
                   "producer.streams[0].batch_size:"));
  EXPECT_TRUE(ParseConfig("producer: {streams: [{tag: order, batch_size: 50000}]}\n"));
}

TEST(DatacenterConfigTest, TheEnvironmentOverridesTheKeys) {
  auto c =
      ParseConfig("datacenter: {index: 0, count: 2}",
                  {{"KLEAF_DATACENTER__INDEX", "1"}, {"KLEAF_DATACENTER__PEERS", "[dc0:9092]"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->datacenter.index, 1);
  EXPECT_EQ(c->datacenter.peers, (std::vector<std::string>{"dc0:9092"}));
  auto bad = ParseConfig("", {{"KLEAF_DATACENTER__INDEX", "1"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("datacenter.index"), std::string::npos) << bad.error().message;
}

TEST(DatacenterConfigTest, StandaloneRefusesMoreThanOneDatacenter) {
  auto c = ParseConfig("datacenter: {index: 1, count: 2}");
  ASSERT_TRUE(c) << c.error().message;
  auto r = CheckConfigFor(Role::kStandalone, *c);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message.starts_with("datacenter.count:")) << r.error().message;
}

}  // namespace
}  // namespace kleaf::config
