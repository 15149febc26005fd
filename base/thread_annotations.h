// Lock contracts the compiler checks: clang's -Wthread-safety reads these attributes (the clang
// builds of CMakeLists.txt turn it on, as an error); under GCC they expand to nothing. Annotate
// with base/mutex.h's kleaf::Mutex, not std::mutex: libstdc++'s mutex carries no annotation.
#pragma once

#if defined(__clang__)
#define KLEAF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KLEAF_THREAD_ANNOTATION(x)
#endif

// On a data member: read and written only with `mu` held (reads with it held shared at least).
#define KLEAF_GUARDED_BY(mu) KLEAF_THREAD_ANNOTATION(guarded_by(mu))
// On a pointer member: the data it points at is guarded by `mu` (the pointer itself is not).
#define KLEAF_PT_GUARDED_BY(mu) KLEAF_THREAD_ANNOTATION(pt_guarded_by(mu))

// On a function: the caller holds these (exclusively / at least shared).
#define KLEAF_REQUIRES(...) KLEAF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define KLEAF_REQUIRES_SHARED(...) KLEAF_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold these (the function takes them).
#define KLEAF_EXCLUDES(...) KLEAF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// On a function: it takes / gives back these (no argument: the object it is called on).
#define KLEAF_ACQUIRE(...) KLEAF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define KLEAF_ACQUIRE_SHARED(...) KLEAF_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define KLEAF_RELEASE(...) KLEAF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define KLEAF_RELEASE_SHARED(...) KLEAF_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// Releases whichever way it was held (a scoped lock over a shared mutex).
#define KLEAF_RELEASE_GENERIC(...) KLEAF_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
// On a function: it takes the capability when it returns `ok` (a try_lock).
#define KLEAF_TRY_ACQUIRE(...) KLEAF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define KLEAF_TRY_ACQUIRE_SHARED(...) \
  KLEAF_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
// On a function: tells the analysis the capability is held here (checked at run time, or known).
#define KLEAF_ASSERT_CAPABILITY(x) KLEAF_THREAD_ANNOTATION(assert_capability(x))
// On a function returning a reference to a capability.
#define KLEAF_RETURN_CAPABILITY(x) KLEAF_THREAD_ANNOTATION(lock_returned(x))

// On a class: its objects are capabilities (a mutex), or scoped holders of one (a lock guard).
#define KLEAF_CAPABILITY(name) KLEAF_THREAD_ANNOTATION(capability(name))
#define KLEAF_SCOPED_CAPABILITY KLEAF_THREAD_ANNOTATION(scoped_lockable)

// On a function the analysis cannot follow; say why next to it.
#define KLEAF_NO_THREAD_SAFETY_ANALYSIS KLEAF_THREAD_ANNOTATION(no_thread_safety_analysis)
