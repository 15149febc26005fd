// Counting the times a long-lived Kafka client handle healed itself.
#pragma once

#include <string>

namespace kleaf::kafka {

// Counts one recovery of a long-lived handle from stale metadata or a broker that froze or
// restarted (kleaf_kafka_handle_recoveries_total{handle, how}): `how` is "metadata_refresh" (a
// metadata request replaced librdkafka's cached "no leader" for a partition), "rebuilt" (the
// handle was replaced after a bounded time without progress) or "bootstrap_restored" (a handle
// left without any broker was given its bootstrap servers again: internal.h,
// RestoreBootstrapIfNoBroker).
void CountRecovery(const std::string& handle, const std::string& how);

}  // namespace kleaf::kafka
