// snapkv: ThreadContext (see core/thread_context.h).
#include "core/thread_context.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/cpu_quota.h"
#include "snapkv/error.h"

namespace snapkv {

ThreadContext::ThreadContext(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1 || n_threads > 4096) throw Error(fmt::format("thread count {} must be in [1, 4096]", n_threads));
  bufs_.resize(static_cast<size_t>(n_threads) * kSlots);
}

ThreadContext::~ThreadContext() {
  for (Buf& b : bufs_) std::free(b.p);
}

uint8_t* ThreadContext::scratch(int slot, int tid, size_t bytes) {
  if (slot < 0 || slot >= kSlots || tid < 0 || tid >= n_threads_)
    throw Error(
        fmt::format("ThreadContext::scratch: slot {} / thread {} out of range ({} threads)", slot, tid, n_threads_));
  Buf& b = bufs_[static_cast<size_t>(tid) * kSlots + static_cast<size_t>(slot)];
  if (b.n < bytes) {
    std::free(b.p);
    b.p = nullptr;
    b.n = 0;
    const size_t rounded = (bytes + 63) / 64 * 64;
    b.p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
    if (b.p == nullptr) throw std::bad_alloc();
    b.n = rounded;
  }
  return b.p;
}

size_t ThreadContext::scratch_bytes() const {
  size_t s = 0;
  for (const Buf& b : bufs_) s += b.n;
  return s;
}

int available_cores() {
  // Read once: the limit is the container's, fixed for the process's life in practice, and the
  // walk reads a few files.
  static const int limit = cgroup_cpu_limit();
  const int procs = omp_get_num_procs();
  return limit > 0 ? std::min(procs, limit) : procs;
}

}  // namespace snapkv
