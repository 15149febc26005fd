// The group check of "Allocators of different versions" (cluster/seq_wait_check.h): a lease only
// while a description begun after the last membership change found every member advertising that
// it waits out leases. The descriptions are the test's, answered one at a time.
#include "cluster/seq_wait_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <thread>

#include "base/mutex.h"

namespace kleaf::cluster {
namespace {

using std::chrono::milliseconds;
using Members = std::vector<kafka::GroupMember>;

// Answers each description with the next result the test gives, waiting for one; "stopped" at the
// end.
class Script {
 public:
  void Give(Result<Members> next) {
    {
      MutexLock lock(mu_);
      results_.push_back(std::move(next));
    }
    cv_.NotifyAll();
  }
  void End() {
    {
      MutexLock lock(mu_);
      ended_ = true;
    }
    cv_.NotifyAll();
  }
  // Waits (bounded) until `n` descriptions have begun.
  bool WaitEntered(int n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(lock, std::chrono::seconds(10),
                       [this, n]() KLEAF_REQUIRES(mu_) { return entered_ >= n; });
  }
  Result<Members> Describe() {
    MutexLock lock(mu_);
    ++entered_;
    cv_.NotifyAll();
    cv_.Wait(lock, [this]() KLEAF_REQUIRES(mu_) { return ended_ || !results_.empty(); });
    if (results_.empty()) return Fail(Code::kUnavailable, "stopped");
    auto r = std::move(results_.front());
    results_.pop_front();
    return r;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<Result<Members>> results_ KLEAF_GUARDED_BY(mu_);
  bool ended_ KLEAF_GUARDED_BY(mu_) = false;
  int entered_ KLEAF_GUARDED_BY(mu_) = 0;
};

// Waits (bounded) until `check` has ended `n` descriptions.
bool WaitForDescriptions(const SeqWaitCheck& check, int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (check.Descriptions() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

const kafka::GroupMember kNew1{"m1", "kleaf;seqwait=1", "/10.0.0.1"};
const kafka::GroupMember kNew2{"m2", "alloc-b;seqwait=1", "/10.0.0.2"};
const kafka::GroupMember kOld{"m3", "kleaf", "/10.0.0.3"};

struct SeqWaitCheckScriptedTest : ::testing::Test {
  Script script;
  // Periods long enough that only Changed() and the retries ask for descriptions here.
  SeqWaitCheck check{[this] { return script.Describe(); }, milliseconds(60'000), milliseconds(1)};
  // The node joined its group (its first assignment): descriptions begin.
  void SetUp() override { check.Changed(); }
  void TearDown() override {
    script.End();
    check.Stop();
  }
};

TEST(SeqWaitCheckTest, OnlyMembersWithoutTheMarkAreNamed) {
  EXPECT_EQ(MembersThatDoNotWait({kNew1, kNew2}), "");
  EXPECT_EQ(MembersThatDoNotWait({}), "");
  EXPECT_EQ(MembersThatDoNotWait({kNew1, kOld}), "\"kleaf\" (/10.0.0.3)");
  EXPECT_EQ(MembersThatDoNotWait({{"m", "kleaf;seqwait=1x", ""}, {"n", ";seqwait=1;x", "h"}}),
            "\"kleaf;seqwait=1x\" (?), \";seqwait=1;x\" (h)")
      << "the mark ends the client id";
}

TEST_F(SeqWaitCheckScriptedTest, NoLeaseUntilTheGroupIsDescribedAndEveryMemberWaits) {
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked);
  script.Give(Members{kNew1, kNew2});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait) << check.Why();
}

TEST_F(SeqWaitCheckScriptedTest, AMemberWithoutTheMarkBlocksLeasesUntilItLeaves) {
  script.Give(Members{kNew1, kOld});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kOldMember);
  EXPECT_NE(check.Why().find("\"kleaf\" (/10.0.0.3)"), std::string::npos) << check.Why();
  // It leaves: the group rebalances, and the next description finds only waiting members.
  check.Changed();
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked);
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 2));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait) << check.Why();
}

TEST_F(SeqWaitCheckScriptedTest, AChangeBlocksLeasesUntilADescriptionBegunAfterItSucceeds) {
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  ASSERT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait);
  check.Changed();
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked);
  // Kafka does not answer: still unchecked (a member that joined may not wait), and tried again.
  script.Give(Fail(Code::kUnavailable, "describing consumer group g timed out"));
  ASSERT_TRUE(WaitForDescriptions(check, 2));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked);
  EXPECT_NE(check.Why().find("timed out"), std::string::npos) << check.Why();
  script.Give(Members{kNew1, kNew2});
  ASSERT_TRUE(WaitForDescriptions(check, 3));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait) << check.Why();
}

TEST(SeqWaitCheckTest, AFailedDescriptionWithNoChangeSinceTheLastKeepsItsVerdict) {
  Script script;
  // Described every millisecond: the periodic descriptions of a group that did not change.
  SeqWaitCheck check{[&script] { return script.Describe(); }, milliseconds(1), milliseconds(1)};
  check.Changed();
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  ASSERT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait);
  script.Give(Fail(Code::kUnavailable, "timed out"));
  ASSERT_TRUE(WaitForDescriptions(check, 2));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait);
  // ...and an old member found periodically (the consumer protocol's join need not revoke here).
  script.Give(Members{kNew1, kOld});
  ASSERT_TRUE(WaitForDescriptions(check, 3));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kOldMember);
  script.End();
  check.Stop();
}

// This node describes its group as a member: an answer without members (the coordinator not yet
// showing the join) is no description of the group.
TEST_F(SeqWaitCheckScriptedTest, AnAnswerWithoutMembersIsAFailure) {
  script.Give(Members{});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked);
  EXPECT_NE(check.Why().find("without any member"), std::string::npos) << check.Why();
  ASSERT_TRUE(check.Blocked());
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 2));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait);
  EXPECT_FALSE(check.Blocked());
  EXPECT_TRUE(check.AllWait());
}

TEST_F(SeqWaitCheckScriptedTest, ADescriptionBegunBeforeAChangeDoesNotCountForIt) {
  // The first description is under way (waiting for its answer) when the membership changes.
  ASSERT_TRUE(script.WaitEntered(1));
  check.Changed();
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 1));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kUnchecked)
      << "a member that joined at the change may be missing from that answer";
  // Another description begins at once, and counts.
  script.Give(Members{kNew1});
  ASSERT_TRUE(WaitForDescriptions(check, 2));
  EXPECT_EQ(check.Now(), SeqWaitCheck::Verdict::kAllWait) << check.Why();
}

}  // namespace
}  // namespace kleaf::cluster
