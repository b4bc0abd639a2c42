// snapkv server: WorkerPool — cpp-httplib's task queue. One thread serves one connection at a
// time (cpp-httplib blocks on its reads and writes), so a fixed pool is exhausted by as many idle
// or slow connections as it has threads: the next client then waits for a read timeout. This
// pool starts small and adds a thread whenever a connection arrives and none is idle, up to a
// cap (--http-threads); beyond the cap connections wait in its queue.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace snapkv::server {

class WorkerPool final : public httplib::TaskQueue {
 public:
  /// Starts `min_threads` threads (at least 1); grows to `max_threads` (at least min_threads).
  WorkerPool(size_t min_threads, size_t max_threads);
  ~WorkerPool() override;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  /// Lets the threads finish the queued connections, then joins them.
  void shutdown() override;

  size_t threads() const;

 private:
  void spawn_locked();
  void work();

  const size_t max_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;  // threads waiting for a job
  bool shutdown_ = false;
};

}  // namespace snapkv::server
