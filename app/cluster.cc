#include "app/cluster.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "allocator/import.h"
#include "allocator/lease_clock.h"
#include "app/common.h"
#include "app/serve.h"
#include "app/standalone.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "cluster/allocator_client.h"
#include "cluster/allocator_node.h"
#include "cluster/owner_hop.h"
#include "cluster/readiness.h"
#include "cluster/restore.h"
#include "cluster/setup.h"
#include "cluster/state_export.h"
#include "http/http_server.h"
#include "http/ops_routes.h"
#include "kafka/probe.h"
#include "state/export_file.h"
#include "state/leaf_dump.h"
#include "state/records.h"

namespace kleaf::app {
namespace {

using std::chrono::milliseconds;

// A metadata request for the cluster's requests topic every second, for /readyz.
kafka::BrokerProbe::Options ProbeOptions(const cluster::ClusterSetup& setup) {
  kafka::BrokerProbe::Options o;
  o.topic = setup.topics.requests;
  return o;
}

// Test hook: the first N commits of the maxima a takeover read past a transaction without an
// outcome fail (aborted instead), as a commit the broker refused or timed out would.
constexpr char kFailRewritesHook[] = "KLEAF_ALLOCATOR_TEST_FAIL_REWRITES";

// Test hook: "<ppm>,<window_ms>": the clock's state that A1's check reads is a synchronized clock
// whose frequency correction is <ppm>, and drift is counted over <window_ms> instead of 10
// minutes, so that a test sees the check drop the leases without a clock that drifts.
constexpr char kClockCorrectionHook[] = "KLEAF_ALLOCATOR_TEST_CLOCK_CORRECTION";

class FixedClockRate final : public allocator::KernelClockRateSource {
 public:
  explicit FixedClockRate(double ppm) : ppm_(ppm) {}
  Result<allocator::KernelClockState> Read() override {
    return allocator::KernelClockState{ppm_, true, 0};
  }

 private:
  const double ppm_;
};

// What an allocator node runs with: the cluster's topics and layout, the rules from the config.
cluster::AllocatorNodeOptions NodeOptions(const config::Config& c,
                                          const cluster::ClusterSetup& setup) {
  cluster::AllocatorNodeOptions options;
  options.props = setup.props;
  options.topics = setup.topics;
  // The registry hands out only the worker ids of the datacenter the layout records.
  const allocator::WorkerRange workers =
      allocator::WorkerRangeOf(setup.layout.datacenter, c.snowflake.worker_bits);
  options.rules = {
      c.segment.max_step,
      c.segment.default_step,
      c.segment.auto_create,
      {workers.last, c.workers.lease_ttl_ms, c.workers.max_clock_skew_ms, workers.first},
      state::ParseIdMode(c.segment.default_id_mode).value_or(state::IdMode::kPlain),
      setup.layout.datacenter};
  options.rules.spaces.raise_ahead = static_cast<double>(c.sequence.raise_ahead_percent) / 100;
  options.group_id = c.kafka.topic_prefix + ".allocators";
  options.batch_max = c.allocator.batch_max;
  options.txn_timeout = milliseconds(c.kafka.transaction_timeout_ms);
  options.session_timeout = milliseconds(c.kafka.session_timeout_ms);
  options.group_protocol = c.kafka.group_protocol;
  options.lease = LeaseTimingOf(c);
  options.lease_renew_ms = c.sequence.RenewIntervalMs();
  options.idle_release_ms = c.sequence.idle_release_ms;
  options.node_name = c.node.id;
  if (const char* hook = std::getenv(kClockCorrectionHook); hook != nullptr && *hook != '\0') {
    double ppm = 0;
    int64_t window_ms = 0;
    if (std::sscanf(hook, "%lf,%" SCNd64, &ppm, &window_ms) == 2 && window_ms > 0) {
      static FixedClockRate fixed(ppm);  // one node per process
      options.clock_rate = &fixed;
      options.drift_window_ns = window_ms * 1'000'000;
      spdlog::warn(
          "[allocator] test hook: the clock's frequency correction reads {} ppm, drift "
          "counted over {} ms",
          ppm, window_ms);
    }
  }
  if (const char* hook = std::getenv(kFailRewritesHook); hook != nullptr && *hook != '\0') {
    auto left = std::make_shared<std::atomic<int64_t>>(std::atoll(hook));
    options.before_rewrite_commit = [left](int32_t p) -> Result<void> {
      if (left->fetch_sub(1) <= 0) return {};
      spdlog::warn("[allocator] {}: failing the rewrite of partition {}'s maxima",
                   kFailRewritesHook, p);
      return Fail(Code::kUnavailable, std::string(kFailRewritesHook));
    };
  }
  return options;
}

// The owner hop's routes in front of `rest`: POST /internal/v1/seq/<p> (the body: a wire envelope
// of a NextSeq or CurrentSeq; the answer carries p's lease generation, R8, in Kleaf-Generation),
// and POST /internal/v1/seq (the calls of several partitions in one body, wire::EncodeHopCalls,
// answered together once each is, wire::EncodeHopReplies).
http::Handler OwnerHopRoutes(cluster::AllocatorNode& node, http::Handler rest) {
  return [&node, rest = std::move(rest)](http::HttpRequest req, http::Respond respond) {
    constexpr std::string_view kMany = "/internal/v1/seq";
    constexpr std::string_view kPrefix = "/internal/v1/seq/";
    std::string_view target = req.target;
    if (target != kMany && !target.starts_with(kPrefix)) {
      return rest(std::move(req), std::move(respond));
    }
    if (req.method != "POST") {
      return respond(
          http::ErrorResponse(Error{Code::kInvalidArgument, "the owner hop takes POST only"}, 0));
    }
    if (target == kMany) {
      auto calls = cluster::wire::DecodeHopCalls(req.body);
      if (!calls) return respond(http::ErrorResponse(calls.error(), 0));
      struct Gather {
        Mutex mu;
        std::vector<cluster::wire::HopReply> replies KLEAF_GUARDED_BY(mu);
        size_t left KLEAF_GUARDED_BY(mu) = 0;
        http::Respond respond;
      };
      auto g = std::make_shared<Gather>();
      {
        MutexLock lock(g->mu);
        g->replies.resize(calls->size());
        g->left = calls->size();
      }
      g->respond = std::move(respond);
      for (size_t i = 0; i < calls->size(); ++i) {
        auto& call = (*calls)[i];
        node.SubmitHop(call.partition, std::move(call.request),
                       [g, i](cluster::AllocatorNode::HopAnswer a) {
                         std::string body;
                         {
                           MutexLock lock(g->mu);
                           g->replies[i] = std::move(a);
                           if (--g->left > 0) return;
                           body = cluster::wire::EncodeHopReplies(g->replies);
                         }
                         http::HttpResponse r;
                         r.status = 200;
                         r.body = std::move(body);
                         r.headers.emplace_back(cluster::kRawClockHeader,
                                                std::to_string(cluster::RawClockNs()));
                         g->respond(std::move(r));
                       });
      }
      return;
    }
    target.remove_prefix(kPrefix.size());
    int32_t p = -1;
    const auto [end, ec] = std::from_chars(target.data(), target.data() + target.size(), p);
    if (ec != std::errc() || end != target.data() + target.size() || p < 0) {
      return respond(http::ErrorResponse(
          Error{Code::kNotFound,
                "no such route: " + req.target + " (/internal/v1/seq/<partition>)"},
          0));
    }
    node.SubmitHop(p, std::move(req.body),
                   [respond = std::move(respond)](cluster::AllocatorNode::HopAnswer a) {
                     http::HttpResponse r;
                     r.status = a.status;
                     r.body = std::move(a.body);
                     r.headers.emplace_back("Kleaf-Generation", std::to_string(a.generation));
                     r.headers.emplace_back(cluster::kRawClockHeader,
                                            std::to_string(cluster::RawClockNs()));
                     respond(std::move(r));
                   });
  };
}

// Where gateways reach this allocator's owner hop: sequence.hop_address, else the listen host (the
// machine's host name for a wildcard) and the port bound.
std::string HopAddress(const config::Config& c, const std::string& host, uint16_t port) {
  if (!c.sequence.hop_address.empty()) return c.sequence.hop_address;
  std::string name = host;
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
    char buf[256] = {};
    name = ::gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0' ? buf : "localhost";
  }
  if (name.find(':') != std::string::npos && !name.starts_with('[')) name = "[" + name + "]";
  return name + ":" + std::to_string(port);
}

// Operators' endpoints, only where http.listen is given: with the defaults an allocator would
// take the port a gateway on the same host expects. Returns what the startup line says of them.
[[nodiscard]] Result<std::string> StartAllocatorOps(const config::Config& c,
                                                    cluster::AllocatorNode& node,
                                                    kafka::BrokerProbe& probe,
                                                    std::optional<http::HttpServer>& server) {
  if (!c.http.listen_set) {
    spdlog::info("[allocator] no http.listen in the config: no /metrics, /healthz, /readyz");
    return std::string();
  }
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return Fail(listen.error().code, "http.listen: " + listen.error().message);
  http::Handler ops = http::OpsRoutes(
      "allocators", [&node, &probe] { return cluster::NodeReadiness(node, probe); });
  if (c.sequence.owner_hop) ops = OwnerHopRoutes(node, std::move(ops));
  server.emplace(OpsHttpOptions(c, listen->first, listen->second), std::move(ops));
  auto port = server->Start();
  if (!port) return std::unexpected(port.error());
  if (c.sequence.owner_hop) {
    const std::string address = HopAddress(c, listen->first, *port);
    node.SetHopAddress(address);
    spdlog::info("[allocator] owner hop at {}{}, the route sent with sequence answers",
                 c.http.tls.enabled() ? "https://" : "http://", address);
  }
  return "; " + HttpUrl(listen->first, *port, c.http.tls.enabled());
}

}  // namespace

allocator::LeaseTiming LeaseTimingOf(const config::Config& c) {
  allocator::LeaseTiming t{c.sequence.lease_ms, c.sequence.clock_drift_ppm,
                           c.sequence.lease_margin_ms};
  if (const char* hook = std::getenv("KLEAF_ALLOCATOR_TEST_WAIT_WITHOUT_DRIFT");
      hook != nullptr && std::string(hook) == "1") {
    spdlog::warn("[allocator] test hook: takeover waits leave out (1 + clock_drift)");
    t.wait_without_drift = true;
  }
  return t;
}

Result<void> CheckAllocatorLease(const config::Config& c) {
  return allocator::CheckLeaseCovered(LeaseTimingOf(c));
}

int RunAllocator(const config::Config& c) {
  auto setup = cluster::PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  if (auto bound =
          cluster::BindStoreToStateTopic(**store, setup->topics, setup->layout, c.state.path);
      !bound) {
    return StartupError(bound.error().message);
  }
  cluster::AllocatorNodeOptions options = NodeOptions(c, *setup);
  // The wait covers the lease: checked before anything else (main.cc, CheckRoleConfig); here the
  // lease clocks can be read.
  if (auto readable = allocator::CheckLeaseClocksReadable(allocator::KernelLeaseClocks());
      !readable) {
    return StartupError(readable.error().message);
  }
  // A suspend the kernel measured as nothing would not end a lease here (R9): a warning where
  // values are answered from leases (the owner hop), information where they wait for commits.
  if (auto warning = allocator::SuspendCountWarning(allocator::KernelLeaseClocks());
      !warning.empty()) {
    if (c.sequence.owner_hop) {
      spdlog::warn("[allocator] {}", warning);
    } else {
      spdlog::info("[allocator] {}", warning);
    }
  }
  // A pause a hypervisor hides from the guest's clocks is seen only when corrected by a step (A1).
  if (auto warning = allocator::ClocksourceWarning(allocator::CurrentClocksource());
      !warning.empty() && c.sequence.lease_ms > 0) {
    if (c.sequence.owner_hop) {
      spdlog::warn("[allocator] {}", warning);
    } else {
      spdlog::info("[allocator] {}", warning);
    }
  }
  // A right the brokers' authorizer refuses (group, transactional id) ends the node with exit 1 and
  // the right's name, rather than a node that runs and never serves (docs/operations.md, "Kafka
  // ACLs"). The first refusal wins; SIGTERM wakes the wait below.
  Mutex unauthorized_mu;
  std::string unauthorized;
  options.on_unauthorized = [&unauthorized_mu, &unauthorized](const std::string& why) {
    MutexLock lock(unauthorized_mu);
    if (!unauthorized.empty()) return;
    unauthorized = why;
    ::kill(::getpid(), SIGTERM);
  };
  cluster::AllocatorNode node(options, **store, SystemClock::Instance());
  if (auto r = node.Start(); !r) return StartupError(r.error().message);
  kafka::BrokerProbe probe(setup->props, ProbeOptions(*setup), SystemClock::Instance());
  probe.Start();
  std::optional<http::HttpServer> server;
  auto http_note = StartAllocatorOps(c, node, probe, server);
  if (!http_note) return StartupError(http_note.error().message);
  spdlog::info("[allocator] node {} running (group {}, {} partitions){}", c.node.id,
               options.group_id, options.topics.partitions, *http_note);
  std::cout << "kleaf allocator running" << *http_note << std::endl;
  spdlog::info("[allocator] {} received; shutting down",
               WaitForShutdownSignal(ReloadTlsOnHangup(server)));
  if (server) server->Stop();
  probe.Stop();
  node.Stop();
  spdlog::info("[allocator] stopped");
  MutexLock lock(unauthorized_mu);
  if (!unauthorized.empty()) return StartupError("Kafka refused a right: " + unauthorized);
  return 0;
}

int RunGateway(const config::Config& c) {
  auto setup = cluster::PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  auto client = StartAllocatorClient(c, *setup, SystemClock::Instance());
  if (!client) return StartupError(client.error().message);
  kafka::BrokerProbe probe(setup->props, ProbeOptions(*setup), SystemClock::Instance());
  probe.Start();
  cluster::KafkaAllocatorClient* allocators = client->get();
  int code = ServeIds(c, **store, **client, "gateway", /*use_registry=*/true, [&probe, allocators] {
    return cluster::ClientReadiness(*allocators, probe);
  });
  probe.Stop();
  (*client)->Stop();
  return code;
}

int RunStateReplay(const config::Config& c) {
  auto setup = cluster::PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  if (auto bound =
          cluster::BindStoreToStateTopic(**store, setup->topics, setup->layout, c.state.path);
      !bound) {
    return StartupError(bound.error().message);
  }
  auto reader = kafka::PartitionReader::Create(setup->props);
  if (!reader) return StartupError(reader.error().message);
  auto tail_reader = kafka::PartitionReader::Create(cluster::TailReaderProperties(setup->props));
  if (!tail_reader) return StartupError(tail_reader.error().message);
  const auto& topics = setup->topics;
  int64_t total = 0;
  for (int32_t p = 0; p < topics.partitions; ++p) {
    auto r = cluster::RestorePartition(**reader, **tail_reader, **store, topics, p,
                                       milliseconds(120000));
    if (!r)
      return StartupError("replaying partition " + std::to_string(p) + ": " + r.error().message);
    if (r->open_transaction_at) {
      // Replayed as if committed, as the warning says: the store takes the tail's records too.
      if (auto w = (*store)->Write(r->tail, /*sync=*/true); !w) {
        return StartupError("replaying partition " + std::to_string(p) + ": " + w.error().message);
      }
      std::cerr << "warning: state partition " << p << " has a transaction without an outcome "
                << "from offset " << *r->open_transaction_at << ": the records after it were "
                << "replayed as if committed (docs/operations.md, \"A transaction without an "
                << "outcome\")" << std::endl;
    }
    total += r->records;
  }
  std::cout << "replayed " << total << " state records of " << topics.state << " into "
            << c.state.path << std::endl;
  return 0;
}

int RunStateExport(const config::Config& c, const std::string& file, bool standalone) {
  std::string source;
  Result<state::ExportContents> contents;
  if (standalone) {
    source = "standalone:" + c.state.path;
    contents = ExportStandalone(c);
  } else {
    auto setup = cluster::PrepareCluster(c);
    if (!setup) return ClusterSetupError(setup.error());
    source = setup->topics.state;
    contents = cluster::ReadAllState(setup->props, setup->topics);
  }
  if (!contents) return StartupError(contents.error().message);
  std::ofstream f(file, std::ios::trunc);
  f << state::EncodeExportFile(source, FormatUtcMs(SystemClock::Instance().NowMs()), *contents);
  f.close();
  if (!f) return StartupError("cannot write " + file);
  std::cout << "exported " << contents->tags.size() << " tags, " << contents->spaces.size()
            << " spaces and " << contents->sections.size() << " sections to " << file << std::endl;
  return 0;
}

int RunStateImport(const config::Config& c, const StateImportOptions& options) {
  const int64_t bump = options.bump;
  if (bump < 0 || bump > allocator::kMaxSegmentId) {
    return StartupError("--bump must be between 0 and " + std::to_string(allocator::kMaxSegmentId));
  }
  const std::string& file = options.file;
  std::ifstream in(file);
  if (!in) return StartupError("cannot read " + file);
  Result<state::ExportContents> contents;
  if (options.from_leaf) {
    auto leaf = state::DecodeLeafDump(
        in, {allocator::kMaxSegmentId - bump, c.segment.max_step, allocator::kMaxDescriptionBytes});
    if (leaf) {
      contents->tags = std::move(*leaf);
    } else {
      contents = std::unexpected(leaf.error());
    }
  } else {
    contents = state::DecodeExportFile(in);
  }
  if (!contents) return StartupError(file + ": " + contents.error().message + "; nothing imported");
  allocator::StateImportCounts counts;
  if (options.standalone) {
    auto imported = ImportIntoStandalone(c, *contents, bump, std::cerr);
    if (!imported) return StartupError(imported.error().message);
    counts = *imported;
  } else {
    auto setup = cluster::PrepareCluster(c);
    if (!setup) return ClusterSetupError(setup.error());
    auto client = StartAllocatorClient(c, *setup, SystemClock::Instance());
    if (!client) return StartupError(client.error().message);
    counts = allocator::ImportState(**client, *contents, bump, std::cerr);
    (*client)->Stop();
  }
  const auto& t = counts.tags;
  const auto& s = counts.sequences;
  std::cout << "imported " << contents->tags.size() << (options.from_leaf ? " Leaf tags" : " tags")
            << " from " << file << " (bump " << bump << "): " << t.raised << " raised, " << t.kept
            << " already as high, " << t.failed << " failed";
  if (!options.from_leaf) {
    std::cout << "; " << s.spaces << " of " << contents->spaces.size() << " spaces, "
              << s.sections_raised << " sections raised, " << s.sections_kept
              << " already as high, " << s.failed << " failed";
  }
  std::cout << std::endl;
  return counts.failed() == 0 ? 0 : 1;
}

}  // namespace kleaf::app
