#include "base/periodic_task.h"

#include <utility>

namespace kleaf {

void PeriodicTask::Start(std::chrono::milliseconds interval, FirstRun first,
                         std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    stop_ = false;
    started_ = true;
    again_ = false;
  }
  task_ = std::move(task);
  thread_ = std::thread([this, interval, first] { Loop(interval, first); });
}

void PeriodicTask::Loop(std::chrono::milliseconds interval, FirstRun first) {
  std::unique_lock lock(mu_);
  if (first == FirstRun::kAfterInterval) wake_.wait_for(lock, interval, [this] { return stop_; });
  while (!stop_) {
    lock.unlock();
    task_();
    lock.lock();
    if (std::exchange(again_, false)) continue;
    wake_.wait_for(lock, interval, [this] { return stop_; });
  }
}

void PeriodicTask::StopRepeating() {
  std::lock_guard lock(mu_);
  stop_ = true;
}

void PeriodicTask::RunAgainNow() {
  std::lock_guard lock(mu_);
  again_ = true;
}

bool PeriodicTask::Stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_) return false;
    started_ = false;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  task_ = nullptr;
  return true;
}

}  // namespace kleaf
