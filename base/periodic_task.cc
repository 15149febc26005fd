#include "base/periodic_task.h"

#include <utility>

namespace kleaf {

void PeriodicTask::Start(std::chrono::milliseconds interval, FirstRun first,
                         std::function<void()> task) {
  {
    MutexLock lock(mu_);
    stop_ = false;
    started_ = true;
    again_ = false;
  }
  task_ = std::move(task);
  thread_ = std::thread([this, interval, first] { Loop(interval, first); });
}

void PeriodicTask::Loop(std::chrono::milliseconds interval, FirstRun first) {
  MutexLock lock(mu_);
  auto stopped = [this]() KLEAF_REQUIRES(mu_) { return stop_; };
  if (first == FirstRun::kAfterInterval) wake_.WaitFor(lock, interval, stopped);
  while (!stop_) {
    lock.Unlock();
    task_();
    lock.Lock();
    if (std::exchange(again_, false)) continue;
    wake_.WaitFor(lock, interval, stopped);
  }
}

void PeriodicTask::StopRepeating() {
  MutexLock lock(mu_);
  stop_ = true;
}

void PeriodicTask::RunAgainNow() {
  MutexLock lock(mu_);
  again_ = true;
}

bool PeriodicTask::Stop() {
  {
    MutexLock lock(mu_);
    if (!started_) return false;
    started_ = false;
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  task_ = nullptr;
  return true;
}

}  // namespace kleaf
