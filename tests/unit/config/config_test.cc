#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "tests/unit/testing/temp_dir.h"

namespace kleaf::config {
namespace {

using ::testing::StartsWith;

// The error of a YAML text that must not parse.
Error ParseError(const std::string& yaml) {
  auto r = ParseConfig(yaml);
  EXPECT_FALSE(r.has_value()) << "expected an error for:\n" << yaml;
  if (r) return Error{Code::kInternal, "<parsed>"};
  return r.error();
}

// Asserts that `yaml` fails with kInvalidArgument and a message starting with "<key>:".
void ExpectKeyError(const std::string& yaml, const std::string& key) {
  SCOPED_TRACE(yaml);
  Error e = ParseError(yaml);
  EXPECT_EQ(e.code, Code::kInvalidArgument);
  EXPECT_THAT(e.message, StartsWith(key + ":"));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "I5 with a lease", Settings: L is 0 or 1000-60000; δ at most L/10, or 1000 when L is 0 (a node
// at 0 holds no lease, so the default margin must not refuse it).
TEST(SequenceLeaseConfigTest, TheLeaseAndItsMarginAreCheckedAgainstEachOther) {
  ExpectKeyError("sequence:\n  lease_ms: 500\n", "sequence.lease_ms");
  ExpectKeyError("sequence:\n  lease_ms: 60001\n", "sequence.lease_ms");
  ExpectKeyError("sequence:\n  lease_ms: 2000\n  lease_margin_ms: 201\n",
                 "sequence.lease_margin_ms");
  ExpectKeyError("sequence:\n  lease_ms: 0\n  lease_margin_ms: 1001\n", "sequence.lease_margin_ms");
  ExpectKeyError("sequence:\n  clock_drift_ppm: 0\n", "sequence.clock_drift_ppm");
  auto zero = ParseConfig("sequence:\n  lease_ms: 0\n");
  ASSERT_TRUE(zero) << zero.error().message;
  EXPECT_EQ(zero->sequence.lease_ms, 0);
  EXPECT_EQ(zero->sequence.lease_margin_ms, 100);
  auto set = ParseConfig("sequence:\n  lease_ms: 2000\n  lease_margin_ms: 200\n");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->sequence.lease_margin_ms, 200);
}

// R3 and R5: the renewal interval is 0 (L/3) or 100 to half of what a lease lasts; the idle release
// is 0 (never) or at least three renewal intervals; neither is checked when L is 0.
TEST(SequenceLeaseConfigTest, TheRenewalAndTheIdleReleaseAreCheckedAgainstTheLease) {
  ExpectKeyError("sequence:\n  lease_renew_ms: 99\n", "sequence.lease_renew_ms");
  // L 3000, ρ 0.001, δ 100: a lease lasts 2897 ms, half of it 1448.
  ExpectKeyError("sequence:\n  lease_ms: 3000\n  lease_renew_ms: 1449\n",
                 "sequence.lease_renew_ms");
  ExpectKeyError("sequence:\n  lease_ms: 3000\n  idle_release_ms: 2999\n",
                 "sequence.idle_release_ms");
  ExpectKeyError("sequence:\n  lease_renew_ms: 500\n  idle_release_ms: 1499\n",
                 "sequence.idle_release_ms");
  auto ok = ParseConfig(
      "sequence:\n  lease_ms: 3000\n  lease_renew_ms: 1448\n"
      "  idle_release_ms: 0\n");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->sequence.RenewIntervalMs(), 1448);
  auto defaults = ParseConfig("");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->sequence.RenewIntervalMs(), 1666);
  EXPECT_EQ(defaults->sequence.idle_release_ms, 60000);
  ExpectKeyError("sequence:\n  lease_ms: 0\n  lease_renew_ms: 30001\n", "sequence.lease_renew_ms");
  auto zero = ParseConfig("sequence:\n  lease_ms: 0\n  lease_renew_ms: 50\n  idle_release_ms: 1\n");
  ASSERT_TRUE(zero) << zero.error().message;
}

// R6: the share of a step left below which a section is raised ahead of need, in percent.
TEST(SequenceLeaseConfigTest, TheRaiseAheadShareIsAPercentOfAStep) {
  ExpectKeyError("sequence:\n  raise_ahead_percent: 9\n", "sequence.raise_ahead_percent");
  ExpectKeyError("sequence:\n  raise_ahead_percent: 101\n", "sequence.raise_ahead_percent");
  ExpectKeyError("sequence:\n  raise_ahead_percent: 0.5\n", "sequence.raise_ahead_percent");
  auto defaults = ParseConfig("");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->sequence.raise_ahead_percent, 50);
  auto set = ParseConfig("sequence:\n  raise_ahead_percent: 25\n");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->sequence.raise_ahead_percent, 25);
}

// The owner hop: where gateways reach an allocator (a host name too, unlike http.listen), and the
// allocator-only needs of sequence.owner_hop, checked for the role that serves the hop.
TEST(SequenceLeaseConfigTest, TheHopAddressIsAnAddressToConnectTo) {
  for (const char* good : {"alloc-0.alloc.kleaf.svc:8081", "10.0.0.5:1", "[::1]:65535", ""}) {
    auto c = ParseConfig(std::string("sequence:\n  hop_address: \"") + good + "\"\n");
    ASSERT_TRUE(c) << good << ": " << c.error().message;
    EXPECT_EQ(c->sequence.hop_address, good);
  }
  for (const char* bad : {"alloc-0", "alloc-0:0", "alloc-0:65536", "a b:1", "::1:80", ":80"}) {
    ExpectKeyError(std::string("sequence:\n  hop_address: \"") + bad + "\"\n",
                   "sequence.hop_address");
  }
  auto hop = ParseConfig("sequence:\n  owner_hop: true\n  lease_ms: 0\n");
  ASSERT_TRUE(hop) << hop.error().message;
  EXPECT_TRUE(CheckConfigFor(Role::kGateway,
                             [&] {
                               auto c = *hop;
                               c.kafka.bootstrap = "127.0.0.1:9092";
                               return c;
                             }()))
      << "a gateway calls owners; it holds no lease and needs no http.listen";
  auto allocator = *hop;
  allocator.kafka.bootstrap = "127.0.0.1:9092";
  auto refused = CheckConfigFor(Role::kAllocator, allocator);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, StartsWith("sequence.owner_hop:"));
}

TEST(ConfigDefaultsTest, EmptyTextGivesTheDocumentedDefaults) {
  for (const std::string text : {"", "\n", "# only a comment\n", "~"}) {
    SCOPED_TRACE(text);
    auto c = ParseConfig(text);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_FALSE(c->node.id.empty());  // the host name
    EXPECT_EQ(c->http.listen, "127.0.0.1:8080");
    EXPECT_FALSE(c->http.listen_set);
    EXPECT_EQ(c->http.threads, 2);
    EXPECT_EQ(c->http.max_batch, 10000);
    EXPECT_EQ(c->state.path, "./data");
    EXPECT_EQ(c->admin.token, "");
    EXPECT_FALSE(c->segment.auto_create);
    EXPECT_EQ(c->segment.default_step, 1000);
    EXPECT_EQ(c->segment.max_step, 1000000);
    EXPECT_EQ(c->segment.preload_percent, 10);
    EXPECT_EQ(c->segment.wait_ms, 100);
    EXPECT_EQ(c->snowflake.worker_id, 0);
    EXPECT_EQ(c->snowflake.epoch_ms, 1288834974657);
    EXPECT_EQ(c->snowflake.timestamp_bits, 41);
    EXPECT_EQ(c->snowflake.worker_bits, 10);
    EXPECT_EQ(c->snowflake.sequence_bits, 12);
    EXPECT_EQ(c->snowflake.time_unit_ms, 1);
    EXPECT_TRUE(c->snowflake.random_sequence_start);
    EXPECT_EQ(c->snowflake.max_backward_ms, 5);
    EXPECT_EQ(c->kafka.bootstrap, "");
    EXPECT_EQ(c->log.level, "info");
  }
}

TEST(ConfigDefaultsTest, DefaultConfigFillsTheNodeIdAndPassesItsOwnChecks) {
  Config c = DefaultConfig();
  EXPECT_FALSE(c.node.id.empty());
  auto parsed = ParseConfig("");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->node.id, c.node.id);
}

TEST(ConfigDefaultsTest, AnEmptySectionKeepsItsDefaults) {
  auto c = ParseConfig("http:\nsnowflake:\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->http.listen, "127.0.0.1:8080");
  EXPECT_EQ(c->snowflake.timestamp_bits, 41);
}

TEST(ConfigContractKeysTest, EveryContractKeyParses) {
  auto c = ParseConfig(R"(
node:
  id: node-7
http:
  listen: 0.0.0.0:9090
state:
  path: /var/lib/kleaf
kafka:
  bootstrap: broker1:9092,broker2:9092
admin:
  token: 0123456789abcdef-secret
snowflake:
  worker_id: 1023
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->node.id, "node-7");
  EXPECT_EQ(c->http.listen, "0.0.0.0:9090");
  EXPECT_TRUE(c->http.listen_set);
  EXPECT_EQ(c->state.path, "/var/lib/kleaf");
  EXPECT_EQ(c->kafka.bootstrap, "broker1:9092,broker2:9092");
  EXPECT_EQ(c->admin.token, "0123456789abcdef-secret");
  EXPECT_EQ(c->snowflake.worker_id, 1023);
}

TEST(ConfigContractKeysTest, FlowStyleAndQuotedValuesParse) {
  auto c = ParseConfig(
      "{node: {id: 'a b'}, http: {listen: \"[::1]:0\"}, snowflake: {worker_id: 0}}");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->node.id, "a b");
  EXPECT_EQ(c->http.listen, "[::1]:0");
  EXPECT_EQ(c->snowflake.worker_id, 0);
}

TEST(ConfigKeysTest, EveryOtherKeyParses) {
  auto c = ParseConfig(R"(
http:
  threads: 8
  max_batch: 500
  header_limit_bytes: 4096
  body_limit_bytes: 2048
  idle_timeout_ms: 1000
  max_connections: 64
  status_history_interval_ms: 250
segment:
  auto_create: true
  default_step: 50
  max_step: 5000
  preload_percent: 20
  wait_ms: 0
  fetch_threads: 3
  retry_after_s: 7
snowflake:
  epoch_ms: 1000000000000
  timestamp_bits: 40
  worker_bits: 11
  sequence_bits: 12
  time_unit_ms: 10
  random_sequence_start: false
  max_backward_ms: 0
  persist_interval_ms: 100
  reserve_ms: 200
  max_startup_wait_ms: 200
log:
  level: debug
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->http.threads, 8);
  EXPECT_EQ(c->http.max_batch, 500);
  EXPECT_EQ(c->http.header_limit_bytes, 4096);
  EXPECT_EQ(c->http.body_limit_bytes, 2048);
  EXPECT_EQ(c->http.idle_timeout_ms, 1000);
  EXPECT_EQ(c->http.max_connections, 64);
  EXPECT_EQ(c->http.status_history_interval_ms, 250);
  EXPECT_TRUE(c->segment.auto_create);
  EXPECT_EQ(c->segment.default_step, 50);
  EXPECT_EQ(c->segment.max_step, 5000);
  EXPECT_EQ(c->segment.preload_percent, 20);
  EXPECT_EQ(c->segment.wait_ms, 0);
  EXPECT_EQ(c->segment.fetch_threads, 3);
  EXPECT_EQ(c->segment.retry_after_s, 7);
  EXPECT_EQ(c->snowflake.epoch_ms, 1000000000000);
  EXPECT_EQ(c->snowflake.timestamp_bits, 40);
  EXPECT_EQ(c->snowflake.worker_bits, 11);
  EXPECT_EQ(c->snowflake.sequence_bits, 12);
  EXPECT_EQ(c->snowflake.time_unit_ms, 10);
  EXPECT_FALSE(c->snowflake.random_sequence_start);
  EXPECT_EQ(c->snowflake.max_backward_ms, 0);
  EXPECT_EQ(c->snowflake.persist_interval_ms, 100);
  EXPECT_EQ(c->snowflake.reserve_ms, 200);
  EXPECT_EQ(c->snowflake.max_startup_wait_ms, 200);
  EXPECT_EQ(c->log.level, "debug");
}

TEST(ConfigKeysTest, ClusterKeysParse) {
  auto c = ParseConfig(R"(
kafka:
  bootstrap: k1:9092
  topic_prefix: ids.prod-1
  partitions: 24
  reply_partitions: 6
  reply_partition: 5
  replication_factor: 3
  request_timeout_ms: 500
  request_attempts: 5
  session_timeout_ms: 10000
  transaction_timeout_ms: 20000
allocator:
  batch_max: 64
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->kafka.topic_prefix, "ids.prod-1");
  EXPECT_EQ(c->kafka.partitions, 24);
  EXPECT_EQ(c->kafka.reply_partitions, 6);
  EXPECT_EQ(c->kafka.reply_partition, 5);
  EXPECT_EQ(c->kafka.replication_factor, 3);
  EXPECT_EQ(c->kafka.request_timeout_ms, 500);
  EXPECT_EQ(c->kafka.request_attempts, 5);
  EXPECT_EQ(c->kafka.session_timeout_ms, 10000);
  EXPECT_EQ(c->kafka.transaction_timeout_ms, 20000);
  EXPECT_EQ(c->allocator.batch_max, 64);
}

TEST(ConfigKeysTest, ClusterKeysAreChecked) {
  ExpectKeyError("kafka:\n  topic_prefix: 'a b'\n", "kafka.topic_prefix");
  ExpectKeyError("kafka:\n  topic_prefix: ''\n", "kafka.topic_prefix");
  ExpectKeyError("kafka:\n  partitions: 0\n", "kafka.partitions");
  ExpectKeyError("kafka:\n  reply_partition: -2\n", "kafka.reply_partition");
  ExpectKeyError("kafka:\n  reply_partitions: 4\n  reply_partition: 4\n", "kafka.reply_partition");
  ExpectKeyError("allocator:\n  batch_max: 0\n", "allocator.batch_max");
  ExpectKeyError("allocator:\n  bogus: 1\n", "allocator.bogus");
}

// Unset, the brokers choose the replicas of kleaf's topics (default.replication.factor) and their
// min.insync.replicas; a smaller cluster on purpose is a key of its own.
TEST(ConfigKeysTest, ReplicationIsTheBrokersUnlessSetAndUnreplicatedTopicsAreOptIn) {
  auto defaults = ParseConfig("kafka:\n  bootstrap: k1:9092\n");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->kafka.replication_factor, 0);
  EXPECT_FALSE(defaults->kafka.allow_unreplicated);
  auto set = ParseConfig(
      "kafka:\n  bootstrap: k1:9092\n  replication_factor: 1\n  allow_unreplicated: true\n");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->kafka.replication_factor, 1);
  EXPECT_TRUE(set->kafka.allow_unreplicated);
  EXPECT_TRUE(ParseConfig("kafka:\n  replication_factor: 0\n"));
  ExpectKeyError("kafka:\n  replication_factor: -1\n", "kafka.replication_factor");
  ExpectKeyError("kafka:\n  replication_factor: 17\n", "kafka.replication_factor");
  ExpectKeyError("kafka:\n  allow_unreplicated: yes\n", "kafka.allow_unreplicated");
}

TEST(ConfigUnknownKeyTest, TopLevelUnknownKeyIsNamed) {
  ExpectKeyError("bogus: 1\n", "bogus");
  ExpectKeyError("http:\n  listen: 127.0.0.1:1\nsnowflak:\n  worker_id: 1\n", "snowflak");
}

TEST(ConfigUnknownKeyTest, NestedUnknownKeyIsNamedWithItsSection) {
  ExpectKeyError("http:\n  listne: 127.0.0.1:1\n", "http.listne");
  ExpectKeyError("snowflake:\n  workerid: 3\n", "snowflake.workerid");
  ExpectKeyError("node:\n  id: a\n  name: b\n", "node.name");
}

TEST(ConfigUnknownKeyTest, DottedKeyAtTopLevelIsUnknown) {
  ExpectKeyError("snowflake.worker_id: 3\n", "snowflake.worker_id");
}

TEST(ConfigWrongTypeTest, StringForIntegerIsNamed) {
  ExpectKeyError("http:\n  threads: four\n", "http.threads");
  ExpectKeyError("snowflake:\n  worker_id: 12abc\n", "snowflake.worker_id");
  ExpectKeyError("snowflake:\n  worker_id: 1.5\n", "snowflake.worker_id");
  ExpectKeyError("segment:\n  wait_ms: ''\n", "segment.wait_ms");
}

TEST(ConfigWrongTypeTest, YesIsNotABool) {
  ExpectKeyError("segment:\n  auto_create: yes\n", "segment.auto_create");
  ExpectKeyError("snowflake:\n  random_sequence_start: 1\n", "snowflake.random_sequence_start");
}

TEST(ConfigWrongTypeTest, MapOrListForScalarIsNamed) {
  ExpectKeyError("node:\n  id:\n    first: a\n", "node.id");
  ExpectKeyError("http:\n  listen: [127.0.0.1, 80]\n", "http.listen");
  ExpectKeyError("http:\n  threads: {n: 2}\n", "http.threads");
  ExpectKeyError("segment:\n  auto_create: [true]\n", "segment.auto_create");
}

TEST(ConfigWrongTypeTest, NullValueIsNamed) {
  ExpectKeyError("http:\n  threads:\n", "http.threads");
  ExpectKeyError("state:\n  path: ~\n", "state.path");
}

TEST(ConfigWrongTypeTest, ScalarForSectionIsNamed) {
  ExpectKeyError("http: 8080\n", "http");
  ExpectKeyError("snowflake: [1, 2]\n", "snowflake");
}

TEST(ConfigWrongTypeTest, TopLevelListIsRejected) {
  Error e = ParseError("- http\n- node\n");
  EXPECT_EQ(e.code, Code::kInvalidArgument);
  EXPECT_FALSE(e.message.empty());
}

// A non-scalar mapping key is legal YAML; the parser must answer with an error value naming the
// section, not throw (an exception here escapes ParseConfig's Result contract).
TEST(ConfigWrongTypeTest, NonScalarKeyIsAnErrorNotAnException) {
  for (const std::string text : {"[a, b]: 1\n", "http:\n  [a]: 1\n", "? {x: 1}\n: 2\n"}) {
    SCOPED_TRACE(text);
    try {
      auto r = ParseConfig(text);
      ASSERT_FALSE(r.has_value());
      EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "ParseConfig threw instead of returning an error: " << e.what();
    }
  }
}

TEST(ConfigRangeTest, IntegersOutsideTheirRangeAreNamed) {
  ExpectKeyError("http:\n  threads: 0\n", "http.threads");
  ExpectKeyError("http:\n  threads: 257\n", "http.threads");
  ExpectKeyError("http:\n  status_history_interval_ms: 99\n", "http.status_history_interval_ms");
  ExpectKeyError("http:\n  max_batch: 0\n", "http.max_batch");
  ExpectKeyError("http:\n  header_limit_bytes: 10\n", "http.header_limit_bytes");
  ExpectKeyError("segment:\n  preload_percent: 100\n", "segment.preload_percent");
  ExpectKeyError("segment:\n  preload_percent: 0\n", "segment.preload_percent");
  ExpectKeyError("segment:\n  wait_ms: -1\n", "segment.wait_ms");
  ExpectKeyError("segment:\n  default_step: 0\n", "segment.default_step");
  ExpectKeyError("snowflake:\n  worker_id: -1\n", "snowflake.worker_id");
  ExpectKeyError("snowflake:\n  timestamp_bits: 19\n", "snowflake.timestamp_bits");
  ExpectKeyError("snowflake:\n  worker_bits: 0\n", "snowflake.worker_bits");
  ExpectKeyError("snowflake:\n  time_unit_ms: 0\n", "snowflake.time_unit_ms");
  ExpectKeyError("snowflake:\n  max_backward_ms: 1001\n", "snowflake.max_backward_ms");
  ExpectKeyError("snowflake:\n  epoch_ms: -5\n", "snowflake.epoch_ms");
}

TEST(ConfigRangeTest, OutOfRangeMessageShowsBoundsAndValue) {
  Error e = ParseError("http:\n  threads: 300\n");
  EXPECT_NE(e.message.find("1"), std::string::npos);
  EXPECT_NE(e.message.find("256"), std::string::npos);
  EXPECT_NE(e.message.find("300"), std::string::npos);
}

TEST(ConfigRangeTest, IntegerOverflowIsAnErrorNotAWrap) {
  ExpectKeyError("snowflake:\n  epoch_ms: 99999999999999999999\n", "snowflake.epoch_ms");
  ExpectKeyError("segment:\n  max_step: 18446744073709551617\n", "segment.max_step");
}

TEST(ConfigRangeTest, BoundsThemselvesAreAccepted) {
  auto c = ParseConfig("http:\n  threads: 256\nsegment:\n  preload_percent: 99\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->http.threads, 256);
  EXPECT_EQ(c->segment.preload_percent, 99);
}

TEST(ConfigRangeTest, BadStringValuesAreNamed) {
  ExpectKeyError("http:\n  listen: localhost\n", "http.listen");
  ExpectKeyError("http:\n  listen: localhost:65536\n", "http.listen");
  ExpectKeyError("node:\n  id: ''\n", "node.id");
  ExpectKeyError("node:\n  id: " + std::string(129, 'n') + "\n", "node.id");
  ExpectKeyError("state:\n  path: ''\n", "state.path");
  ExpectKeyError("admin:\n  token: short\n", "admin.token");
  ExpectKeyError("log:\n  level: verbose\n", "log.level");
  ExpectKeyError("log:\n  format: xml\n", "log.format");
}

TEST(ConfigRangeTest, EmptyAdminTokenMeansGenerateOne) {
  auto c = ParseConfig("admin:\n  token: ''\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->admin.token, "");
}

TEST(ConfigCrossCheckTest, SnowflakeBitsMustAddUpTo63) {
  ExpectKeyError("snowflake:\n  timestamp_bits: 40\n", "snowflake.timestamp_bits");
  ExpectKeyError("snowflake:\n  sequence_bits: 13\n", "snowflake.timestamp_bits");
  auto ok = ParseConfig("snowflake:\n  timestamp_bits: 42\n  sequence_bits: 11\n");
  EXPECT_TRUE(ok) << ok.error().message;
}

TEST(ConfigCrossCheckTest, WorkerIdMustFitTheWorkerBits) {
  ExpectKeyError("snowflake:\n  worker_id: 1024\n", "snowflake.worker_id");
  // 5 worker bits: 31 is the largest worker id.
  const std::string small = "snowflake:\n  worker_bits: 5\n  sequence_bits: 17\n  worker_id: ";
  ExpectKeyError(small + "32\n", "snowflake.worker_id");
  auto ok = ParseConfig(small + "31\n");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->snowflake.worker_id, 31);
}

TEST(ConfigCrossCheckTest, EpochMustNotBeInTheFuture) {
  const int64_t tomorrow = NowMs() + 24 * 3600 * 1000;
  ExpectKeyError("snowflake:\n  epoch_ms: " + std::to_string(tomorrow) + "\n",
                 "snowflake.epoch_ms");
  const int64_t yesterday = NowMs() - 24 * 3600 * 1000;
  auto ok = ParseConfig("snowflake:\n  epoch_ms: " + std::to_string(yesterday) + "\n");
  EXPECT_TRUE(ok) << ok.error().message;
}

TEST(ConfigCrossCheckTest, StartupWaitMustCoverTheReservation) {
  // A kill -9 leaves the mark reserve_ms ahead; a shorter startup wait could never restart.
  ExpectKeyError("snowflake:\n  reserve_ms: 6000\n  max_startup_wait_ms: 5999\n",
                 "snowflake.max_startup_wait_ms");
  auto equal = ParseConfig("snowflake:\n  reserve_ms: 6000\n  max_startup_wait_ms: 6000\n");
  EXPECT_TRUE(equal) << equal.error().message;
}

TEST(ConfigCrossCheckTest, ReservationMustBeTwiceThePersistInterval) {
  ExpectKeyError("snowflake:\n  persist_interval_ms: 1501\n  reserve_ms: 3000\n",
                 "snowflake.reserve_ms");
  auto ok = ParseConfig("snowflake:\n  persist_interval_ms: 1500\n  reserve_ms: 3000\n");
  EXPECT_TRUE(ok) << ok.error().message;
}

TEST(ConfigCrossCheckTest, DefaultStepMustNotExceedMaxStep) {
  ExpectKeyError("segment:\n  default_step: 2000\n  max_step: 1000\n", "segment.default_step");
  auto ok = ParseConfig("segment:\n  default_step: 1000\n  max_step: 1000\n");
  EXPECT_TRUE(ok) << ok.error().message;
}

TEST(ConfigYamlTest, InvalidYamlIsAnError) {
  for (const std::string text : {"http: [unclosed\n", "http:\n  listen: 'a\n", "a: b: c\n",
                                 "http:\n\tthreads: 2\n"}) {
    SCOPED_TRACE(text);
    Error e = ParseError(text);
    EXPECT_EQ(e.code, Code::kInvalidArgument);
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(ConfigYamlTest, InvalidYamlMessageSaysSo) {
  Error e = ParseError("http: [unclosed\n");
  EXPECT_NE(e.message.find("YAML"), std::string::npos) << e.message;
}

TEST(ConfigFileTest, MissingFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.Sub("does-not-exist.yaml");
  auto r = LoadConfigFile(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
}

TEST(ConfigFileTest, LoadsAFile) {
  testing::TempDir dir;
  const std::string path = dir.Sub("kleaf.yaml");
  std::ofstream(path) << "node:\n  id: from-file\nsnowflake:\n  worker_id: 9\n";
  auto r = LoadConfigFile(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->node.id, "from-file");
  EXPECT_EQ(r->snowflake.worker_id, 9);
}

TEST(ConfigFileTest, ErrorInAFileNamesTheFileAndTheKey) {
  testing::TempDir dir;
  const std::string path = dir.Sub("bad.yaml");
  std::ofstream(path) << "http:\n  threads: many\n";
  auto r = LoadConfigFile(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("http.threads"), std::string::npos) << r.error().message;
}

TEST(ConfigFileTest, DirectoryIsNotAConfigFile) {
  testing::TempDir dir;
  auto r = LoadConfigFile(dir.path().string());
  EXPECT_FALSE(r);
}

TEST(ParseHostPortTest, AcceptsHostAndPort) {
  auto a = ParseHostPort("127.0.0.1:8080");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->first, "127.0.0.1");
  EXPECT_EQ(a->second, 8080);

  auto b = ParseHostPort("localhost:0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->first, "localhost");
  EXPECT_EQ(b->second, 0);

  auto c = ParseHostPort("0.0.0.0:65535");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->second, 65535);
  EXPECT_FALSE(ParseHostPort("example.com:80")) << "a listen address is an IP or localhost";
}

TEST(ParseHostPortTest, StripsIpv6Brackets) {
  auto r = ParseHostPort("[::1]:9092");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->first, "::1");
  EXPECT_EQ(r->second, 9092);
}

TEST(ParseHostPortTest, RejectsMalformedInput) {
  for (const std::string s : {"", "localhost", ":8080", "host:", "host:65536", "host:-1",
                              "host:80x", "host: 80", "host:+80", "host:99999999999"}) {
    SCOPED_TRACE(s);
    auto r = ParseHostPort(s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kleaf::config
