// One background duty run at a fixed interval on its own thread (a broker probe, a lease renewal,
// a top-up round), so that no component hand-writes its thread, mutex, wake-up and stop flag.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "base/mutex.h"

namespace kleaf {

// Owned by the component whose duty it runs; one thread between Start and Stop. The task runs
// (at once, or after one interval), then again `interval` after each run returned (at once when
// the run asked for it), until Stop or until the task calls StopRepeating. Runs never overlap.
//
// Guarantees: Stop wakes a waiting thread at once and joins it; a run in progress finishes
// first, and no run starts after Stop returned.
class PeriodicTask {
 public:
  enum class FirstRun { kAtOnce, kAfterInterval };

  PeriodicTask() = default;
  ~PeriodicTask() { Stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Starts the thread. Call once, or again after Stop.
  void Start(std::chrono::milliseconds interval, FirstRun first, std::function<void()> task);
  // From the task only: the run in progress is the last one; the thread ends when it returns.
  void StopRepeating();
  // From the task only: the next run starts as soon as this one returns, not an interval later
  // (a duty that found more work than one run does per interval). Stop still ends it.
  void RunAgainNow();
  // Wakes and joins the thread. Never from the task. Returns true when this call ended a started
  // task, false when none was started or it was stopped already (so that an owner's own
  // shutdown steps run once).
  bool Stop();

 private:
  void Loop(std::chrono::milliseconds interval, FirstRun first);

  std::function<void()> task_;  // the thread's only, between Start and Stop
  Mutex mu_;
  CondVar wake_;
  bool stop_ KLEAF_GUARDED_BY(mu_) = false;     // no further run
  bool started_ KLEAF_GUARDED_BY(mu_) = false;  // Start called, Stop not yet
  bool again_ KLEAF_GUARDED_BY(mu_) = false;    // the next run starts without waiting
  std::thread thread_;
};

}  // namespace kleaf
