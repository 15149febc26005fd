// `kleaf producer`: keeps ID batches on the ids topic ahead of event-driven consumers.
#pragma once

#include "config/config.h"

namespace kleaf::app {

// Runs until SIGINT/SIGTERM (signals must be blocked already) or until fenced; returns the exit
// code. Prints "kleaf producer running" on stdout once the first top-up round is done.
int RunProducer(const config::Config& c);

}  // namespace kleaf::app
