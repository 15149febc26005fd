// A fixed set of threads that runs blocking work (RocksDB synced writes, waits for a segment) off
// the HTTP I/O threads. Tasks run in submission order per thread; Stop() drains and joins.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace kleaf {

class WorkerPool {
 public:
  WorkerPool(int threads, std::string name);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`. After Stop() the task runs inline on the caller, so nothing is dropped.
  void Post(std::function<void()> task);
  // Runs every queued task, then joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ KLEAF_GUARDED_BY(mu_);
  bool stopping_ KLEAF_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::string name_;
};

}  // namespace kleaf
