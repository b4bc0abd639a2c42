// snapkv server: WorkerPool (see worker_pool.h).
#include "server/worker_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>

namespace snapkv::server {

WorkerPool::WorkerPool(size_t min_threads, size_t max_threads) : max_(std::max({min_threads, max_threads, size_t{1}})) {
  std::lock_guard lk(m_);
  for (size_t i = 0; i < std::max(min_threads, size_t{1}); ++i) spawn_locked();
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::spawn_locked() {
  threads_.emplace_back([this] { work(); });
}

void WorkerPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lk(m_);
    jobs_.push_back(std::move(fn));
    // Every queued connection that no idle thread will take gets a new thread, up to the cap.
    if (!shutdown_ && jobs_.size() > idle_ && threads_.size() < max_) {
      try {
        spawn_locked();
      } catch (const std::system_error& e) {  // out of threads: the connection waits for one
        spdlog::warn("snapkv serve: cannot start an HTTP thread ({} running): {}", threads_.size(), e.what());
      }
    }
  }
  cv_.notify_one();
}

void WorkerPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(m_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t WorkerPool::threads() const {
  std::lock_guard lk(m_);
  return threads_.size();
}

void WorkerPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lk(m_);
      ++idle_;
      cv_.wait(lk, [this] { return shutdown_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // shutting down, nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    // A connection's work (cpp-httplib's request loop) catches what route handlers throw but not
    // what its error and post-routing handlers throw (e.g. bad_alloc): the server goes on, but
    // that connection's socket stays open (cpp-httplib closes it after the loop the exception
    // left), a leak kept over ending the process.
    try {
      fn();
    } catch (const std::exception& e) {
      spdlog::error("a connection ended on an exception: {}", e.what());
    } catch (...) {
      spdlog::error("a connection ended on an exception");
    }
  }
}

}  // namespace snapkv::server
