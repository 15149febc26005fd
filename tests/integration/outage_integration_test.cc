// The broker goes away for 30 s under a modest load: gateways keep serving from their buffers,
// admin calls fail cleanly with 503, and once the broker is back everything recovers by itself
// with no ID served twice.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

namespace kleaf::integration {
namespace {

using std::chrono::seconds;

constexpr auto kOutage = seconds(30);
constexpr auto kRecoveryDeadline = seconds(60);
constexpr int64_t kStep = 30000;
// Taken from each gateway right after the broker stopped: past the 10% of its first segment at
// which the gateway fetches the next one, so that fetch happens (and fails) during the outage.
constexpr int kPreloadBatch = 4000;

class OutageIntegrationTest : public KafkaTest {};

TEST_F(OutageIntegrationTest, GatewaysServeFromBuffersWhileTheBrokerIsDownAndRecoverAfter) {
  ASSERT_FALSE(broker_.script.empty() || broker_.dir.empty() || broker_.port.empty())
      << "this test stops and restarts the broker: it needs KLEAF_TEST_KAFKA_SCRIPT, _DIR and "
         "_PORT";
  // One segment of the loaded tag lasts over a minute at this rate: the outage never drains it.
  Cluster cluster(broker_, "outage", {{"segment.max_step", "200000"}});
  auto nodes = cluster.StartNodes(2, 2);
  ASSERT_TRUE(nodes) << nodes.error();
  Node& gw_a = *nodes->gateways[0];
  Node& gw_b = *nodes->gateways[1];
  const std::string tag = "outage-steady";
  auto put = PutTag(gw_a.port, tag, "{\"step\":" + std::to_string(kStep) + "}");
  ASSERT_TRUE(put) << put.error();

  std::vector<std::unique_ptr<Load>> loads;
  for (const Node* gw : {&gw_a, &gw_b}) {
    LoadOptions o;
    o.name = gw->name;
    o.port = gw->port;
    o.tags = {tag};
    o.threads = 2;
    o.batch_max = 10;
    o.pause = std::chrono::milliseconds(25);
    o.max_requests = 8000;
    loads.push_back(std::make_unique<Load>(o));
  }
  for (auto& l : loads) {
    ASSERT_TRUE(l->WaitFor([](auto& c) { return c.replies >= 20; }, seconds(30))) << l->Summary();
  }

  std::vector<LoadCounters> at_stop, at_start;
  std::vector<int64_t> batch_ids;  // the big batches taken during the outage
  {
    BrokerRestartGuard guard(broker_);  // the broker comes back even if an assertion fails here
    for (auto& l : loads) at_stop.push_back(l->counters());
    const auto stopping = SteadyClock::now();
    auto stopped = broker_.Stop();
    ASSERT_TRUE(stopped) << stopped.error();
    const auto down = SteadyClock::now();
    std::cout << "outage: broker stopped in " << SecondsSince(stopping) << " s" << std::endl;

    // An admin call needs the allocators: a clear 503 within the client's retries, not a hang.
    auto during = PutTag(gw_a.port, "outage-during", R"({"step":10})");
    const double admin_s = SecondsSince(down);
    ASSERT_FALSE(during) << "a tag was created while the broker was down";
    EXPECT_NE(during.error().find("status 503"), std::string::npos) << during.error();
    std::cout << "outage: admin PUT answered in " << admin_s << " s: " << during.error()
              << std::endl;

    for (const Node* gw : {&gw_a, &gw_b}) {
      auto batch = FetchIds(gw->port, tag, kPreloadBatch);
      ASSERT_TRUE(batch) << gw->name << ": " << batch.error();
      batch_ids.insert(batch_ids.end(), batch->begin(), batch->end());
    }

    // Keep requesting through the outage; stop early at the first failed request.
    auto failing = [&] {
      for (size_t i = 0; i < loads.size(); ++i) {
        auto c = loads[i]->counters();
        if (c.unavailable != at_stop[i].unavailable || c.errors != at_stop[i].errors) return true;
      }
      return false;
    };
    WaitUntil([&] { return SteadyClock::now() - down >= kOutage || failing(); },
              kOutage + seconds(5));
    std::cout << "outage: broker down for " << SecondsSince(down) << " s" << std::endl;
    for (size_t i = 0; i < loads.size(); ++i) {
      auto c = loads[i]->counters();
      std::cout << "outage: " << loads[i]->options().name << " served "
                << c.replies - at_stop[i].replies << " requests (" << c.ids - at_stop[i].ids
                << " IDs) with the broker down, " << c.unavailable - at_stop[i].unavailable
                << " 503s, " << c.errors - at_stop[i].errors << " errors" << std::endl;
      EXPECT_EQ(c.unavailable, at_stop[i].unavailable) << loads[i]->Summary();
      EXPECT_EQ(c.errors, at_stop[i].errors) << loads[i]->Summary();
      EXPECT_GE(c.replies - at_stop[i].replies, 300)
          << "the gateway hardly served: " << loads[i]->Summary();
    }

    const auto starting = SteadyClock::now();
    auto started = broker_.Start();
    ASSERT_TRUE(started) << started.error();
    std::cout << "outage: broker restarted in " << SecondsSince(starting) << " s" << std::endl;
  }
  const auto up = SteadyClock::now();
  for (auto& l : loads) at_start.push_back(l->counters());

  // Recovery by itself: a brand-new tag is created and served through both gateways.
  const std::string fresh = "outage-fresh";
  std::string last_error;
  bool created = WaitUntil(
      [&] {
        auto r = PutTag(gw_a.port, fresh, R"({"step":100})");
        if (!r) last_error = r.error();
        return r.has_value();
      },
      kRecoveryDeadline);
  ASSERT_TRUE(created) << "no new tag within " << kRecoveryDeadline.count()
                       << " s of the broker's return: " << last_error;
  std::vector<int64_t> fresh_ids;
  bool served = WaitUntil(
      [&] {
        for (const Node* gw : {&gw_a, &gw_b}) {
          auto ids = FetchIds(gw->port, fresh, gw == &gw_a ? 1 : 5);
          if (!ids) {
            last_error = gw->name + ": " + ids.error();
            return false;
          }
          fresh_ids.insert(fresh_ids.end(), ids->begin(), ids->end());
        }
        return true;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kRecoveryDeadline -
                                                            (SteadyClock::now() - up)));
  ASSERT_TRUE(served) << "the new tag was not served within " << kRecoveryDeadline.count()
                      << " s of the broker's return: " << last_error;
  std::cout << "outage: recovered (new tag created and served by both gateways) "
            << SecondsSince(up) << " s after the broker was back" << std::endl;

  // The next segments the gateways could not fetch during the outage arrive now: the tag's
  // max_id covers both gateways' first segments and both of their next ones.
  const int64_t both_preloaded = 1 + 4 * kStep;
  int64_t max_id = 0;
  bool preloaded = WaitUntil(
      [&] {
        auto t = GetTag(gw_a.port, tag);
        if (t) max_id = t->max_id;
        return max_id >= both_preloaded;
      },
      seconds(30));
  EXPECT_TRUE(preloaded) << tag << ": max_id " << max_id << ", expected at least " << both_preloaded
                         << " once both gateways fetched their next segment";
  std::cout << "outage: " << tag << " max_id " << max_id << " " << SecondsSince(up)
            << " s after the broker was back" << std::endl;
  for (auto& l : loads) {
    const int64_t base = l->counters().replies;
    EXPECT_TRUE(l->WaitFor([&](auto& c) { return c.replies >= base + 50; }, seconds(30)))
        << l->Summary();
  }
  for (auto& l : loads) l->Stop();
  for (size_t i = 0; i < loads.size(); ++i) {
    auto c = loads[i]->counters();
    std::cout << loads[i]->Summary()
              << " (after the broker's return: " << c.unavailable - at_start[i].unavailable
              << " 503s)" << std::endl;
    if (!loads[i]->failures().empty()) ADD_FAILURE() << FailureReport(*loads[i]);
    for (const auto& v : OrderViolations(loads[i]->Replies(tag)))
      ADD_FAILURE() << loads[i]->options().name << ": " << v;
  }
  auto all = AllIds({loads[0].get(), loads[1].get()}, tag);
  all.insert(all.end(), batch_ids.begin(), batch_ids.end());
  auto dup = FindDuplicates(all);
  EXPECT_EQ(dup.count, 0) << "IDs served twice, e.g. "
                          << (dup.examples.empty() ? 0 : dup.examples.front());
  dup = FindDuplicates(fresh_ids);
  EXPECT_EQ(dup.count, 0) << "new tag: IDs served twice";
}

}  // namespace
}  // namespace kleaf::integration
