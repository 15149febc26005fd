// An allocator that crashed (kill -9) and restarts on its intact RocksDB catches up from the
// state-topic offset it had applied: it reads what the other allocator wrote meanwhile, not the
// topic from its beginning, and every ID served afterwards is above every ID served before (I2).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <iostream>

#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

class RestartIntegrationTest : public KafkaTest {};

TEST_F(RestartIntegrationTest, RestartedAllocatorCatchesUpFromItsAppliedOffset) {
  Cluster cluster(broker_, "restart", {{"segment.max_step", "1000"}});
  auto nodes = cluster.StartNodes(2, 1);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& first = *nodes->allocators[0];
  Node& second = *nodes->allocators[1];
  Node& gw = *nodes->gateways[0];
  // Two tags on every partition: catching up means applying records of several tags.
  std::vector<std::string> tags;
  for (int32_t p = 0; p < Cluster::kPartitions; ++p) {
    for (const char* base : {"restart", "restart-b"}) {
      tags.push_back(TagOnPartition(base, p, Cluster::kPartitions));
      auto put = PutTag(gw.port, tags.back(), R"({"step":100})");
      ASSERT_TRUE(put) << put.error();
    }
  }

  std::map<std::string, int64_t> highest;                // per tag, the highest ID served so far
  std::map<std::string, std::vector<int64_t>> every_id;  // per tag
  // Restarts the gateway (its buffered segments go: every ID from now on comes from a segment
  // allocated from here on), then serves some IDs of every tag.
  auto serve = [&](const std::string& phase) {
    SCOPED_TRACE(phase);
    if (gw.process->running()) {
      gw.process->Kill();
      gw.process->WaitExit(seconds(10));
    }
    auto started = cluster.Start({&gw});
    ASSERT_TRUE(started) << started.error();
    LoadOptions o;
    o.name = gw.name + " " + phase;
    o.port = gw.port;
    o.tags = tags;
    o.threads = 2;
    o.batch_max = 50;
    o.max_requests = 400;
    Load load(o);
    ASSERT_TRUE(load.WaitFor([](auto& c) { return c.replies + c.errors >= 800; }, seconds(60)))
        << load.Summary();
    load.Stop();
    std::cout << load.Summary() << std::endl;
    if (!load.failures().empty()) ADD_FAILURE() << FailureReport(load);
    for (const auto& tag : tags) {
      const auto& ids = load.Ids(tag);
      EXPECT_FALSE(ids.empty()) << tag << ": no ID served";
      if (ids.empty()) continue;
      for (const auto& v : OrderViolations(load.Replies(tag))) ADD_FAILURE() << tag << ": " << v;
      const int64_t lowest = *std::min_element(ids.begin(), ids.end());
      if (highest.contains(tag)) {
        EXPECT_GT(lowest, highest[tag]) << tag << ": an ID at or below one served before";
      }
      highest[tag] = std::max(highest[tag], *std::max_element(ids.begin(), ids.end()));
      every_id[tag].insert(every_id[tag].end(), ids.begin(), ids.end());
    }
  };

  ASSERT_NO_FATAL_FAILURE(serve("with both allocators"));
  const auto first_served = ServedPartitions(first);
  ASSERT_TRUE(first_served) << first_served.error();
  ASSERT_FALSE(first_served->empty());
  std::map<int32_t, int64_t> applied;  // where first's last restore of each partition ended
  for (const auto& r : Restores(first.Log())) applied[r.partition] = r.end;

  // `first` crashes; `second` takes its partitions over and allocates for their tags.
  first.process->Kill();
  auto status = first.process->WaitExit(seconds(10));
  EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto served = ServedPartitions(second);
        return served && served->size() == 4u;
      },
      seconds(60)))
      << second.name << " did not take every partition over";
  ASSERT_NO_FATAL_FAILURE(serve("after kill -9 of " + first.name));

  // `second` stops; `first` restarts on its RocksDB and serves every partition again.
  second.process->Terminate();
  status = second.process->WaitExit(seconds(30));
  EXPECT_TRUE(status.exited && status.code == 0) << status.ToString();
  auto started = cluster.Start({&first});
  ASSERT_TRUE(started) << started.error();
  auto balanced = cluster.WaitBalanced({&first}, seconds(90));
  ASSERT_TRUE(balanced) << balanced.error();
  int caught_up = 0;
  for (const auto& r : Restores(first.Log())) {
    const bool served_before = first_served->contains(r.partition);
    std::cout << first.name << " restarted: partition " << r.partition
              << " (served before: " << (served_before ? "yes" : "no") << ") restored " << r.records
              << " records, offsets " << r.from << " to " << r.end << ", in " << r.millis << " ms"
              << std::endl;
    EXPECT_GE(r.end, r.from);
    if (!served_before) continue;
    SCOPED_TRACE("partition " + std::to_string(r.partition));
    EXPECT_GT(r.from, 0) << "re-read from the beginning";
    EXPECT_GT(r.from, applied[r.partition])
        << "did not start past the records it had written itself";
    EXPECT_GT(r.records, 0) << "the other allocator's records were not read";
    ++caught_up;
  }
  EXPECT_EQ(caught_up, static_cast<int>(first_served->size()));
  ASSERT_NO_FATAL_FAILURE(serve("after the restart of " + first.name));

  for (const auto& [tag, ids] : every_id) {
    SCOPED_TRACE(tag);
    auto dup = FindDuplicates(ids);
    EXPECT_EQ(dup.count, 0) << "IDs served twice, e.g. "
                            << (dup.examples.empty() ? 0 : dup.examples.front());
    auto state = GetTag(gw.port, tag);
    EXPECT_TRUE(state) << state.error();
    if (state) {
      EXPECT_GT(state->max_id, highest[tag]);
    }
  }
}

}  // namespace
}  // namespace kleaf::integration
