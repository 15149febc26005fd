// Serving IDs over HTTP from a store (snowflake mark, admin token) and an allocator: what
// standalone and gateway nodes share.
#pragma once

#include <string>

#include "allocator/allocator.h"
#include "config/config.h"
#include "state/store.h"

namespace kleaf::app {

// Runs until SIGINT/SIGTERM (signals must be blocked already); returns the exit code. Prints
// "kleaf <role> listening on http://HOST:PORT" on stdout once it serves.
int ServeIds(const config::Config& c, state::Store& store, allocator::Allocator& allocator,
             const std::string& role);

}  // namespace kleaf::app
