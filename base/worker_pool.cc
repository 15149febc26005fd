#include "base/worker_pool.h"

#include <pthread.h>

namespace kleaf {

WorkerPool::WorkerPool(int threads, std::string name) : name_(std::move(name)) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Run(); });
    pthread_setname_np(threads_.back().native_handle(), name_.substr(0, 15).c_str());
  }
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Post(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(task));
      cv_.NotifyOne();
      return;
    }
  }
  task();
}

void WorkerPool::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      cv_.Wait(lock, [this]() KLEAF_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace kleaf
