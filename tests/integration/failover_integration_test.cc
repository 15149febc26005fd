// An allocator that dies (kill -9) or freezes (SIGSTOP, a zombie that wakes up later) while both
// gateways are loaded: the other allocator takes its partitions over, clients see no error while
// the gateways' buffers last, and no ID is ever served twice (I1).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <iostream>

#include "kafka/client.h"
#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

// Segments of at most this many IDs: the quiet tag's two segments last far longer than a failover.
constexpr int64_t kMaxStep = 20000;
// More IDs than a gateway's two buffered segments of one tag can hold: a gateway that served this
// many after a takeover got at least one new segment from the new owner.
constexpr int64_t kBeyondBuffers = 2 * kMaxStep + 1000;

// Two allocators, two gateways, and three tags on the same partition: `steady` (step kMaxStep, a
// modest single/batch load: its buffers outlast a failover, so its clients must see no error) and
// two `churn` tags (a small initial step and large batches: their segments run out every second or
// two, so the allocators keep allocating for several tags of the partition through the failover).
class FailoverIntegrationTest : public KafkaTest {
 protected:
  void StartClusterAndLoad(const std::string& name) {
    cluster_ = std::make_unique<Cluster>(
        broker_, name,
        std::map<std::string, std::string>{{"segment.max_step", std::to_string(kMaxStep)}});
    auto nodes = cluster_->StartNodes(2, 2);
    ASSERT_TRUE(nodes) << nodes.error();
    nodes_ = *nodes;
    steady_ = name + "-steady";
    partition_ = kafka::PartitionFor(steady_, Cluster::kPartitions);
    churn_ = {TagOnPartition(name + "-churn", partition_, Cluster::kPartitions),
              TagOnPartition(name + "-churn-b", partition_, Cluster::kPartitions)};
    owner_ = cluster_->OwnerOf(partition_, nodes_.allocators);
    ASSERT_NE(owner_, nullptr) << "no single owner of partition " << partition_;
    other_ = owner_ == nodes_.allocators[0] ? nodes_.allocators[1] : nodes_.allocators[0];
    auto put =
        PutTag(nodes_.gateways[0]->port, steady_, "{\"step\":" + std::to_string(kMaxStep) + "}");
    ASSERT_TRUE(put) << put.error();
    for (const auto& tag : churn_) {
      put = PutTag(nodes_.gateways[0]->port, tag, R"({"step":500})");
      ASSERT_TRUE(put) << put.error();
    }

    for (const Node* gw : nodes_.gateways) {
      LoadOptions steady;
      steady.name = gw->name + "/" + steady_;
      steady.port = gw->port;
      steady.tags = {steady_};
      steady.threads = 2;
      steady.batch_max = 10;
      steady.pause = std::chrono::milliseconds(20);
      steady.max_requests = 6000;
      loads_.push_back(std::make_unique<Load>(steady));
      for (const auto& tag : churn_) {
        LoadOptions churn = steady;
        churn.name = gw->name + "/" + tag;
        churn.tags = {tag};
        churn.threads = 1;
        churn.mix = LoadOptions::Mix::kBatches;
        churn.batch_max = 500;
        churn.pause = std::chrono::milliseconds(30);
        churn_loads_.push_back(std::make_unique<Load>(churn));
      }
    }
    for (auto& l : loads_)
      ASSERT_TRUE(l->WaitFor([](auto& c) { return c.replies >= 20; }, seconds(30))) << l->Summary();
    // The churn tags have gone through several segments on both gateways.
    for (auto& l : churn_loads_) {
      ASSERT_TRUE(l->WaitFor([](auto& c) { return c.ids >= kBeyondBuffers; }, seconds(30)))
          << l->Summary();
    }
  }

  // Waits until every churn client got kBeyondBuffers more IDs: new segments were allocated.
  bool WaitForNewChurnSegments(std::chrono::seconds timeout) {
    std::vector<int64_t> base;
    for (auto& l : churn_loads_) base.push_back(l->counters().ids);
    return WaitUntil(
        [&] {
          for (size_t i = 0; i < churn_loads_.size(); ++i) {
            if (churn_loads_[i]->counters().ids - base[i] < kBeyondBuffers) return false;
          }
          return true;
        },
        timeout);
  }

  // Partition p as `allocator`'s /metrics count it; an error if they cannot be read.
  static std::expected<PartitionActivity, std::string> ActivityOf(const Node& allocator,
                                                                  int32_t p) {
    auto all = AllocatorPartitions(allocator);
    if (!all) return std::unexpected(all.error());
    auto it = all->find(p);
    return it == all->end() ? PartitionActivity{} : it->second;
  }
  // Takeovers of p by `allocator`, or -1 while its /metrics cannot be read.
  static int64_t TakeoversOf(const Node& allocator, int32_t p) {
    auto a = ActivityOf(allocator, p);
    return a ? a->takeovers : -1;
  }

  int64_t Unavailable(const std::vector<std::unique_ptr<Load>>& loads) const {
    int64_t n = 0;
    for (const auto& l : loads) n += l->counters().unavailable;
    return n;
  }

  // Stops the clients and checks everything they received, and each tag's durable state.
  void StopAndCheck() {
    std::map<std::string, std::vector<const Load*>> by_tag;
    for (auto* loads : {&loads_, &churn_loads_}) {
      for (auto& l : *loads) {
        l->Stop();
        by_tag[l->options().tags.front()].push_back(l.get());
      }
    }
    for (const auto& [tag, loads] : by_tag) {
      SCOPED_TRACE(tag);
      for (const Load* l : loads) {
        std::cout << l->Summary() << std::endl;
        if (!l->failures().empty()) ADD_FAILURE() << FailureReport(*l);
        EXPECT_EQ(l->counters().errors, 0) << l->Summary();
        for (const auto& v : OrderViolations(l->Replies(tag)))
          ADD_FAILURE() << l->options().name << ": " << v;
      }
      auto all = AllIds(loads, tag);
      auto dup = FindDuplicates(all);
      EXPECT_EQ(dup.count, 0) << "IDs served twice, e.g. "
                              << (dup.examples.empty() ? 0 : dup.examples.front());
      // The owner now knows the tag, with a max_id above every ID served (I2).
      auto state = GetTag(nodes_.gateways[1]->port, tag);
      EXPECT_TRUE(state) << state.error();
      if (state && !all.empty()) {
        EXPECT_GT(state->max_id, *std::max_element(all.begin(), all.end()));
      }
    }
  }

  std::unique_ptr<Cluster> cluster_;
  Cluster::Nodes nodes_;
  std::string steady_;
  std::vector<std::string> churn_;
  int32_t partition_ = 0;
  Node* owner_ = nullptr;  // the allocator that serves partition_ at the start
  Node* other_ = nullptr;
  std::vector<std::unique_ptr<Load>> loads_;        // steady tag, one per gateway
  std::vector<std::unique_ptr<Load>> churn_loads_;  // one per churn tag and gateway
};

TEST_F(FailoverIntegrationTest, KillNineOfTheOwnerMovesItsPartitionWithinFifteenSeconds) {
  ASSERT_NO_FATAL_FAILURE(StartClusterAndLoad("failover"));
  const auto before = ActivityOf(*other_, partition_);
  ASSERT_TRUE(before) << before.error();

  owner_->process->Kill();
  const auto killed = SteadyClock::now();
  auto status = owner_->process->WaitExit(seconds(10));
  EXPECT_EQ(status.signal, SIGKILL) << status.ToString();
  const bool moved =
      WaitUntil([&] { return TakeoversOf(*other_, partition_) > before->takeovers; }, seconds(60));
  const double failover_s = SecondsSince(killed);
  ASSERT_TRUE(moved) << other_->name << " did not take partition " << partition_
                     << " over within 60 s of the kill";
  std::cout << "failover: partition " << partition_ << " served by " << other_->name << " "
            << failover_s << " s after kill -9 of " << owner_->name << std::endl;
  EXPECT_LE(failover_s, 15.0)
      << "failover took longer than the 15 s of docs/architecture.md, \"Targets\"";

  // The new owner hands out new segments of the partition's tags to both gateways.
  EXPECT_TRUE(WaitForNewChurnSegments(seconds(40)));
  auto every = cluster_->CheckEveryPartitionAnswers(*nodes_.gateways[1]);
  EXPECT_TRUE(every) << every.error();
  const int64_t steady_503 = Unavailable(loads_);
  const int64_t churn_503 = Unavailable(churn_loads_);
  StopAndCheck();
  std::cout << "failover: client-visible 503s: " << steady_503 << " for " << steady_
            << " (buffers outlast the failover), " << churn_503 << " for the churn tags"
            << " (segments run out every second or two)" << std::endl;
  EXPECT_EQ(steady_503, 0) << "clients saw errors although the gateways' buffers lasted";
}

TEST_F(FailoverIntegrationTest, FrozenOwnerIsFencedWhenItWakesAndNoIdIsServedTwice) {
  ASSERT_NO_FATAL_FAILURE(StartClusterAndLoad("zombie"));
  Node* zombie = owner_;
  const auto other_before = ActivityOf(*other_, partition_);
  ASSERT_TRUE(other_before) << other_before.error();
  const auto zombie_before = ActivityOf(*zombie, partition_);
  ASSERT_TRUE(zombie_before) << zombie_before.error();

  zombie->process->Signal(SIGSTOP);
  const auto stopped = SteadyClock::now();
  const bool taken = WaitUntil(
      [&] { return TakeoversOf(*other_, partition_) > other_before->takeovers; }, seconds(60));
  const double takeover_s = SecondsSince(stopped);
  ASSERT_TRUE(taken) << other_->name << " did not take partition " << partition_
                     << " over from the frozen " << zombie->name;
  std::cout << "zombie: " << other_->name << " serves partition " << partition_ << " " << takeover_s
            << " s after SIGSTOP of " << zombie->name << std::endl;
  // The new owner allocates while the zombie still believes it owns the partition.
  EXPECT_TRUE(WaitForNewChurnSegments(seconds(40)));

  const size_t log_mark = zombie->Log().size();
  zombie->process->Signal(SIGCONT);
  const auto woken = SteadyClock::now();
  // It releases the partition (fenced or revoked), or the group assigns it anew.
  const bool gave_up = WaitUntil(
      [&] {
        auto now = ActivityOf(*zombie, partition_);
        return now && (now->releases > zombie_before->releases ||
                       now->assignments > zombie_before->assignments);
      },
      seconds(60));
  const double reaction_s = SecondsSince(woken);
  EXPECT_TRUE(gave_up) << zombie->name << " never said it lost partition " << partition_
                       << " after SIGCONT; its log since:\n"
                       << zombie->Log().substr(log_mark);
  // Both allocators are back in the group; allocation goes on.
  EXPECT_TRUE(WaitForNewChurnSegments(seconds(40)));
  std::cout << "zombie: " << zombie->name << " reacted " << reaction_s
            << " s after SIGCONT; its partition lines since:" << std::endl;
  for (const auto& line : LinesWith(zombie->Log().substr(log_mark), "[allocator] partition")) {
    std::cout << "  " << line << std::endl;
  }
  auto every = cluster_->CheckEveryPartitionAnswers(*nodes_.gateways[1]);
  EXPECT_TRUE(every) << every.error();
  const int64_t steady_503 = Unavailable(loads_);
  const int64_t churn_503 = Unavailable(churn_loads_);
  StopAndCheck();
  std::cout << "zombie: client-visible 503s: " << steady_503 << " for " << steady_ << ", "
            << churn_503 << " for the churn tags" << std::endl;
  EXPECT_EQ(steady_503, 0) << "clients saw errors although the gateways' buffers lasted";
}

}  // namespace
}  // namespace kleaf::integration
