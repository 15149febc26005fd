// The standard process_* metrics of Prometheus client libraries, read from /proc at each scrape:
// CPU seconds, resident and virtual memory, open and maximum file descriptors, start time.
#pragma once

#include "base/metrics.h"

namespace kleaf::metrics {

// Adds the process_* series to `registry` (present from the first scrape) and a collector that
// refreshes them. Call once per registry.
void RegisterProcessMetrics(Registry& registry);

}  // namespace kleaf::metrics
