#include "app/cluster.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "allocator/cluster.h"
#include "allocator/kafka_client.h"
#include "allocator/kafka_node.h"
#include "allocator/state_export.h"
#include "app/common.h"
#include "app/serve.h"
#include "base/clock.h"
#include "http/http_server.h"
#include "http/ops_routes.h"
#include "kafka/probe.h"
#include "state/export_file.h"
#include "state/records.h"

namespace kleaf::app {
namespace {

using std::chrono::milliseconds;

// The allocator's HTTP server: /metrics, /healthz, /readyz only. Ready while Kafka answers and
// this node is a member of the allocators' group with every assigned partition restored.
http::Handler AllocatorRoutes(allocator::AllocatorNode& node, const kafka::BrokerProbe& probe) {
  return http::OpsRoutes("allocators", [&node, &probe] {
    auto s = node.status();
    std::vector<http::ReadyCheck> checks = {KafkaCheck(probe)};
    checks.push_back({"group", s.member,
                      s.member ? "member of the allocators' consumer group"
                               : "not (or no longer) assigned partitions by the consumer group"});
    std::string serving;
    for (int32_t p : s.serving) serving += (serving.empty() ? "" : ",") + std::to_string(p);
    checks.push_back({"partitions", s.pending == 0,
                      std::to_string(s.pending) +
                          " assigned partition(s) not restored yet; serving {" + serving + "}"});
    return checks;
  });
}

}  // namespace

// Probes the cluster's requests topic every second; ready only after a success in the last 5 s.
constexpr int64_t kProbeFreshMs = 5000;

std::unique_ptr<kafka::BrokerProbe> StartProbe(const config::Config& c, const kafka::Properties& props) {
  auto probe = std::make_unique<kafka::BrokerProbe>(
      props, kafka::BrokerProbe::Options{Topics(c).requests, milliseconds(1000), milliseconds(1000)},
      SystemClock::Instance());
  probe->Start();
  return probe;
}

http::ReadyCheck KafkaCheck(const kafka::BrokerProbe& probe) {
  auto s = probe.status();
  http::ReadyCheck check{"kafka", s.ok && s.since_ok_ms >= 0 && s.since_ok_ms <= kProbeFreshMs, ""};
  check.detail = check.ok ? "metadata request answered " + std::to_string(s.since_ok_ms) + " ms ago"
                          : "Kafka unreachable: " + s.last_error;
  return check;
}

int RunAllocator(const config::Config& c) {
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  if (auto bound = allocator::BindStoreToStateTopic(**store, setup->topics, setup->layout, c.state.path);
      !bound) {
    return StartupError(bound.error().message);
  }
  const kafka::Properties& props = setup->props;
  allocator::AllocatorNodeOptions options;
  options.props = props;
  options.topics = setup->topics;
  options.rules = {c.segment.max_step, c.segment.default_step, c.segment.auto_create,
                   {(int64_t{1} << c.snowflake.worker_bits) - 1, c.workers.lease_ttl_ms,
                    c.workers.max_clock_skew_ms}};
  options.group_id = c.kafka.topic_prefix + ".allocators";
  options.batch_max = c.allocator.batch_max;
  options.txn_timeout = milliseconds(c.kafka.transaction_timeout_ms);
  options.session_timeout = milliseconds(c.kafka.session_timeout_ms);
  allocator::AllocatorNode node(options, **store, SystemClock::Instance());
  if (auto r = node.Start(); !r) return StartupError(r.error().message);
  auto probe = StartProbe(c, props);
  // Operators' endpoints, only where http.listen is given: with the defaults an allocator would
  // take the port a gateway on the same host expects.
  std::string http_note;
  std::optional<http::HttpServer> server;
  if (c.http.listen_set) {
    auto listen = config::ParseHostPort(c.http.listen);
    if (!listen) return StartupError("http.listen: " + listen.error().message);
    server.emplace(HttpOptions(c, listen->first, listen->second), AllocatorRoutes(node, *probe));
    auto port = server->Start();
    if (!port) return StartupError(port.error().message);
    http_note = "; " + HttpUrl(listen->first, *port);
  } else {
    spdlog::info("[allocator] no http.listen in the config: no /metrics, /healthz, /readyz");
  }
  spdlog::info("[allocator] node {} running (group {}, {} partitions){}", c.node.id,
               options.group_id, options.topics.partitions, http_note);
  std::cout << "kleaf allocator running" << http_note << std::endl;
  spdlog::info("[allocator] {} received; shutting down", WaitForShutdownSignal());
  if (server) server->Stop();
  probe->Stop();
  node.Stop();
  spdlog::info("[allocator] stopped");
  return 0;
}

int RunGateway(const config::Config& c) {
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  auto client = StartAllocatorClient(c, *setup, SystemClock::Instance());
  if (!client) return StartupError(client.error().message);
  auto probe = StartProbe(c, setup->props);
  allocator::KafkaAllocatorClient* allocators = client->get();
  int code = ServeIds(c, **store, **client, "gateway", /*use_registry=*/true, [&probe, allocators] {
    std::vector<http::ReadyCheck> checks = {KafkaCheck(*probe)};
    // Segments are loadable while the allocators answer: no request given up since the last reply.
    const int64_t reply = allocators->last_reply_mono_ns();
    const bool answering = reply >= 0 && allocators->last_give_up_mono_ns() < reply;
    checks.push_back({"allocators", answering,
                      answering   ? "the last request was answered"
                      : reply < 0 ? "no allocator has answered yet"
                                  : "a request got no answer after every attempt"});
    return checks;
  });
  probe->Stop();
  (*client)->Stop();
  return code;
}

int RunStateReplay(const config::Config& c) {
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  if (auto bound = allocator::BindStoreToStateTopic(**store, setup->topics, setup->layout, c.state.path);
      !bound) {
    return StartupError(bound.error().message);
  }
  auto reader = kafka::PartitionReader::Create(setup->props);
  if (!reader) return StartupError(reader.error().message);
  const auto& topics = setup->topics;
  int64_t total = 0;
  for (int32_t p = 0; p < topics.partitions; ++p) {
    auto r = allocator::RestorePartition(**reader, **store, topics, p, milliseconds(120000));
    if (!r) return StartupError("replaying partition " + std::to_string(p) + ": " + r.error().message);
    total += r->records;
  }
  std::cout << "replayed " << total << " state records of " << topics.state << " into "
            << c.state.path << std::endl;
  return 0;
}

int RunStateExport(const config::Config& c, const std::string& file) {
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto tags = allocator::ReadAllTags(setup->props, setup->topics);
  if (!tags) return StartupError(tags.error().message);
  std::vector<state::TagRecord> records;
  for (const auto& [tag, r] : *tags) records.push_back(r);
  std::ofstream f(file, std::ios::trunc);
  f << state::EncodeExportFile(setup->topics.state, FormatUtcMs(SystemClock::Instance().NowMs()),
                               records);
  if (!f) return StartupError("cannot write " + file);
  std::cout << "exported " << tags->size() << " tags to " << file << std::endl;
  return 0;
}

int RunStateImport(const config::Config& c, const std::string& file, int64_t bump) {
  if (bump < 0) return StartupError("--bump must not be negative");
  std::ifstream in(file);
  if (!in) return StartupError("cannot read " + file);
  auto records = state::DecodeExportFile(in);
  if (!records) return StartupError(file + ": " + records.error().message);
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  auto client = StartAllocatorClient(c, *setup, SystemClock::Instance());
  if (!client) return StartupError(client.error().message);
  auto counts = allocator::ImportTags(**client, *records, bump, std::cerr);
  (*client)->Stop();
  std::cout << "imported " << records->size() << " tags from " << file << " (bump " << bump
            << "): " << counts.raised << " raised, " << counts.kept << " already higher, "
            << counts.failed << " failed" << std::endl;
  return counts.failed == 0 ? 0 : 1;
}

}  // namespace kleaf::app
