// kleaf's mutexes: std::mutex and std::shared_mutex with the lock annotations of
// base/thread_annotations.h, their scoped locks, and a condition variable that waits on them, so
// that clang's -Wthread-safety checks every KLEAF_GUARDED_BY member (libstdc++'s are unannotated).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "base/thread_annotations.h"

namespace kleaf {

// The bodies below are not analysed (KLEAF_NO_THREAD_SAFETY_ANALYSIS): they call the unannotated
// std types and are the annotations' ground truth.

// A std::mutex the analysis knows. Lock it with MutexLock; lock()/unlock() are there for generic
// code (std::scoped_lock of two).
class KLEAF_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() KLEAF_ACQUIRE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void Unlock() KLEAF_RELEASE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }
  bool TryLock() KLEAF_TRY_ACQUIRE(true) KLEAF_NO_THREAD_SAFETY_ANALYSIS { return mu_.try_lock(); }
  void lock() KLEAF_ACQUIRE() { Lock(); }
  void unlock() KLEAF_RELEASE() { Unlock(); }
  bool try_lock() KLEAF_TRY_ACQUIRE(true) { return TryLock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock/Lock give it back and take it again inside the scope. A
// CondVar waits on it.
class KLEAF_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KLEAF_ACQUIRE(mu) KLEAF_NO_THREAD_SAFETY_ANALYSIS : lock_(mu.mu_) {}
  ~MutexLock() KLEAF_RELEASE() KLEAF_NO_THREAD_SAFETY_ANALYSIS {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() KLEAF_RELEASE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { lock_.unlock(); }
  void Lock() KLEAF_ACQUIRE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// std::condition_variable over a MutexLock (no std::condition_variable_any overhead). A predicate
// that reads guarded members says so: `cv.Wait(lock, [this]() KLEAF_REQUIRES(mu_) { ... })`.
class CondVar {
 public:
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

  void Wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  template <typename Predicate>
  void Wait(MutexLock& lock, Predicate ready) {
    cv_.wait(lock.lock_, std::move(ready));
  }
  // Each returns what `ready` returns last (false: timed out before it held).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(MutexLock& lock, const std::chrono::duration<Rep, Period>& timeout,
               Predicate ready) {
    return cv_.wait_for(lock.lock_, timeout, std::move(ready));
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate ready) {
    return cv_.wait_until(lock.lock_, deadline, std::move(ready));
  }
  // Without a predicate: may wake early or spuriously; false when the timeout passed.
  template <typename Rep, typename Period>
  bool WaitFor(MutexLock& lock, const std::chrono::duration<Rep, Period>& timeout) {
    return cv_.wait_for(lock.lock_, timeout) == std::cv_status::no_timeout;
  }
  template <typename Clock, typename Duration>
  bool WaitUntil(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv_.wait_until(lock.lock_, deadline) == std::cv_status::no_timeout;
  }

 private:
  std::condition_variable cv_;
};

// A std::shared_mutex the analysis knows: many readers (ReaderMutexLock) or one writer
// (WriterMutexLock).
class KLEAF_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() KLEAF_ACQUIRE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void Unlock() KLEAF_RELEASE() KLEAF_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }
  void ReaderLock() KLEAF_ACQUIRE_SHARED() KLEAF_NO_THREAD_SAFETY_ANALYSIS { mu_.lock_shared(); }
  void ReaderUnlock() KLEAF_RELEASE_SHARED() KLEAF_NO_THREAD_SAFETY_ANALYSIS {
    mu_.unlock_shared();
  }

 private:
  std::shared_mutex mu_;
};

class KLEAF_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) KLEAF_ACQUIRE_SHARED(mu) : mu_(mu) { mu.ReaderLock(); }
  ~ReaderMutexLock() KLEAF_RELEASE() { mu_.ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

class KLEAF_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) KLEAF_ACQUIRE(mu) : mu_(mu) { mu.Lock(); }
  ~WriterMutexLock() KLEAF_RELEASE() { mu_.Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace kleaf
