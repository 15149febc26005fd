// Pieces every kleaf subcommand wires the same way: logging, signals, the local store, Kafka
// client properties.
#pragma once

#include <memory>
#include <string>

#include "allocator/cluster.h"
#include "allocator/kafka_client.h"
#include "base/clock.h"
#include "config/config.h"
#include "http/http_server.h"
#include "kafka/client.h"
#include "state/store.h"

namespace kleaf::app {

void SetUpLogging(const config::Log& log);
// Blocks SIGINT and SIGTERM in the calling thread; threads started later inherit the mask, so
// only WaitForShutdownSignal receives them. Call before starting any thread.
void BlockShutdownSignals();
// Waits for SIGINT or SIGTERM; returns its name.
std::string WaitForShutdownSignal();
// Prints "kleaf: <message>" on stderr, logs it, and returns exit code 1.
int StartupError(const std::string& message);

// The subcommands that start a node or a state tool.
enum class Role { kStandalone, kAllocator, kGateway, kProducer, kStateTool };
// What only the role or the clock can tell about a config: the Kafka bootstrap a cluster role
// needs, a producer without streams, a snowflake layout that is invalid now (epoch in the future,
// timestamp bits used up). Runs before anything is created in state.path; a failure is a config
// error (exit 2) like a bad key.
Result<void> CheckConfigFor(Role role, const config::Config& c, int64_t now_ms);
// Creates state.path if missing and opens the store in it.
Result<std::unique_ptr<state::Store>> OpenStore(const config::Config& c);
// bootstrap.servers and kleaf's client settings; fails if kafka.bootstrap is empty.
Result<kafka::Properties> KafkaProperties(const config::Config& c);
// The cluster's topic names, with kafka.partitions as configured (0: take the topics' count).
allocator::ClusterTopics Topics(const config::Config& c);

// A cluster node's Kafka setup: the client properties, the topics (created when missing), and the
// layout every node must agree on, checked (allocator::ResolveLayout); `topics.partitions` is the
// layout's count, never a configured guess.
struct ClusterSetup {
  kafka::Properties props;
  allocator::ClusterTopics topics;
  allocator::ClusterLayout layout;
};
Result<ClusterSetup> PrepareCluster(const config::Config& c);
// StartupError for a failed PrepareCluster: exit 2 when the configuration is at fault
// (kInvalidArgument: e.g. kafka.partitions disagrees with the topics), else 1.
int ClusterSetupError(const Error& error);
// The Kafka allocator client of gateways, producers and `state import`: requests on the cluster's
// topics, replies on kafka.reply_partition (or the node's own by default), the configured timeout
// and attempts.
Result<std::unique_ptr<allocator::KafkaAllocatorClient>> StartAllocatorClient(
    const config::Config& c, const ClusterSetup& setup, Clock& clock);
// The HTTP server settings of the http.* keys, listening on `host`:`port`.
http::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                    uint16_t port);
// "http://HOST:PORT", with an IPv6 host in brackets.
std::string HttpUrl(const std::string& host, uint16_t port);

}  // namespace kleaf::app
