// Preloaded before libfaketime into every kleaf process the clock tests start (e2e_env.cc): gives
// glibc's C11 cnd_timedwait the wall clock libfaketime gives everything else.
//
// librdkafka (built with C11 threads) computes each timed wait's deadline from gettimeofday(),
// which libfaketime shifts, and waits in glibc's cnd_timedwait(), which calls glibc's condition
// variable internally, past libfaketime (it intercepts pthread_cond_timedwait only). Under a clock
// set back by more than a wait's timeout the deadline is already past in real time: the wait
// expires at once. librdkafka 2.8 returned early then (kleaf's metadata waits saw "Timed out" at
// once). librdkafka 2.10 and later (commit 5b1efa4ab, "Change cnd_timedwait_abs to take a
// monotonic clock value", tinycthread_extra.c cnd_timedwait_ms) wait again until a monotonic
// deadline whenever a wait times out, without looking at the condition in between: every timed
// wait spins at 100% CPU for its full timeout, and a signal sent while the waiter is between two
// waits is lost. Measured with 2.14.2 under FAKETIME=-15s: a metadata request to a broker that
// answers in 2 ms timed out after its 2 s, rd_kafka_poll(1000) burnt 0.98 s of CPU, and a
// gateway's start failed with "describing the cluster's topics timed out". A clock really set back
// moves gettimeofday() and the condition variable's CLOCK_REALTIME together; this shim does the
// same for the faked clock: it moves the deadline from libfaketime's time to the kernel's.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace {

using CndTimedwait = int (*)(cnd_t*, mtx_t*, const timespec*);

// Resolved once, before the program's threads start.
CndTimedwait real_cnd_timedwait = nullptr;

__attribute__((constructor)) void Resolve() {
  real_cnd_timedwait = reinterpret_cast<CndTimedwait>(dlsym(RTLD_NEXT, "cnd_timedwait"));
}

int64_t Nanos(const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

}  // namespace

extern "C" int cnd_timedwait(cnd_t* cnd, mtx_t* mtx, const timespec* deadline) {
  if (real_cnd_timedwait == nullptr) Resolve();
  timespec faked{}, real{};
  clock_gettime(CLOCK_REALTIME, &faked);              // through libfaketime, preloaded after us
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &real);  // the kernel's, past libfaketime and vDSO
  const int64_t at = Nanos(*deadline) - Nanos(faked) + Nanos(real);
  const timespec moved{static_cast<time_t>(at / 1'000'000'000),
                       static_cast<long>(at % 1'000'000'000)};
  return real_cnd_timedwait(cnd, mtx, &moved);
}
