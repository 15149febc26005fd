// A gateway's wall clock set back (libfaketime): at startup it is refused, while running small
// steps are waited out and large ones answer 503 until the clock is right again, and after a crash
// its worker id never goes back to timestamps it already used (I3).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "tests/e2e/http_client.h"
#include "tests/integration/workers/worker_env.h"

namespace kleaf::integration::workers {
namespace {

constexpr char kRegistrySkewRefusal[] =
    "claim refused: this node's clock differs from the allocator's";
constexpr char kLocalMarkRefusal[] = "behind the last snowflake timestamp this node persisted";

// How far back a restarted gateway's clock is set: beyond workers.max_clock_skew_ms (1 s) and
// snowflake.max_startup_wait_ms (5 s). librdkafka computes the deadline of a timed wait from
// gettimeofday(), which libfaketime shifts, and waits in glibc's C11 cnd_timedwait(), which
// libfaketime does not intercept: without tests/e2e/faketime_c11.cc's shim (preloaded by
// e2e::FaketimePrefix) a wait whose timeout is shorter than the offset expires at once (librdkafka
// 2.8: under -30 s the gateway exited with "metadata of <prefix>.requests: Local: Timed out"), or
// spins to its full timeout deaf to its condition (2.10 and later: under -15 s, "describing the
// cluster's topics timed out"), before any clock check.
constexpr char kClockBack[] = "-15s";
constexpr int64_t kClockBackMs = -15000;

class WorkerClockTest : public WorkerRegistryTest {
 protected:
  void SetUp() override {
    WorkerRegistryTest::SetUp();
    if (IsSkipped()) return;
    if (e2e::Libfaketime().empty()) GTEST_SKIP() << "libfaketime is not installed";
  }
};

// Which of the two refusals a start with the clock set back met; empty for neither.
std::string ClockRefusal(const std::string& err) {
  if (err.find(kRegistrySkewRefusal) != std::string::npos) return "registry clock-skew refusal";
  if (err.find(kLocalMarkRefusal) != std::string::npos) return "timestamp high-water mark check";
  return "";
}

TEST_F(WorkerClockTest, StartWithTheClockSetBackIsRefused) {
  RegistryCluster cluster(broker_, "clockstart");
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  // A refused claim is retried until claim_timeout_ms (a queued request makes a good clock look
  // behind): keep that short.
  Node& g = cluster.AddGateway("gw", {{"workers.claim_timeout_ms", "4000"}});
  {
    auto r = StartNode(g);
    ASSERT_TRUE(r) << r.error();
  }
  const int64_t worker = WorkerIdOf(g.port).value_or(-1);
  auto before = GetSnowflakes(g.port, "clock", 500);
  ASSERT_TRUE(before) << before.error();
  auto stopped = Stop(g);
  ASSERT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString();

  auto refused =
      StartExpectingExit(g, seconds(60), e2e::FaketimeEnv(), e2e::FaketimePrefix(kClockBack));
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_FALSE(refused->was_ready) << "it served before it exited: " << refused->out;
  EXPECT_TRUE(refused->status.exited && refused->status.code != 0) << refused->status.ToString();
  const std::string which = ClockRefusal(refused->err);
  ASSERT_FALSE(which.empty()) << "no clock refusal in:\n" << refused->err;
  // The reported skew or lag proves the gateway really ran with its clock set back.
  static const std::regex kSkew(R"(differs from the allocator's by (-?\d+) ms)");
  static const std::regex kBehind(R"(the clock is (\d+) ms behind)");
  if (std::smatch m; std::regex_search(refused->err, m, kSkew)) {
    EXPECT_NEAR(std::stoll(m[1].str()), kClockBackMs, 3000) << refused->err;
  } else if (std::regex_search(refused->err, m, kBehind)) {
    EXPECT_NEAR(std::stoll(m[1].str()), -kClockBackMs, 3000) << refused->err;
  }
  std::cout << "[ worker ] start under faketime " << kClockBack << " refused by the " << which
            << " after "
            << refused->seconds << " s: "
            << LastLines(refused->err, 1);

  // With the clock right again it serves, with the same id, above what it issued before.
  {
    auto r = StartNode(g);
    ASSERT_TRUE(r) << r.error();
  }
  EXPECT_EQ(WorkerIdOf(g.port).value_or(-1), worker);
  auto after = GetSnowflakes(g.port, "clock", 500);
  ASSERT_TRUE(after) << after.error();
  EXPECT_GT(after->front(), before->back());
}

TEST_F(WorkerClockTest, StartWithTheClockSetBackAndLocalStateLostIsRefusedByTheRegistryMark) {
  // The registry accepts clocks up to 30 s off here, and the gateway comes back without its local
  // state: only the last timestamp the registry keeps for its worker id stands between it and the
  // IDs it issued before (validation: margin >= skew, ttl >= 2 * renew + margin).
  RegistryCluster cluster(broker_, "clockmark",
                          {{"workers.max_clock_skew_ms", "30000"},
                           {"workers.safety_margin_ms", "30000"},
                           {"workers.lease_ttl_ms", "32000"}});
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  Node& g = cluster.AddGateway("gw", {{"workers.claim_timeout_ms", "4000"}});
  {
    auto r = StartNode(g);
    ASSERT_TRUE(r) << r.error();
  }
  auto before = GetSnowflakes(g.port, "clock", 500);
  ASSERT_TRUE(before) << before.error();
  const auto last_issued = SteadyClock::now();
  auto stopped = Stop(g);
  ASSERT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString();

  cluster.Reconfigure(g, {{"state.path", "\"" + (cluster.dir() / "gw-new-state").string() + "\""}});
  auto refused =
      StartExpectingExit(g, seconds(60), e2e::FaketimeEnv(), e2e::FaketimePrefix(kClockBack));
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_FALSE(refused->was_ready) << "it served before it exited: " << refused->out;
  EXPECT_TRUE(refused->status.exited && refused->status.code != 0) << refused->status.ToString();
  EXPECT_NE(refused->err.find(kLocalMarkRefusal), std::string::npos) << refused->err;
  static const std::regex kBehind(R"(the clock is (\d+) ms behind)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(refused->err, m, kBehind)) << refused->err;
  // Behind the last issued timestamp by the offset, less the time since that ID was issued.
  const int64_t behind = std::stoll(m[1].str());
  EXPECT_LE(behind, -kClockBackMs + 1000) << refused->err;
  EXPECT_GE(behind, -kClockBackMs - SecondsSince(last_issued) * 1000 - 1000) << refused->err;
  std::cout << "[ worker ] fresh local state under faketime " << kClockBack
            << " refused by the registry's mark: " << LastLines(refused->err, 1);
}

TEST_F(WorkerClockTest, KilledGatewayRestartingWithoutLocalStateNeverGoesBackInTime) {
  // kill -9, then the same node id comes back without its local state (a fresh container) and with
  // its clock 9 s behind. At once it gets another worker id (it cannot prove the crashed process
  // gone); after the crashed lease ended it gets the old one back, and then: within the skew the registry accepts here (validation: margin >= skew,
  // ttl >= 2 * renew + margin), and the gateway may wait up to 25 s at startup for its clock to
  // pass the registry's mark. So as long as the restart takes less than 9 s, the restarted run's
  // clock is behind what the crashed run issued. I3: its worker id must still never carry a
  // timestamp again that the crashed run may have used. (This failed when a same-node claim got as
  // not_before only the timestamp its last renewal reported, which lags what the crashed run
  // issued; ClaimWorker now also counts up to min(lease end, now + max_clock_skew).)
  constexpr char kBehind[] = "-9";
  RegistryCluster cluster(broker_, "clockcrash",
                          {{"workers.max_clock_skew_ms", "10000"},
                           {"workers.safety_margin_ms", "10000"},
                           // A same-node claim's not_before may lie up to 2 * skew ahead of
                           // this clock (the crashed run's clock may have been skew ahead of the
                           // allocator's), so the startup wait must allow ~20 s, and
                           // ttl - margin must outlast it: the lease deadline counts from the
                           // claim, the first renewal comes after the wait.
                           {"workers.lease_ttl_ms", "40000"},
                           {"snowflake.max_startup_wait_ms", "25000"}});
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  const Layout layout;
  Node& g = cluster.AddGateway("gw");
  {
    auto r = StartNode(g);
    ASSERT_TRUE(r) << r.error();
  }
  const int64_t worker = WorkerIdOf(g.port).value_or(-1);

  // IDs are issued without a pause until the crash.
  std::mutex mu;
  std::vector<int64_t> old_ids;  // guarded by mu
  std::string load_ended;         // guarded by mu
  int load_503 = 0;               // guarded by mu
  std::atomic<bool> stop{false};
  std::thread load([&] {
    e2e::HttpClient client(g.port, seconds(5));
    while (!stop.load()) {
      auto reply = client.Get("/api/v1/snowflake/crash?count=100");
      std::lock_guard lock(mu);
      if (reply && reply->status == 503) {
        // The generator outran the timestamp reservation (snowflake.reserve_ms is 400 ms in tests
        // and its RocksDB write is synced): retry, as a client would.
        ++load_503;
        continue;
      }
      auto ids = reply ? e2e::IdsOf(*reply, /*plain=*/false, "crash")
                       : std::expected<std::vector<int64_t>, std::string>(
                             std::unexpected(reply.error()));
      if (!ids) {
        load_ended = ids.error();  // the kill, or a failure before it
        break;
      }
      old_ids.insert(old_ids.end(), ids->begin(), ids->end());
    }
  });
  auto last_issued_ms = [&] {
    std::lock_guard lock(mu);
    return old_ids.empty() ? int64_t{0} : Split(layout, old_ids.back()).timestamp_ms;
  };
  auto load_error = [&] {
    std::lock_guard lock(mu);
    return load_ended;
  };
  // The crash comes 300 ms after a renewal (seen as a jump of the node's valid_for_ms), well before
  // the next one: the crashed run then issued for 300 ms past the timestamp the registry knows.
  int64_t previous_valid_ms = INT64_MAX;
  int64_t renewed_at_ms = 0;
  WaitUntil(
      [&] {
        auto view = GetWorkers(g.port);
        if (!view) return !load_error().empty();
        const bool jumped = view->valid_for_ms > previous_valid_ms;
        previous_valid_ms = view->valid_for_ms;
        if (jumped) renewed_at_ms = e2e::WallClockMs();
        return jumped || !load_error().empty();
      },
      seconds(10));
  WaitUntil([&] { return !load_error().empty() || last_issued_ms() > renewed_at_ms + 300; },
            seconds(10));
  const std::string failed_before_kill = load_error();
  g.process->KillAndWait();
  const auto killed = SteadyClock::now();
  stop = true;
  load.join();
  ASSERT_TRUE(failed_before_kill.empty())
      << "the load failed before the kill: " << failed_before_kill;
  ASSERT_GT(renewed_at_ms, 0) << "no renewal seen in 10 s";
  ASSERT_GT(last_issued_ms(), renewed_at_ms + 300) << "the load stalled after the renewal";
  int64_t old_last_ms = 0;
  for (int64_t id : old_ids) old_last_ms = std::max(old_last_ms, Split(layout, id).timestamp_ms);

  // Right after the crash, a fresh state directory cannot prove the crashed process gone (a name
  // is not an identity): its lease still runs, so the restarted node gets another worker id.
  cluster.Reconfigure(g, {{"state.path", "\"" + (cluster.dir() / "gw-fresh").string() + "\""}});
  {
    auto r = StartNode(g, e2e::FaketimeEnv(), e2e::FaketimePrefix(kBehind));
    ASSERT_TRUE(r) << r.error();
  }
  auto early = WorkerIdOf(g.port);
  ASSERT_TRUE(early) << early.error();
  EXPECT_NE(*early, worker) << "a live lease went to a process that cannot prove its holder gone";
  {
    // The crashed run's lease still counts beside the new one.
    auto view = GetWorkers(g.port);
    ASSERT_TRUE(view) << view.error();
    EXPECT_EQ(view->leased, 2) << view->body;
  }
  std::vector<int64_t> early_ids;
  {
    auto ids = GetSnowflakes(g.port, "crash", 1000);
    ASSERT_TRUE(ids) << ids.error();
    early_ids = *ids;
  }
  g.process->Terminate();  // kleaf releases its own lease (the faketime wrapper just dies)
  const auto stopped = g.process->WaitExit(seconds(30));
  ASSERT_FALSE(stopped.timed_out) << stopped.ToString();

  // Once the crashed run's lease has ended (it was renewed at the latest when the gateway was
  // killed), the node id gets its old worker id back, from after that lease's end.
  const auto lease_over = killed + milliseconds(40000 + 1000);
  while (SteadyClock::now() < lease_over) std::this_thread::sleep_until(lease_over);
  cluster.Reconfigure(g, {{"state.path", "\"" + (cluster.dir() / "gw-fresh-2").string() + "\""}});
  {
    auto r = StartNode(g, e2e::FaketimeEnv(), e2e::FaketimePrefix(kBehind));
    ASSERT_TRUE(r) << r.error();
  }
  const double restarted_after_s = SecondsSince(killed);
  auto claimed = WorkerIdOf(g.port);
  ASSERT_TRUE(claimed) << claimed.error();
  EXPECT_EQ(*claimed, worker) << "the node id did not get its expired worker id back";
  const int64_t not_before_ms = ClaimedNotBeforeMs(g).value_or(-1);
  std::vector<int64_t> new_ids;
  for (int i = 0; i < 3; ++i) {
    auto ids = GetSnowflakes(g.port, "crash", 1000);
    ASSERT_TRUE(ids) << ids.error();
    new_ids.insert(new_ids.end(), ids->begin(), ids->end());
  }
  int64_t new_first_ms = INT64_MAX;
  for (int64_t id : new_ids) {
    ASSERT_EQ(Split(layout, id).worker_id, worker) << id;
    new_first_ms = std::min(new_first_ms, Split(layout, id).timestamp_ms);
  }
  std::vector<int64_t> all = old_ids;
  all.insert(all.end(), early_ids.begin(), early_ids.end());
  all.insert(all.end(), new_ids.begin(), new_ids.end());
  auto duplicate = FindDuplicate(all);
  std::cout << "[ worker ] crashed run issued " << old_ids.size() << " IDs (and answered "
            << load_503 << " requests 503) up to " << old_last_ms
            << "; a fresh restart at once got "
            << "worker id " << *early << " (" << early_ids.size() << " IDs); after the lease, "
            << restarted_after_s << " s after the kill (clock " << kBehind
            << " s, fresh state) it claimed worker id " << *claimed << " not before "
            << not_before_ms << " (" << (not_before_ms - old_last_ms)
            << " ms from the crashed run's last timestamp); first new timestamp "
            << (new_first_ms - old_last_ms) << " ms from it; " << all.size() << " IDs checked, "
            << (duplicate ? *duplicate : std::string("no duplicate")) << "\n";
  EXPECT_GT(new_first_ms, old_last_ms)
      << "worker id " << worker << " went back in time: the restarted run issued timestamp "
      << new_first_ms << ", the crashed run had issued up to " << old_last_ms
      << " (registry not_before " << not_before_ms << ")";
  EXPECT_FALSE(duplicate) << *duplicate;
}

TEST_F(WorkerClockTest, ClockStepBackWhileRunningIsWaitedOutOrAnswered503) {
  const Layout layout;
  RegistryCluster cluster(broker_, "clockrun");
  auto allocator = cluster.StartAllocator();
  ASSERT_TRUE(allocator) << allocator.error();
  e2e::OffsetFile offset(cluster.dir());
  Node& g = cluster.AddGateway("gw");  // snowflake.max_backward_ms: the default, 5
  {
    auto r = StartNode(g, offset.Environment());
    ASSERT_TRUE(r) << r.error();
  }
  const int64_t worker = WorkerIdOf(g.port).value_or(-1);

  e2e::HttpClient client(g.port);
  std::vector<int64_t> ids;  // in the order issued
  auto issue = [&]() -> std::expected<e2e::HttpReply, std::string> {
    auto reply = client.Get("/api/snowflake/get/step");
    if (!reply) return reply;
    if (reply->status == 200) {
      auto got = e2e::IdsOf(*reply, /*plain=*/true, "step");
      if (!got) return std::unexpected(got.error());
      ids.push_back(got->front());
    }
    return reply;
  };
  auto timed_issue = [&](double& ms) {
    const auto start = SteadyClock::now();
    auto r = issue();
    ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    return r;
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::vector<double> baseline_ms, after_step_ms;
  for (int i = 0; i < 50; ++i) {
    double ms = 0;
    auto r = timed_issue(ms);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error());
    baseline_ms.push_back(ms);
  }

  // 1. Steps of 3 ms back (within max_backward_ms), each between two requests: all succeed.
  constexpr int kSmallSteps = 20;
  for (int k = 1; k <= kSmallSteps; ++k) {
    char text[32];
    std::snprintf(text, sizeof(text), "-%d.%03d", (3 * k) / 1000, (3 * k) % 1000);
    offset.Set(text);
    for (int i = 0; i < 3; ++i) {
      double ms = 0;
      auto r = timed_issue(ms);
      ASSERT_TRUE(r) << r.error();
      ASSERT_EQ(r->status, 200) << "after a 3 ms step back (offset " << text << "): " << r->body;
      if (i == 0) after_step_ms.push_back(ms);
    }
  }
  // The steps took effect: the gateway's clock is now 60 ms behind ours.
  int64_t best_lag = INT64_MIN;
  for (int i = 0; i < 5; ++i) {
    const int64_t asked = e2e::WallClockMs();
    auto r = issue();
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error());
    best_lag = std::max(best_lag, asked - Split(layout, ids.back()).timestamp_ms);
  }
  EXPECT_GE(best_lag, 3 * kSmallSteps - 15)
      << "the gateway's IDs do not lag by the offset: libfaketime did not apply the small steps";

  // 2. 10 s back: snowflake requests answer 503 with the clock's reason. (Meanwhile librdkafka's
  // timed waits shorter than 10 s expire at once, see kClockBack.)
  const size_t issued_before_big_step = ids.size();
  offset.Set("-10");
  std::expected<e2e::HttpReply, std::string> refused;
  bool got_503 = WaitUntil(
      [&] {
        refused = issue();
        return !refused || refused->status != 200;
      },
      seconds(10));
  ASSERT_TRUE(got_503 && refused) << (refused ? refused->body : refused.error());
  ASSERT_EQ(refused->status, 503) << refused->body;
  auto body = nlohmann::json::parse(refused->body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << refused->body;
  EXPECT_EQ(body["error"].value("code", ""), "unavailable") << refused->body;
  const std::string message = body["error"].value("message", "");
  EXPECT_NE(message.find("clock"), std::string::npos) << refused->body;
  EXPECT_FALSE(refused->Header("Retry-After").empty());
  static const std::regex kBack(R"(moved backwards by (\d+) ms)");
  if (std::smatch m; std::regex_search(message, m, kBack)) {
    EXPECT_NEAR(std::stoll(m[1].str()), 10000 - 3 * kSmallSteps, 1000) << message;
  }
  // It stays refused while the clock is behind (the batch route too), longer than a lease renewal.
  const auto refusing_since = SteadyClock::now();
  int refusals = 0;
  while (SecondsSince(refusing_since) * 1000 < 2 * kRenewIntervalMs) {
    auto r = issue();
    ASSERT_TRUE(r) << r.error();
    ASSERT_EQ(r->status, 503) << "an ID was issued with the clock 10 s back: " << r->body;
    auto batch = client.Get("/api/v1/snowflake/step?count=10");
    ASSERT_TRUE(batch) << batch.error();
    ASSERT_EQ(batch->status, 503) << batch->body;
    ++refusals;
  }
  EXPECT_EQ(ids.size(), issued_before_big_step);

  // 3. The clock is right again: IDs flow again.
  offset.Set("+0");
  std::expected<e2e::HttpReply, std::string> back;
  bool recovered = WaitUntil(
      [&] {
        back = issue();
        return !back || back->status == 200;
      },
      seconds(15));
  ASSERT_TRUE(recovered && back) << (back ? back->body : back.error());
  ASSERT_EQ(back->status, 200) << back->body;
  for (int i = 0; i < 50; ++i) {
    auto r = issue();
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error());
  }

  auto order = FindNonIncreasing(ids);
  EXPECT_FALSE(order) << *order;
  auto duplicate = FindDuplicate(ids);
  EXPECT_FALSE(duplicate) << *duplicate;
  for (int64_t id : ids) ASSERT_EQ(Split(layout, id).worker_id, worker) << id;
  EXPECT_EQ(Count(g.Log(), "[lease] lost worker id"), 0) << g.Log();
  // The generator waits out a step of 3 ms only when the previous ID is less than 3 ms old; the
  // first request after a step is then slower (informational: the loopback round trip varies).
  std::cout << "[ worker ] " << ids.size() << " IDs across " << kSmallSteps
            << " steps of 3 ms back (lag then " << best_lag << " ms; median request "
            << median(baseline_ms) << " ms before, " << median(after_step_ms)
            << " ms right after a step), " << refusals << " rounds of 503 at -10 s (\"" << message
            << "\"), increasing throughout; lease renewal warnings: "
            << Count(g.Log(), "[lease] renewing worker id") << "\n";

  auto stopped = Stop(g);
  EXPECT_TRUE(stopped.exited && stopped.code == 0) << stopped.ToString();
}

}  // namespace
}  // namespace kleaf::integration::workers
