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
                                       c.segment.auto_create, c.segment.fetch_threads});
  int code = ServeIds(c, **store, allocator, "standalone");
  allocator.Stop();
  return code;
}

}  // namespace kleaf::app
