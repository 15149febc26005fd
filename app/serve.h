// Serving IDs over HTTP from a store (snowflake mark, admin token) and an allocator: what
// standalone and gateway nodes share.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "config/config.h"
#include "http/http.h"
#include "state/store.h"

namespace kleaf::app {

// Runs until SIGINT/SIGTERM (signals must be blocked already); returns the exit code. Prints
// "kleaf <role> listening on http://HOST:PORT" on stdout once it serves.
// `use_registry`: lease the worker id from the allocators' registry (gateway) instead of taking
// snowflake.worker_id from the config (standalone). `ready_checks`: what /readyz checks besides
// the worker lease (e.g. Kafka and the allocators reachable). `backup`: what POST /api/v1/backup
// runs (gateway::ApiOptions::backup; a standalone's checkpoint), none on a gateway.
int ServeIds(const config::Config& c, state::Store& store, allocator::Allocator& allocator,
             const std::string& role, bool use_registry,
             std::function<std::vector<http::ReadyCheck>()> ready_checks = {},
             std::function<Result<void>(const std::string& dir)> backup = {});

}  // namespace kleaf::app
