#include "kafka/recovery.h"

#include "base/metrics.h"

namespace kleaf::kafka {

void CountRecovery(const std::string& handle, const std::string& how) {
  metrics::Registry::Default()
      .GetCounter("kleaf_kafka_handle_recoveries_total",
                  "Times a long-lived Kafka client handle recovered by itself from stale metadata "
                  "or a broker that froze or restarted: by a forced metadata refresh or by being "
                  "rebuilt after a bounded time without progress.",
                  {{"handle", handle}, {"how", how}})
      .Inc();
}

}  // namespace kleaf::kafka
