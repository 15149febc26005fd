// `kleaf state backup DIR`: asks a running standalone node for a consistent copy of its state
// (POST /api/v1/backup with the admin token; the node takes a RocksDB checkpoint, since only the
// process holding state.path's lock can: docs/operations.md, "Backing up and restoring").
#pragma once

#include <string>

#include "config/config.h"

namespace kleaf::app {

// Exit code: 0 backed up, 1 not (the node's or the connection's message on stderr), 2 a config
// that is not a standalone's (kafka.bootstrap set).
int RunStateBackup(const config::Config& c, const std::string& dir);

}  // namespace kleaf::app
