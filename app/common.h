// Pieces every kleaf subcommand wires the same way: logging, signals, the local store, Kafka
// client properties.
#pragma once

#include <memory>
#include <string>

#include "allocator/cluster.h"
#include "config/config.h"
#include "gateway/http_server.h"
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
allocator::ClusterTopics Topics(const config::Config& c);
// The HTTP server settings of the http.* keys, listening on `host`:`port`.
gateway::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                       uint16_t port);
// "http://HOST:PORT", with an IPv6 host in brackets.
std::string HttpUrl(const std::string& host, uint16_t port);

}  // namespace kleaf::app
