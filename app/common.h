// Pieces every kleaf subcommand wires the same way: shutdown signals, start-up errors, the local
// store, the allocator client, the HTTP server's settings.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "cluster/allocator_client.h"
#include "cluster/setup.h"
#include "config/config.h"
#include "http/http_server.h"
#include "snowflake/snowflake_node.h"
#include "state/store.h"

namespace kleaf::app {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread; threads started later inherit the
// mask, so only WaitForShutdownSignal receives them. Call before starting any thread.
void BlockShutdownSignals();
// Waits for SIGINT or SIGTERM; returns its name. A SIGHUP meanwhile calls `on_hangup` (reloads
// the HTTPS certificate) and the wait goes on: SIGHUP never stops a role.
std::string WaitForShutdownSignal(const std::function<void()>& on_hangup = {});
// The on_hangup of a role whose HTTP server may be absent (no http.listen): reloads its TLS
// files, if any.
std::function<void()> ReloadTlsOnHangup(std::optional<http::HttpServer>& server);
// The process's logger (log.level, log.format) with librdkafka's own lines routed into it, the
// process_* metrics and kleaf_build_info{version,librdkafka,rocksdb}.
void SetUpLoggingAndMetrics(const config::Log& log, const std::string& version);
// Says `message` on stderr once (as a log line once logging is set up, else as
// "kleaf: <message>") and returns exit code 1.
int StartupError(const std::string& message);

// Creates state.path if missing and opens the store in it.
[[nodiscard]] Result<std::unique_ptr<state::Store>> OpenStore(const config::Config& c);
// StartupError for a failed cluster::PrepareCluster: exit 2 when the configuration is at fault
// (kInvalidArgument: e.g. kafka.partitions disagrees with the topics), else 1.
int ClusterSetupError(const Error& error);
// The Kafka allocator client of gateways, producers and `state import`: requests on the cluster's
// topics, replies on kafka.reply_partition (or the node's own by default), the configured timeout
// and attempts; with sequence.owner_hop, sequence calls take the owner hop (OwnerHopOptionsOf).
[[nodiscard]] Result<std::unique_ptr<cluster::KafkaAllocatorClient>> StartAllocatorClient(
    const config::Config& c, const cluster::ClusterSetup& setup, Clock& clock);
// The owner hop of a gateway: the request timeout, and over HTTPS (http.tls) a client context
// that verifies owners against http.tls.client_ca_file (their names checked) or, without one,
// against this node's own certificate, offering this node's certificate for mutual TLS. Errors
// name the file's setting.
[[nodiscard]] Result<cluster::OwnerHopOptions> OwnerHopOptionsOf(const config::Config& c);
// The HTTP server settings of the http.* keys, listening on `host`:`port`.
http::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                    uint16_t port);
// HttpOptions for a server with only the operator routes (allocators, producers), its answers
// counted in the per-route request metrics.
http::HttpServerOptions OpsHttpOptions(const config::Config& c, const std::string& host,
                                       uint16_t port);
// "http://HOST:PORT" ("https://" with `tls`), with an IPv6 host in brackets.
std::string HttpUrl(const std::string& host, uint16_t port, bool tls = false);

// The snowflake keys of `c` as the snowflake node takes them; `use_registry`: the worker id is
// leased (gateway, producer) instead of snowflake.worker_id (standalone).
snowflake::LayoutOptions SnowflakeLayoutOptions(const config::Snowflake& s);
snowflake::SnowflakeNode::Options SnowflakeNodeOptions(const config::Config& c, bool use_registry);

}  // namespace kleaf::app
