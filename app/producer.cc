#include "app/producer.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "app/common.h"
#include "base/clock.h"
#include "cluster/allocator_client.h"
#include "cluster/setup.h"
#include "http/http.h"
#include "http/http_server.h"
#include "http/ops_routes.h"
#include "kafka/probe.h"
#include "producer/ids_producer.h"
#include "producer/readiness.h"
#include "snowflake/snowflake_node.h"

namespace kleaf::app {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kSetupTimeout{30000};
constexpr milliseconds kFirstRoundTimeout{60000};
// Test hook: the process kills itself (SIGKILL) in round N after its batches reached the broker
// and before the commit, leaving an open transaction behind, as a crash mid-round would.
constexpr char kCrashHook[] = "KLEAF_PRODUCER_TEST_CRASH_BEFORE_COMMIT";

// Waits up to `timeout` for SIGINT or SIGTERM (blocked in every thread); true if one came.
bool ShutdownSignalWithin(milliseconds timeout) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1'000'000)};
  return ::sigtimedwait(&signals, nullptr, &ts) > 0;
}

IdBatch::Mode ModeOf(config::ProducerStream::Mode mode) {
  switch (mode) {
    case config::ProducerStream::Mode::kSegment:
      return IdBatch::Mode::kSegment;
    case config::ProducerStream::Mode::kSnowflake:
      return IdBatch::Mode::kSnowflake;
    case config::ProducerStream::Mode::kUuid7:
      return IdBatch::Mode::kUuid7;
    case config::ProducerStream::Mode::kUlid:
      return IdBatch::Mode::kUlid;
  }
  return IdBatch::Mode::kSegment;
}

producer::IdsProducerOptions Options(const config::Config& c, const kafka::Properties& props,
                                     int32_t ids_partitions) {
  producer::IdsProducerOptions o;
  o.props = props;
  o.topic = c.producer.TopicFor(c.kafka.topic_prefix);
  o.group = c.producer.GroupFor(c.kafka.topic_prefix);
  o.partitions = ids_partitions;
  o.replication_factor = static_cast<int16_t>(c.kafka.replication_factor);
  o.transactional_id = c.kafka.topic_prefix + ".producer." + c.node.id;
  o.batches_ahead = c.producer.batches_ahead;
  o.check_interval = milliseconds(c.producer.check_interval_ms);
  o.txn_timeout = milliseconds(c.kafka.transaction_timeout_ms);
  o.segment_timeout = milliseconds(c.kafka.request_timeout_ms * (c.kafka.request_attempts + 1));
  for (const auto& s : c.producer.streams) {
    o.streams.push_back({s.tag, ModeOf(s.mode), s.batch_size});
  }
  if (const char* hook = std::getenv(kCrashHook); hook != nullptr && *hook != '\0') {
    const int64_t crash_round = std::atoll(hook);
    o.before_commit = [crash_round](int64_t round) {
      if (round != crash_round) return;
      spdlog::warn("[producer] {}={}: killing this process before the commit", kCrashHook, round);
      spdlog::default_logger()->flush();
      ::raise(SIGKILL);
    };
  }
  return o;
}

// The components of a running producer node, started in declaration order by ServeProducer and
// stopped in reverse on every way out of it: the HTTP server, the probe, the round thread, the
// worker lease, the allocator client.
struct ProducerNode {
  std::unique_ptr<cluster::KafkaAllocatorClient> client;
  std::unique_ptr<snowflake::SnowflakeNode> snowflake;  // with a snowflake, uuid7 or ulid stream
  std::optional<producer::IdsProducer> producer;
  std::optional<kafka::BrokerProbe> probe;
  std::optional<http::HttpServer> server;  // where http.listen is given

  ~ProducerNode() { Stop(); }
  // Idempotent.
  void Stop() {
    if (server) server->Stop();
    if (probe) probe->Stop();
    if (producer) producer->Stop();
    if (snowflake) snowflake->Stop();
    if (client) client->Stop();
  }
};

// A leased worker id, exactly as a gateway holds one, only when a stream needs snowflake draws
// (mode snowflake, uuid7 or ulid: one generator for all three).
[[nodiscard]] Result<void> StartSnowflake(const config::Config& c, state::Store& store,
                                          Clock& clock, ProducerNode& node) {
  for (const auto& s : c.producer.streams) {
    if (s.mode == config::ProducerStream::Mode::kSegment || node.snowflake) continue;
    auto started = snowflake::SnowflakeNode::Start(SnowflakeNodeOptions(c, /*use_registry=*/true),
                                                   store, *node.client, clock);
    if (!started) return std::unexpected(started.error());
    node.snowflake = std::move(*started);
  }
  return {};
}

// Runs top-up rounds until one completes (true), a shutdown signal comes first (false), or the
// producer is fenced or kFirstRoundTimeout passes (an error).
[[nodiscard]] Result<bool> RunFirstRound(const config::Config& c, producer::IdsProducer& producer,
                                         Clock& clock) {
  const int64_t deadline = clock.MonotonicNs() + kFirstRoundTimeout.count() * 1'000'000;
  for (;;) {
    auto round = producer.RunRound();
    if (round) return true;
    if (producer.fatal() || clock.MonotonicNs() > deadline) {
      return Fail(round.error().code, "first top-up round: " + round.error().message);
    }
    spdlog::warn("[producer] first round failed: {}; retrying", round.error().message);
    if (ShutdownSignalWithin(milliseconds(c.producer.check_interval_ms))) {
      spdlog::info("[producer] shutdown signal received before the first round completed");
      return false;
    }
  }
}

// /metrics, /healthz and /readyz, only where http.listen is given (like allocators: with the
// defaults a producer would take the port a gateway on the same host expects). Returns what the
// ready line adds: "; <url>" or nothing.
[[nodiscard]] Result<std::string> StartHttp(const config::Config& c, Clock& clock,
                                            ProducerNode& node) {
  if (!c.http.listen_set) {
    spdlog::info("[producer] no http.listen in the config: no /metrics, /healthz, /readyz");
    return std::string();
  }
  auto listen = config::ParseHostPort(c.http.listen);
  if (!listen) return Fail(listen.error().code, "http.listen: " + listen.error().message);
  const snowflake::WorkerLease* lease = node.snowflake ? node.snowflake->lease() : nullptr;
  node.server.emplace(
      OpsHttpOptions(c, listen->first, listen->second),
      http::OpsRoutes("producers", [&ids = *node.producer, lease, &probe = *node.probe, &clock,
                                    interval = milliseconds(c.producer.check_interval_ms)] {
        return producer::Readiness(ids, lease, probe, clock, interval);
      }));
  auto port = node.server->Start();
  if (!port) return std::unexpected(port.error());
  return "; " + HttpUrl(listen->first, *port, c.http.tls.enabled());
}

// Starts the node's components, serves until SIGINT or SIGTERM, and stops them: the exit code,
// or an error when the node could not start (what had started is stopped by then).
[[nodiscard]] Result<int> ServeProducer(const config::Config& c, const cluster::ClusterSetup& setup,
                                        int32_t ids_partitions, state::Store& store) {
  Clock& clock = SystemClock::Instance();
  ProducerNode node;
  auto client = StartAllocatorClient(c, setup, clock);
  if (!client) return std::unexpected(client.error());
  node.client = std::move(*client);
  if (auto r = StartSnowflake(c, store, clock, node); !r) return std::unexpected(r.error());
  node.producer.emplace(Options(c, setup.props, ids_partitions), *node.client,
                        node.snowflake ? &node.snowflake->generator() : nullptr, clock);
  if (auto r = node.producer->Init(); !r) return std::unexpected(r.error());
  auto first = RunFirstRound(c, *node.producer, clock);
  if (!first) return std::unexpected(first.error());
  if (!*first) return 0;
  spdlog::info("[producer] node {} running (transactional.id {}, worker id {})", c.node.id,
               c.kafka.topic_prefix + ".producer." + c.node.id,
               node.snowflake ? std::to_string(node.snowflake->worker_id()) : std::string("none"));
  kafka::BrokerProbe::Options probe_options;  // the cluster's requests topic, every second
  probe_options.topic = setup.topics.requests;
  node.probe.emplace(setup.props, probe_options, clock);
  node.probe->Start();
  auto http_note = StartHttp(c, clock, node);
  if (!http_note) return std::unexpected(http_note.error());
  std::cout << "kleaf producer running" << *http_note << std::endl;
  // Fenced: another run of this node took over; stop like on SIGTERM, but exit with an error.
  node.producer->Start([] { ::kill(::getpid(), SIGTERM); });
  spdlog::info("[producer] {} received; shutting down",
               WaitForShutdownSignal(ReloadTlsOnHangup(node.server)));
  node.Stop();
  if (node.producer->fatal()) {
    spdlog::error("[producer] stopped: fenced by a newer run of this node");
    return 1;
  }
  spdlog::info("[producer] stopped");
  return 0;
}

}  // namespace

int RunProducer(const config::Config& c) {
  if (c.producer.streams.empty()) {
    return StartupError(
        "producer.streams: no stream configured (a list of {tag, mode, batch_size})");
  }
  auto setup = cluster::PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  // The stream topics get the ids topic's own partition count, read from the broker.
  auto ids_partitions = kafka::PartitionCount(setup->props, setup->topics.ids, kSetupTimeout);
  if (!ids_partitions) return StartupError(ids_partitions.error().message);
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  // ServeProducer has stopped whatever it started by the time an error is reported here.
  auto code = ServeProducer(c, *setup, *ids_partitions, **store);
  if (!code) return StartupError(code.error().message);
  return *code;
}

}  // namespace kleaf::app
