#include "app/common.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "base/logging.h"
#include "base/metrics.h"
#include "base/process_metrics.h"
#include "http/client_tls.h"
#include "http/ops_routes.h"
#include "http/request_metrics.h"
#include "kafka/log.h"
#include "kafka/topics.h"

namespace kleaf::app {
namespace {

sigset_t ShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

}  // namespace

void SetUpLoggingAndMetrics(const config::Log& log, const std::string& version) {
  SetUpLogging(log.level, log.format);
  // librdkafka's own lines (connection failures, broker errors) in the same format, component
  // "kafka": "[kafka] kleaf-gateway-1#producer-1 FAIL: ... Connect to ... failed".
  kafka::SetLogSink([](kafka::LogLevel level, std::string_view client, std::string_view facility,
                       std::string_view message) {
    static constexpr spdlog::level::level_enum kLevels[] = {
        spdlog::level::debug, spdlog::level::info, spdlog::level::warn, spdlog::level::err};
    spdlog::log(kLevels[static_cast<int>(level)], "[kafka] {} {}: {}", client, facility, message);
  });
  auto& registry = metrics::Registry::Default();
  metrics::RegisterProcessMetrics(registry);
  registry
      .GetGauge("kleaf_build_info",
                "Always 1; the labels say which kleaf, librdkafka and RocksDB this process runs.",
                {{"version", version},
                 {"librdkafka", kafka::LibraryVersion()},
                 {"rocksdb", state::RocksDbVersion()}})
      .Set(1);
}

void BlockShutdownSignals() {
  sigset_t signals = ShutdownSignals();
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

std::string WaitForShutdownSignal(const std::function<void()>& on_hangup) {
  sigset_t signals = ShutdownSignals();
  sigaddset(&signals, SIGHUP);
  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal != SIGHUP) return signal == SIGTERM ? "SIGTERM" : "SIGINT";
    spdlog::info("SIGHUP received; reloading the HTTPS certificate (if any)");
    if (on_hangup) on_hangup();
  }
}

std::function<void()> ReloadTlsOnHangup(std::optional<http::HttpServer>& server) {
  return [&server] {
    if (server) (void)server->ReloadTls();  // a failure is logged and counted by the server
  };
}

int StartupError(const std::string& message) {
  // Once: through the log when it is set up (stderr, text or JSON lines), else plainly.
  if (LoggingIsSetUp()) {
    spdlog::error("{}", message);
  } else {
    std::cerr << "kleaf: " << message << std::endl;
  }
  return 1;
}

Result<std::unique_ptr<state::Store>> OpenStore(const config::Config& c) {
  std::error_code ec;
  std::filesystem::create_directories(c.state.path, ec);
  if (ec)
    return Fail(Code::kFailedPrecondition,
                "state.path: cannot create '" + c.state.path + "': " + ec.message());
  return state::Store::Open(c.state.path);
}

int ClusterSetupError(const Error& error) {
  const int code = StartupError(error.message);
  return error.code == Code::kInvalidArgument ? 2 : code;
}

Result<std::unique_ptr<cluster::KafkaAllocatorClient>> StartAllocatorClient(
    const config::Config& c, const cluster::ClusterSetup& setup, Clock& clock) {
  int32_t reply_partition = c.kafka.reply_partition >= 0
                                ? c.kafka.reply_partition
                                : kafka::PartitionFor(c.node.id, c.kafka.reply_partitions);
  cluster::KafkaClientOptions options{setup.props,
                                      setup.topics,
                                      c.node.id,
                                      reply_partition,
                                      std::chrono::milliseconds(c.kafka.request_timeout_ms),
                                      c.kafka.request_attempts,
                                      setup.layout.datacenter,
                                      std::nullopt};
  if (c.sequence.owner_hop) {
    auto hop = OwnerHopOptionsOf(c);
    if (!hop) return std::unexpected(hop.error());
    options.hop = std::move(*hop);
  }
  return cluster::KafkaAllocatorClient::Start(std::move(options), clock);
}

Result<cluster::OwnerHopOptions> OwnerHopOptionsOf(const config::Config& c) {
  cluster::OwnerHopOptions hop;
  hop.timeout = std::chrono::milliseconds(c.kafka.request_timeout_ms);
  // Test hook: the owners' clock-rate estimates over this many ms instead of 60 s.
  if (const char* hook = std::getenv("KLEAF_GATEWAY_TEST_RATE_WINDOW_MS");
      hook != nullptr && std::atoll(hook) > 0) {
    hop.rate_window = std::chrono::milliseconds(std::atoll(hook));
    spdlog::warn("[gateway] test hook: owners' clock rates estimated over {} ms",
                 hop.rate_window.count());
  }
  if (!c.http.tls.enabled()) return hop;
  // Over HTTPS the owners are verified against the deployment's CA where mutual TLS names one
  // (http.tls.client_ca_file, with the owner's name checked against its route), else against this
  // node's own certificate (nodes sharing one); this node's certificate is offered for mutual TLS.
  http::ClientTlsOptions tls;
  if (!c.http.tls.client_ca_file.empty()) {
    tls.ca = {"http.tls.client_ca_file", c.http.tls.client_ca_file};
  } else {
    tls.ca = {"http.tls.cert_file", c.http.tls.cert_file};
    tls.partial_chain = true;
    hop.check_name = false;
  }
  tls.cert = {"http.tls.cert_file", c.http.tls.cert_file};
  tls.key = {"http.tls.key_file", c.http.tls.key_file};
  auto context = http::MakeClientTlsContext(tls);
  if (!context) return std::unexpected(context.error());
  hop.tls = std::move(*context);
  return hop;
}

http::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                    uint16_t port) {
  http::HttpServerOptions o;
  o.host = host;
  o.port = port;
  o.threads = c.http.threads;
  o.header_limit_bytes = static_cast<uint32_t>(c.http.header_limit_bytes);
  o.body_limit_bytes = static_cast<uint64_t>(c.http.body_limit_bytes);
  o.idle_timeout = std::chrono::milliseconds(c.http.idle_timeout_ms);
  o.max_connections = c.http.max_connections;
  o.tls = {c.http.tls.cert_file, c.http.tls.key_file, c.http.tls.client_ca_file};
  // Plain HTTP beyond this host: the admin token and the IDs cross the network in the clear.
  // A warning, not a refusal: a TLS-terminating proxy or mesh sidecar may sit in front.
  const bool loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
  if (o.tls.cert_file.empty() && !loopback) {
    spdlog::warn(
        "[http] plain HTTP on {}: not a loopback address, so requests, the admin token and the "
        "IDs cross the network unencrypted; set http.tls (docs/operations.md, \"HTTPS\") unless "
        "a TLS proxy or mesh sidecar in front does it",
        HttpUrl(host, port, false));
  }
  return o;
}

http::HttpServerOptions OpsHttpOptions(const config::Config& c, const std::string& host,
                                       uint16_t port) {
  // One per process, alive as long as any server that records into it.
  static http::RequestMetrics metrics(metrics::Registry::Default(), http::OpsRouteOf,
                                      http::kOpsRoutes);
  http::HttpServerOptions o = HttpOptions(c, host, port);
  o.on_answer = metrics.Hook();
  return o;
}

std::string HttpUrl(const std::string& host, uint16_t port, bool tls) {
  return (tls ? "https://" : "http://") +
         (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

snowflake::LayoutOptions SnowflakeLayoutOptions(const config::Snowflake& s) {
  return {s.timestamp_bits, s.worker_bits, s.sequence_bits, s.epoch_ms, s.time_unit_ms};
}

snowflake::SnowflakeNode::Options SnowflakeNodeOptions(const config::Config& c, bool use_registry) {
  const config::Snowflake& s = c.snowflake;
  snowflake::SnowflakeNode::Options o{
      .layout = SnowflakeLayoutOptions(s),
      .generator = {s.worker_id, s.random_sequence_start, s.max_backward_ms},
      .guard = {s.persist_interval_ms, s.reserve_ms, s.max_startup_wait_ms},
      .lease = std::nullopt,
      .datacenter = {c.datacenter.index, c.datacenter.count}};
  if (use_registry) {
    o.lease = snowflake::WorkerLease::Options{.node_id = c.node.id,
                                              .lease_ttl_ms = c.workers.lease_ttl_ms,
                                              .renew_interval_ms = c.workers.renew_interval_ms,
                                              .safety_margin_ms = c.workers.safety_margin_ms,
                                              .claim_timeout_ms = c.workers.claim_timeout_ms};
  }
  return o;
}

}  // namespace kleaf::app
