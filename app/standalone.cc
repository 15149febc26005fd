#include "app/standalone.h"

#include "allocator/local_allocator.h"
#include "app/common.h"
#include "app/serve.h"
#include "base/clock.h"

namespace kleaf::app {

int RunStandalone(const config::Config& c) {
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  allocator::LocalAllocator allocator(**store, SystemClock::Instance(),
                                      {c.segment.max_step, c.segment.default_step,
                                       c.segment.auto_create, c.segment.fetch_threads,
                                       {(int64_t{1} << c.snowflake.worker_bits) - 1,
                                        c.workers.lease_ttl_ms, c.workers.max_clock_skew_ms}});
  int code = ServeIds(c, **store, allocator, "standalone", /*use_registry=*/false);
  allocator.Stop();
  return code;
}

}  // namespace kleaf::app
