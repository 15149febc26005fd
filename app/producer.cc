#include "app/producer.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "allocator/cluster.h"
#include "allocator/kafka_client.h"
#include "app/cluster.h"
#include "app/common.h"
#include "base/clock.h"
#include "http/http.h"
#include "http/http_server.h"
#include "http/ops_routes.h"
#include "producer/ids_producer.h"
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

producer::IdsProducerOptions Options(const config::Config& c, const kafka::Properties& props,
                                     int32_t ids_partitions) {
  producer::IdsProducerOptions o;
  o.props = props;
  o.topic = c.producer.TopicFor(c.kafka.topic_prefix);
  o.group = c.producer.GroupFor(c.kafka.topic_prefix);
  o.partitions = ids_partitions;
  o.transactional_id = c.kafka.topic_prefix + ".producer." + c.node.id;
  o.batches_ahead = c.producer.batches_ahead;
  o.check_interval = milliseconds(c.producer.check_interval_ms);
  o.txn_timeout = milliseconds(c.kafka.transaction_timeout_ms);
  o.segment_timeout = milliseconds(c.kafka.request_timeout_ms * (c.kafka.request_attempts + 1));
  for (const auto& s : c.producer.streams) {
    o.streams.push_back({s.tag,
                         s.mode == config::ProducerStream::Mode::kSegment
                             ? IdBatch::Mode::kSegment
                             : IdBatch::Mode::kSnowflake,
                         s.batch_size});
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

// The producer's HTTP server: /metrics, /healthz, /readyz only. Ready while Kafka answers, the
// last top-up round completed recently and, with snowflake streams, the worker lease is valid.
http::Handler ProducerRoutes(const config::Config& c, const producer::IdsProducer& producer,
                             snowflake::SnowflakeNode* snowflake, const kafka::BrokerProbe& probe,
                             Clock& clock) {
  const int64_t fresh_ns = std::max<int64_t>(3 * c.producer.check_interval_ms, 10000) * 1'000'000;
  return http::OpsRoutes("producers", [&producer, snowflake, &probe, &clock, fresh_ns] {
    std::vector<http::ReadyCheck> checks = {KafkaCheck(probe)};
    const int64_t last = producer.last_round_ok_ns();
    const int64_t age_ms = last < 0 ? -1 : (clock.MonotonicNs() - last) / 1'000'000;
    checks.push_back({"top_up", !producer.fatal() && last >= 0 && age_ms * 1'000'000 <= fresh_ns,
                      producer.fatal() ? "fenced by a newer run of this node"
                      : last < 0       ? "no top-up round completed yet"
                                       : "last top-up round completed " + std::to_string(age_ms) +
                                             " ms ago"});
    if (snowflake != nullptr && snowflake->lease() != nullptr) {
      auto s = snowflake->lease()->status();
      checks.push_back({"lease", s.valid_for_ms > 0,
                        "worker id " + std::to_string(s.worker_id) + " valid for " +
                            std::to_string(s.valid_for_ms) + " ms"});
    }
    return checks;
  });
}

}  // namespace

int RunProducer(const config::Config& c) {
  if (c.producer.streams.empty()) {
    return StartupError(
        "producer.streams: no stream configured (a list of {tag, mode, batch_size})");
  }
  auto setup = PrepareCluster(c);
  if (!setup) return ClusterSetupError(setup.error());
  const kafka::Properties& props = setup->props;
  const allocator::ClusterTopics& topics = setup->topics;
  // Batches are routed by the ids topic's own count, read from the broker like every other.
  auto ids_partitions = kafka::PartitionCount(props, topics.ids, kSetupTimeout);
  if (!ids_partitions) return StartupError(ids_partitions.error().message);
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  Clock& clock = SystemClock::Instance();
  auto client = StartAllocatorClient(c, *setup, clock);
  if (!client) return StartupError(client.error().message);

  // A leased worker id, exactly as a gateway holds one, only when a stream needs snowflake IDs.
  std::unique_ptr<snowflake::SnowflakeNode> snowflake;
  for (const auto& s : c.producer.streams) {
    if (s.mode != config::ProducerStream::Mode::kSnowflake || snowflake) continue;
    auto node = snowflake::SnowflakeNode::Start(c, **store, **client, /*use_registry=*/true, clock);
    if (!node) {
      (*client)->Stop();
      return StartupError(node.error().message);
    }
    snowflake = std::move(*node);
  }

  producer::IdsProducer producer(Options(c, props, *ids_partitions), **client,
                                 snowflake ? &snowflake->generator() : nullptr, clock);
  auto stop_all = [&] {
    producer.Stop();
    if (snowflake) snowflake->Stop();
    (*client)->Stop();
  };
  if (auto r = producer.Init(); !r) {
    stop_all();
    return StartupError(r.error().message);
  }
  const int64_t deadline = clock.MonotonicNs() + kFirstRoundTimeout.count() * 1'000'000;
  for (;;) {
    auto round = producer.RunRound();
    if (round) break;
    if (producer.fatal() || clock.MonotonicNs() > deadline) {
      stop_all();
      return StartupError("first top-up round: " + round.error().message);
    }
    spdlog::warn("[producer] first round failed: {}; retrying", round.error().message);
    if (ShutdownSignalWithin(milliseconds(c.producer.check_interval_ms))) {
      spdlog::info("[producer] shutdown signal received before the first round completed");
      stop_all();
      return 0;
    }
  }
  spdlog::info("[producer] node {} running (transactional.id {}, worker id {})", c.node.id,
               c.kafka.topic_prefix + ".producer." + c.node.id,
               snowflake ? std::to_string(snowflake->worker_id()) : std::string("none"));
  // /metrics, /healthz and /readyz, only where http.listen is given (like allocators: with the
  // defaults a producer would take the port a gateway on the same host expects).
  auto probe = StartProbe(c, props);
  std::string http_note;
  std::optional<http::HttpServer> server;
  if (c.http.listen_set) {
    auto listen = config::ParseHostPort(c.http.listen);
    if (!listen) {
      probe->Stop();
      stop_all();
      return StartupError("http.listen: " + listen.error().message);
    }
    server.emplace(HttpOptions(c, listen->first, listen->second),
                   ProducerRoutes(c, producer, snowflake.get(), *probe, clock));
    auto port = server->Start();
    if (!port) {
      probe->Stop();
      stop_all();
      return StartupError(port.error().message);
    }
    http_note = "; " + HttpUrl(listen->first, *port);
  } else {
    spdlog::info("[producer] no http.listen in the config: no /metrics, /healthz, /readyz");
  }
  std::cout << "kleaf producer running" << http_note << std::endl;
  // Fenced: another run of this node took over; stop like on SIGTERM, but exit with an error.
  producer.Start([] { ::kill(::getpid(), SIGTERM); });
  spdlog::info("[producer] {} received; shutting down", WaitForShutdownSignal());
  if (server) server->Stop();
  probe->Stop();
  stop_all();
  if (producer.fatal()) {
    spdlog::error("[producer] stopped: fenced by a newer run of this node");
    return 1;
  }
  spdlog::info("[producer] stopped");
  return 0;
}

}  // namespace kleaf::app
