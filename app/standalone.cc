#include "app/standalone.h"

#include "allocator/local_allocator.h"
#include "app/common.h"
#include "app/serve.h"
#include "base/clock.h"

namespace kleaf::app {
namespace {

allocator::LocalAllocatorOptions LocalOptions(const config::Config& c) {
  return {c.segment.max_step,
          c.segment.default_step,
          c.segment.auto_create,
          c.segment.fetch_threads,
          {(int64_t{1} << c.snowflake.worker_bits) - 1, c.workers.lease_ttl_ms,
           c.workers.max_clock_skew_ms},
          state::ParseIdMode(c.segment.default_id_mode).value_or(state::IdMode::kPlain)};
}

}  // namespace

int RunStandalone(const config::Config& c) {
  auto store = OpenStore(c);
  if (!store) return StartupError(store.error().message);
  allocator::LocalAllocator allocator(**store, SystemClock::Instance(), LocalOptions(c));
  int code = ServeIds(c, **store, allocator, "standalone", /*use_registry=*/false);
  allocator.Stop();
  return code;
}

Result<allocator::ImportCounts> ImportIntoStandalone(const config::Config& c,
                                                     const std::vector<state::TagRecord>& records,
                                                     int64_t bump, std::ostream& errors) {
  auto store = OpenStore(c);
  if (!store) {
    return Fail(store.error().code,
                "state import --standalone: " + store.error().message +
                    " (a running standalone: stop it, import, then start it again)");
  }
  allocator::LocalAllocator allocator(**store, SystemClock::Instance(), LocalOptions(c));
  auto counts = allocator::ImportTags(allocator, records, bump, errors);
  allocator.Stop();
  return counts;
}

}  // namespace kleaf::app
