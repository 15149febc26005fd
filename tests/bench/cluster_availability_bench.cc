// Availability while Kafka's leaders move (issue 26, item 4): a kleaf cluster of 2 allocators and 2
// gateways on the three-broker cluster of compose/kafka.sh (replication factor 3, min ISR 2), with
// the default segment steps (tags of step 1,000) and the default worker leases, and clients that
// draw segment and snowflake IDs at a steady rate through both gateways the whole time. Phases:
// a quiet baseline; kill -9 of the broker leading the state topic's partition 0, and the 15 s after
// it is back; SIGSTOP of the active controller for 15 s, and the 15 s after; a rolling restart of
// all three brokers (SIGTERM, start, one after the other), and the 15 s after. For each phase: the
// requests of each kind and the share answered 200. At the end: every ID once (segment IDs per
// tag, snowflake IDs over all).
//
//   tests/bench/cluster_availability.sh     (starts the three brokers, runs this, stops them)
//   kleaf_cluster_availability_bench [threads per gateway and kind] [pause ms]
// KLEAF_TEST_GROUP_PROTOCOL picks the allocators' kafka.group_protocol, KLEAF_BENCH_WORKER_LEASE_MS
// the worker lease (workers.lease_ttl_ms).
// with KLEAF_TEST_KAFKA3_BOOTSTRAP, _DIR and _SCRIPT set (as the script does). docs/benchmarks.md
// has the figures.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/cluster_env.h"
#include "tests/integration/id_load.h"

using namespace kleaf::integration;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

struct Totals {
  int64_t ok = 0, unavailable = 0, errors = 0;
};

Totals Sum(const std::vector<std::unique_ptr<Load>>& loads) {
  Totals t;
  for (const auto& l : loads) {
    auto c = l->counters();
    t.ok += c.replies;
    t.unavailable += c.unavailable;
    t.errors += c.errors;
  }
  return t;
}

class Phases {
 public:
  Phases(const std::vector<std::unique_ptr<Load>>& segment,
         const std::vector<std::unique_ptr<Load>>& snowflake)
      : segment_(segment), snowflake_(snowflake) {
    std::printf(
        "| phase | seconds | segment requests | segment 200 | snowflake requests | "
        "snowflake 200 | 503s | errors |\n|---|---|---|---|---|---|---|---|\n");
    Mark();
  }
  void Mark() {
    seg0_ = Sum(segment_);
    snow0_ = Sum(snowflake_);
    t0_ = SteadyClock::now();
  }
  // Prints the phase since the last Mark() and starts the next one.
  void End(const std::string& name) {
    const Totals seg = Sum(segment_), snow = Sum(snowflake_);
    const auto d = [](const Totals& a, const Totals& b) {
      return Totals{a.ok - b.ok, a.unavailable - b.unavailable, a.errors - b.errors};
    };
    const Totals s = d(seg, seg0_), f = d(snow, snow0_);
    const auto all = [](const Totals& t) { return t.ok + t.unavailable + t.errors; };
    const auto pct = [&](const Totals& t) {
      return all(t) == 0 ? 0.0 : 100.0 * static_cast<double>(t.ok) / static_cast<double>(all(t));
    };
    std::printf("| %s | %.1f | %lld | %.3f %% | %lld | %.3f %% | %lld | %lld |\n", name.c_str(),
                SecondsSince(t0_), static_cast<long long>(all(s)), pct(s),
                static_cast<long long>(all(f)), pct(f),
                static_cast<long long>(s.unavailable + f.unavailable),
                static_cast<long long>(s.errors + f.errors));
    std::fflush(stdout);
    Mark();
  }

 private:
  const std::vector<std::unique_ptr<Load>>& segment_;
  const std::vector<std::unique_ptr<Load>>& snowflake_;
  Totals seg0_, snow0_;
  SteadyClock::time_point t0_;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "cluster_availability: %s\n", what.c_str());
  return 1;
}

// Until no partition of the cluster is under-replicated (kafka-topics --describe
// --under-replicated-partitions prints nothing), as an operator waits between two brokers of a
// rolling restart; false at the deadline.
bool WaitFullyReplicated(const KafkaCluster3& kafka, seconds timeout) {
  return WaitUntil(
      [&] {
        auto r = RunScript({kafka.script, "tool", "topics", "--bootstrap-server", kafka.bootstrap,
                            "--describe", "--under-replicated-partitions"},
                           seconds(60));
        return r.exit_code == 0 && r.output.find("Partition:") == std::string::npos;
      },
      timeout);
}

// The measurement windows are wall-clock spans by design: the bench counts what clients see over
// a fixed time, it synchronises nothing with them.
void Hold(seconds s) { std::this_thread::sleep_for(s); }

}  // namespace

int main(int argc, char** argv) {
  auto kafka = KafkaCluster3::FromEnvironment();
  if (!kafka) return Fail(kNoCluster3Message);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int pause_ms = argc > 2 ? std::atoi(argv[2]) : 10;
  // The allocators' group protocol (KLEAF_TEST_GROUP_PROTOCOL, read by Cluster::Config) and the
  // worker lease (KLEAF_BENCH_WORKER_LEASE_MS; unset: the default) of this run.
  std::map<std::string, std::string> overrides;
  const char* lease = std::getenv("KLEAF_BENCH_WORKER_LEASE_MS");
  if (lease != nullptr && *lease != '\0') overrides["workers.lease_ttl_ms"] = lease;
  const char* protocol = std::getenv("KLEAF_TEST_GROUP_PROTOCOL");
  std::printf("# kafka.group_protocol %s, workers.lease_ttl_ms %s\n",
              protocol != nullptr && *protocol != '\0' ? protocol : "classic (default)",
              lease != nullptr && *lease != '\0' ? lease : "60000 (default)");
  std::fflush(stdout);
  Cluster cluster(kafka->AsBroker(), "avail", overrides);
  auto nodes = cluster.StartNodes(2, 2);
  if (!nodes) return Fail(nodes.error());
  std::vector<std::string> tags;
  for (int i = 0; i < 8; ++i) {
    const std::string tag = "avail-" + std::to_string(i);
    if (auto r = PutTag(nodes->gateways[0]->port, tag, R"({"step":1000})"); !r) {
      return Fail(r.error());
    }
    tags.push_back(tag);
  }
  std::vector<std::unique_ptr<Load>> segment, snowflake;
  for (Node* gw : nodes->gateways) {
    for (auto kind : {LoadOptions::Kind::kSegment, LoadOptions::Kind::kSnowflake}) {
      LoadOptions o;
      o.name = gw->name;
      o.port = gw->port;
      o.tags = tags;
      o.kind = kind;
      o.threads = threads;
      o.pause = milliseconds(pause_ms);
      o.max_requests = 10'000'000;
      o.request_timeout = milliseconds(10000);
      (kind == LoadOptions::Kind::kSegment ? segment : snowflake)
          .push_back(std::make_unique<Load>(o));
    }
  }
  Phases phases(segment, snowflake);
  Hold(seconds(15));
  phases.End("baseline");

  ClusterRestartGuard guard(*kafka);
  auto leader = kafka->LeaderOf(cluster.prefix() + ".state", 0);
  if (!leader || *leader < 1) return Fail("no leader of the state topic's partition 0");
  if (auto r = kafka->Kill(*leader); !r) return Fail(r.error());
  Hold(seconds(15));
  phases.End("state leader (broker " + std::to_string(*leader) + ") killed, 15 s");
  if (auto r = kafka->Start(*leader); !r) return Fail(r.error());
  phases.End("its restart");
  Hold(seconds(15));
  phases.End("15 s after it is back");

  auto controller = kafka->ActiveController();
  if (!controller || *controller < 1) return Fail("no active controller");
  {
    NodeFreeze freeze(*kafka, *controller);
    if (auto r = freeze.Freeze(); !r) return Fail(r.error());
    Hold(seconds(15));
    phases.End("active controller (broker " + std::to_string(*controller) + ") paused 15 s");
  }
  phases.End("its thaw");
  Hold(seconds(15));
  phases.End("15 s after the thaw");

  for (int node = 1; node <= KafkaCluster3::kNodes; ++node) {
    if (auto r = kafka->Stop(node); !r) return Fail(r.error());
    if (auto r = kafka->Start(node); !r) return Fail(r.error());
    // The next broker goes down only once this one is back in every ISR, as an operator waits for
    // under-replicated partitions to reach 0 (docs/operations.md).
    if (!WaitFullyReplicated(*kafka, seconds(120))) {
      return Fail("partitions still under-replicated 120 s after broker " + std::to_string(node) +
                  " restarted");
    }
  }
  phases.End("rolling restart of brokers 1, 2, 3");
  Hold(seconds(15));
  phases.End("15 s after the rolling restart");

  for (auto& l : segment) l->Stop();
  for (auto& l : snowflake) l->Stop();
  int64_t duplicates = 0;
  std::vector<const Load*> seg_loads, snow_loads;
  for (auto& l : segment) seg_loads.push_back(l.get());
  for (auto& l : snowflake) snow_loads.push_back(l.get());
  std::vector<int64_t> snowflakes;
  for (const auto& tag : tags) {
    duplicates += FindDuplicates(AllIds(seg_loads, tag)).count;
    auto ids = AllIds(snow_loads, tag);
    snowflakes.insert(snowflakes.end(), ids.begin(), ids.end());
  }
  duplicates += FindDuplicates(snowflakes).count;
  std::printf("\nduplicates: %lld\n", static_cast<long long>(duplicates));
  for (auto& l : segment) std::printf("%s\n", l->Summary().c_str());
  for (auto& l : snowflake) std::printf("%s\n", l->Summary().c_str());
  // What the gateways said of their leases and the allocators of their takeovers: the reasons
  // behind any 503 in the table.
  for (Node* gw : nodes->gateways) {
    for (const auto& line : LinesWith(gw->Log(), "[lease]")) {
      std::printf("%s: %s\n", gw->name.c_str(), line.c_str());
    }
  }
  for (Node* a : nodes->allocators) {
    for (const auto& what :
         {"protocol (kafka.group_protocol", "cannot take over", "restored", "no longer served"}) {
      for (const auto& line : LinesWith(a->Log(), what)) {
        std::printf("%s: %s\n", a->name.c_str(), line.c_str());
      }
    }
  }
  return duplicates == 0 ? 0 : 1;
}
