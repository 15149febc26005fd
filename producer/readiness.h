// What a producer node's /readyz checks.
#pragma once

#include <chrono>
#include <vector>

#include "base/clock.h"
#include "base/ready_check.h"
#include "kafka/probe.h"
#include "producer/ids_producer.h"
#include "snowflake/worker_lease.h"

namespace kleaf::producer {

// Ready while Kafka answers ("kafka"), the last top-up round completed within
// max(3 check intervals, 10 s) and the producer is not fenced ("top_up"), and, when a stream is
// in snowflake mode (`lease` not null), the worker lease is valid ("lease").
std::vector<ReadyCheck> Readiness(const IdsProducer& producer, const snowflake::WorkerLease* lease,
                                  const kafka::BrokerProbe& probe, Clock& clock,
                                  std::chrono::milliseconds check_interval);

}  // namespace kleaf::producer
