// A transaction without an outcome in a state partition. Kafka answers a commit once its decision
// is logged and writes the markers after; for a partition without a leader at that moment (a
// restart of its only broker, all its replicas down) it drops them, taking the partition for
// deleted. The partition's last stable offset then stays where that transaction began, and every
// record committed after it is hidden from read_committed readers: a takeover that restored only
// up to there would start below IDs the previous owner served (I1). Here the test itself holds a
// transaction open on the partition (a producer of its own, never committed), which is what such
// a transaction looks like to every reader, while an allocator commits raises after it; a fresh
// allocator then takes over, and later one more after that transaction was aborted (what an
// operator's kafka-transactions.sh abort does).
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "allocator/sequences.h"
#include "cluster/restore.h"
#include "kafka/client.h"
#include "kafka/message.h"
#include "kafka/partition_reader.h"
#include "kafka/txn_producer.h"
#include "state/records.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class OpenTransactionIntegrationTest : public KafkaTest {
 protected:
  // The state partition's last stable offset and log end, or an error.
  std::expected<std::pair<int64_t, int64_t>, std::string> Ends(const std::string& topic,
                                                               int32_t p) const {
    kafka::Properties props{{"bootstrap.servers", broker_.bootstrap}};
    auto committed = kafka::PartitionReader::Create(props);
    auto uncommitted = kafka::PartitionReader::Create(cluster::TailReaderProperties(props));
    if (!committed || !uncommitted) return std::unexpected(std::string("reader"));
    auto lso = (*committed)->Watermarks(topic, p, seconds(10));
    auto end = (*uncommitted)->Watermarks(topic, p, seconds(10));
    if (!lso || !end) return std::unexpected(std::string("watermarks"));
    return std::make_pair(lso->second, end->second);
  }

  // Begins a transaction of the test's own on state partition `p` of `cluster` that raises `tag`
  // to `max_id` and never commits it; fails the test unless it then holds the partition's last
  // stable offset. The transaction stays open as long as `open` lives (or until it is aborted);
  // `open_at` is the offset it holds.
  // Appends `key` = `value` to state partition p in a transaction left open (what a commit whose
  // markers Kafka dropped looks like to every reader): `open` keeps it, `open_at` is where it
  // holds the last stable offset.
  void OpenWith(const Cluster& cluster, int32_t p, const std::string& key, const std::string& value,
                std::unique_ptr<kafka::TxnProducer>& open, int64_t& open_at) const {
    auto made = kafka::TxnProducer::Create(
        {{"bootstrap.servers", broker_.bootstrap}, {"transaction.timeout.ms", "600000"}},
        cluster.prefix() + ".test-open");
    ASSERT_TRUE(made) << made.error().message;
    open = std::move(*made);
    ASSERT_TRUE(open->Init(seconds(30)));
    ASSERT_TRUE(open->Begin());
    const std::string state_topic = cluster.prefix() + ".state";
    ASSERT_TRUE(open->Send(state_topic, p, key, value, {}));
    ASSERT_TRUE(open->Flush(seconds(10)));
    auto ends = Ends(state_topic, p);
    ASSERT_TRUE(ends) << ends.error();
    ASSERT_LT(ends->first, ends->second) << "the transaction does not hold the last stable offset";
    open_at = ends->first;
  }
  // A raise of `tag` to `max_id` in a transaction left open.
  void OpenRaise(const Cluster& cluster, int32_t p, const std::string& tag, int64_t max_id,
                 std::unique_ptr<kafka::TxnProducer>& open, int64_t& open_at) const {
    state::TagRecord raised;
    raised.tag = tag;
    raised.max_id = max_id;
    raised.step = 100;
    OpenWith(cluster, p, state::TagKey(tag), state::EncodeTag(raised), open, open_at);
  }

  // Fetches `total` IDs of `tag` through `gw` in requests of 100 and adds them to `seen`; fails
  // the test on an error or an ID seen before.
  void Draw(const Node& gw, const std::string& tag, int total, std::set<int64_t>& seen,
            std::vector<int64_t>* drawn = nullptr) {
    for (int n = 0; n < total; n += 100) {
      std::expected<std::vector<int64_t>, std::string> ids;
      ASSERT_TRUE(WaitUntil(
          [&] {
            ids = FetchIds(gw.port, tag, 100);
            return ids.has_value();
          },
          seconds(30)))
          << ids.error();
      for (int64_t id : *ids) {
        ASSERT_TRUE(seen.insert(id).second) << "ID " << id << " of " << tag << " served twice";
        if (drawn) drawn->push_back(id);
      }
    }
  }
};

TEST_F(OpenTransactionIntegrationTest, ATakeoverRestoresPastATransactionWithoutAnOutcome) {
  Cluster cluster(broker_, "opentxn");
  const int32_t p = 1;
  // `served` is drawn from before and after the open transaction; `floor` gets a raise inside it.
  const std::string served = TagOnPartition("opentxn-served", p, Cluster::kPartitions);
  const std::string floor = TagOnPartition("opentxn-floor", p, Cluster::kPartitions);
  const std::string state_topic = cluster.prefix() + ".state";

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw1 = cluster.AddGateway("gw-a", 0);
  ASSERT_TRUE(cluster.Start({&a1}));
  ASSERT_TRUE(cluster.Start({&gw1}));
  for (const auto& tag : {served, floor}) {
    auto put = PutTag(gw1.port, tag, R"({"step":100})");
    ASSERT_TRUE(put) << put.error();
  }
  std::set<int64_t> seen_served, seen_floor;
  Draw(gw1, served, 300, seen_served);
  Draw(gw1, floor, 100, seen_floor);
  ASSERT_FALSE(HasFatalFailure());

  // The open transaction: a raise of `floor` far above anything served, never committed.
  constexpr int64_t kFloor = 1'000'000;
  std::unique_ptr<kafka::TxnProducer> open;
  int64_t open_at = 0;
  OpenRaise(cluster, p, floor, kFloor, open, open_at);
  ASSERT_FALSE(HasFatalFailure());

  // Raises committed after it: hidden from read_committed readers.
  std::vector<int64_t> after;
  Draw(gw1, served, 1000, seen_served, &after);
  ASSERT_FALSE(HasFatalFailure());
  auto ends = Ends(state_topic, p);
  ASSERT_TRUE(ends) << ends.error();
  ASSERT_EQ(ends->first, open_at) << "the last stable offset moved past the open transaction";
  std::cout << "[ opentxn ] transaction open at offset " << open_at << ", log end " << ends->second
            << "; " << seen_served.size() << " IDs of " << served << " served" << std::endl;

  // A fresh allocator takes over (kill -9: no release), behind a fresh gateway (no buffers).
  a1.process->Kill();
  gw1.process->Kill();
  Node& a2 = cluster.AddAllocator("alloc-2");
  Node& gw2 = cluster.AddGateway("gw-b", 1);
  ASSERT_TRUE(cluster.Start({&a2}));
  ASSERT_TRUE(cluster.Start({&gw2}));
  Draw(gw2, served, 500, seen_served);  // none of them served before (I1)
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(Count(a2.Log(), "has no outcome"), 1) << a2.Log();
  auto metrics = ScrapeMetrics(a2.port);
  ASSERT_TRUE(metrics) << metrics.error();
  EXPECT_EQ(metrics->Value("kleaf_allocator_open_transaction_restores_total",
                           "partition=\"" + std::to_string(p) + "\""),
            1.0);

  // The operator ends the transaction: aborted, its raise of `floor` is gone from the topic. The
  // maximum a2 read past it was written again, committed, at its takeover: a third allocator
  // (fresh, after a2's kill -9) starts `floor` above it.
  ASSERT_TRUE(open->Abort(seconds(30)));
  // Kafka answers the abort before its marker is written: the last stable offset follows.
  EXPECT_TRUE(WaitUntil(
      [&] {
        ends = Ends(state_topic, p);
        return ends && ends->first == ends->second;
      },
      seconds(10)))
      << "the aborted transaction still holds the last stable offset";
  a2.process->Kill();
  gw2.process->Kill();
  Node& a3 = cluster.AddAllocator("alloc-3");
  Node& gw3 = cluster.AddGateway("gw-c", 2);
  ASSERT_TRUE(cluster.Start({&a3}));
  ASSERT_TRUE(cluster.Start({&gw3}));
  std::vector<int64_t> floor_ids;
  Draw(gw3, floor, 100, seen_floor, &floor_ids);
  Draw(gw3, served, 300, seen_served);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(floor_ids.empty());
  EXPECT_GE(*std::min_element(floor_ids.begin(), floor_ids.end()), kFloor)
      << "the maximum read past the open transaction did not outlast its abort";
  EXPECT_EQ(Count(a3.Log(), "has no outcome"), 0) << a3.Log();
}

// The rewrite of the maxima a takeover read past the open transaction fails, twice (a test hook of
// `kleaf allocator` aborts it instead of committing it, as a broker that refused or timed out the
// commit would): the allocator retries the takeover a second later each time. Each retry must read
// the tail again and write the same maxima again before it serves; a store that recorded the tail
// as applied at the first attempt would let the retry start past it, find nothing to write again,
// and serve maxima no committed record holds, lost when the transaction is aborted.
TEST_F(OpenTransactionIntegrationTest, AFailedRewriteOfTheMaximaIsDoneAgainBeforeServing) {
  Cluster cluster(broker_, "rewrite");
  const int32_t p = 1;
  const std::string served = TagOnPartition("rewrite-served", p, Cluster::kPartitions);
  const std::string floor = TagOnPartition("rewrite-floor", p, Cluster::kPartitions);
  const std::string state_topic = cluster.prefix() + ".state";

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw1 = cluster.AddGateway("gw-a", 0);
  ASSERT_TRUE(cluster.Start({&a1}));
  ASSERT_TRUE(cluster.Start({&gw1}));
  for (const auto& tag : {served, floor}) {
    auto put = PutTag(gw1.port, tag, R"({"step":100})");
    ASSERT_TRUE(put) << put.error();
  }
  std::set<int64_t> seen_served, seen_floor;
  Draw(gw1, served, 300, seen_served);
  Draw(gw1, floor, 100, seen_floor);
  ASSERT_FALSE(HasFatalFailure());

  // The open transaction raises `floor` far above anything served; raises of `served` commit
  // after it.
  constexpr int64_t kFloor = 1'000'000;
  std::unique_ptr<kafka::TxnProducer> open;
  int64_t open_at = 0;
  OpenRaise(cluster, p, floor, kFloor, open, open_at);
  ASSERT_FALSE(HasFatalFailure());
  Draw(gw1, served, 500, seen_served);
  ASSERT_FALSE(HasFatalFailure());

  // A fresh allocator takes over; its first two rewrites of the maxima fail.
  a1.process->Kill();
  gw1.process->Kill();
  Node& a2 = cluster.AddAllocator("alloc-2");
  Node& gw2 = cluster.AddGateway("gw-b", 1);
  ASSERT_TRUE(Ok(StartNode(a2, {{"KLEAF_ALLOCATOR_TEST_FAIL_REWRITES", "2"}})));
  ASSERT_TRUE(cluster.Start({&gw2}));
  Draw(gw2, served, 500, seen_served);  // none of them served before (I1)
  ASSERT_FALSE(HasFatalFailure());
  // Two attempts failed and the third wrote the maxima again, committed, before it served: each
  // read the tail and found the maxima to write, and only the one that served logged the open
  // transaction (with the maxima it wrote).
  EXPECT_EQ(Count(a2.Log(), "failing the rewrite of partition " + std::to_string(p)), 2)
      << a2.Log();
  EXPECT_EQ(Count(a2.Log(), "writing again the maxima read past an open transaction"), 2)
      << a2.Log();
  EXPECT_EQ(Count(a2.Log(), "has no outcome"), 1) << a2.Log();
  EXPECT_EQ(Count(a2.Log(), "(0 maxima written again"), 0) << a2.Log();

  // The operator aborts the transaction. The maxima a2 wrote again outlast it: a third fresh
  // allocator starts `floor` at kFloor or above.
  ASSERT_TRUE(open->Abort(seconds(30)));
  std::expected<std::pair<int64_t, int64_t>, std::string> ends;
  EXPECT_TRUE(WaitUntil(
      [&] {
        ends = Ends(state_topic, p);
        return ends && ends->first == ends->second;
      },
      seconds(10)))
      << "the aborted transaction still holds the last stable offset";
  a2.process->Kill();
  gw2.process->Kill();
  Node& a3 = cluster.AddAllocator("alloc-3");
  Node& gw3 = cluster.AddGateway("gw-c", 2);
  ASSERT_TRUE(cluster.Start({&a3}));
  ASSERT_TRUE(cluster.Start({&gw3}));
  std::vector<int64_t> floor_ids;
  Draw(gw3, floor, 100, seen_floor, &floor_ids);
  Draw(gw3, served, 300, seen_served);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(floor_ids.empty());
  EXPECT_GE(*std::min_element(floor_ids.begin(), floor_ids.end()), kFloor)
      << "the maximum read past the open transaction was served but never committed again";
}

// A section maximum read past a transaction without an outcome is not in the owner's store until
// the owner has committed it again (docs/architecture.md, "I5 with a lease", (b) 1). Here the
// rewrite keeps failing, the operator aborts the open transaction meanwhile, and the owner then
// serves with no tail to read: a `current` of the section must not answer the aborted maximum,
// which no later owner restores (its `next` would be below an answer already given, against I5).
TEST_F(OpenTransactionIntegrationTest, AnAbortedMaximumReadPastTheOpenTransactionIsNeverAnswered) {
  Cluster cluster(broker_, "abortedmax");
  const int32_t p = 2;
  constexpr char kSpace[] = "aborted";
  uint64_t key = 0;  // sections of one key: the first key whose section lies on p
  while (kafka::PartitionFor(allocator::SectionRouteKey(kSpace, key), Cluster::kPartitions) != p)
    ++key;
  const std::string path = std::string("/api/v1/seq/") + kSpace + "/" + std::to_string(key);
  const auto seq_of = [](const std::string& body) {
    return std::stoull(nlohmann::json::parse(body).at("seq").get<std::string>());
  };
  // The key's value through `gw`, once answered (`current`: the /current path).
  const auto ask = [&](const Node& gw, const std::string& what) -> uint64_t {
    uint64_t value = 0;
    std::string last;
    EXPECT_TRUE(WaitUntil(
        [&] {
          e2e::HttpClient http(gw.port, seconds(10));
          auto reply = http.Get(what);
          if (!reply) {
            last = reply.error();
            return false;
          }
          last = std::to_string(reply->status) + " " + reply->body;
          if (reply->status != 200) return false;
          value = seq_of(reply->body);
          return true;
        },
        seconds(60)))
        << what << ": " << last << "\n"
        << cluster.Logs();
    return value;
  };

  Node& a1 = cluster.AddAllocator("alloc-1");
  Node& gw1 = cluster.AddGateway("gw-a", 0);
  ASSERT_TRUE(cluster.Start({&a1}));
  ASSERT_TRUE(cluster.Start({&gw1}));
  auto put = AdminCall(gw1.port, "PUT", std::string("/api/v1/spaces/") + kSpace,
                       nlohmann::json{{"section_size", 1}, {"step", 10}}.dump());
  ASSERT_TRUE(put) << put.error();
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) last = ask(gw1, path);
  ASSERT_GT(last, 0u);
  a1.process->Kill();

  // A holder's raise of the section, in a transaction that stays open.
  constexpr uint64_t kAborted = 1'000'000;
  std::unique_ptr<kafka::TxnProducer> open;
  int64_t open_at = 0;
  const state::SectionRecord raised{kSpace, key, 1, kAborted};
  OpenWith(cluster, p, state::SectionKey(kSpace, key), state::EncodeSection(raised), open, open_at);
  ASSERT_FALSE(HasFatalFailure());

  // A fresh allocator whose every rewrite of the maxima fails: it restores, fails, again.
  Node& a2 = cluster.AddAllocator("alloc-2");
  ASSERT_TRUE(Ok(StartNode(a2, {{"KLEAF_ALLOCATOR_TEST_FAIL_REWRITES", "1000000"}})));
  ASSERT_TRUE(WaitUntil(
      [&] { return Count(a2.Log(), "failing the rewrite of partition " + std::to_string(p)) >= 1; },
      seconds(60)))
      << a2.Log();
  // The operator aborts the open transaction; the next attempt reads no tail and serves p.
  ASSERT_TRUE(open->Abort(seconds(30)));
  const uint64_t current = ask(gw1, path + "/current");
  EXPECT_LT(current, kAborted) << "a maximum that never committed was answered";
  EXPECT_GE(current, last);

  // Another owner restores what committed: its next is above every answer given before.
  a2.process->Kill();
  Node& a3 = cluster.AddAllocator("alloc-3");
  ASSERT_TRUE(cluster.Start({&a3}));
  const uint64_t next = ask(gw1, path);
  EXPECT_GT(next, current) << "a next below a current answered before it";
}

}  // namespace
}  // namespace kleaf::integration
