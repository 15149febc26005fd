// The cluster subcommands: `kleaf allocator`, `kleaf gateway`, `kleaf state replay|export|import`.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "http/http.h"
#include "kafka/client.h"
#include "kafka/probe.h"

namespace kleaf::app {

// A metadata probe of the cluster's requests topic, every second, for /readyz.
std::unique_ptr<kafka::BrokerProbe> StartProbe(const config::Config& c, const kafka::Properties& props);
// Ready when the probe succeeded within the last 5 s.
http::ReadyCheck KafkaCheck(const kafka::BrokerProbe& probe);

int RunAllocator(const config::Config& c);
int RunGateway(const config::Config& c);
// Rebuilds the store at state.path from the state topic (stop the allocator using it first).
int RunStateReplay(const config::Config& c);
// Writes every live record of the state topic to `file` as JSON.
int RunStateExport(const config::Config& c, const std::string& file);
// Republishes the records of `file` through the allocators, raising each max_id by `bump`.
int RunStateImport(const config::Config& c, const std::string& file, int64_t bump);

}  // namespace kleaf::app
