// snapkv: the threading context of one worker. Every kernel that runs threads takes one
// explicitly: it says how many OpenMP threads the kernel's parallel regions start
// (`num_threads(tc.n_threads())`) and owns the worker's scratch memory. Nothing about threads
// is process-global: two engines, or two workers of one engine, may use different thread
// counts concurrently from different OS threads (each OS thread that enters a parallel region
// gets its own OpenMP team).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace snapkv {

class ThreadContext {
 public:
  /// Scratch slots per team thread (used by the matmul: 0 activations, 1 their token-lane
  /// copy, 2 unpacked weights).
  static constexpr int kSlots = 3;

  /// `n_threads` >= 1 (else snapkv::Error). Allocates nothing until scratch() is asked for.
  explicit ThreadContext(int n_threads);
  ~ThreadContext();
  ThreadContext(const ThreadContext&) = delete;
  ThreadContext& operator=(const ThreadContext&) = delete;

  /// Threads each parallel region of the kernels starts (the caller is one of them).
  int n_threads() const { return n_threads_; }

  /// 64-byte aligned scratch buffer `slot` (0 <= slot < kSlots) of team thread `tid`
  /// (0 <= tid < n_threads(); omp_get_thread_num() inside a region started with this context,
  /// 0 outside one), at least `bytes` long. Reused across calls; grows, never shrinks; its
  /// contents are not kept when it grows. A slot of one tid must only be used by that thread.
  /// Throws snapkv::Error for a bad slot/tid and std::bad_alloc when memory runs out.
  uint8_t* scratch(int slot, int tid, size_t bytes);

  /// Bytes of scratch held now (all slots and threads).
  size_t scratch_bytes() const;

 private:
  struct Buf {
    uint8_t* p = nullptr;
    size_t n = 0;
  };
  int n_threads_;
  std::vector<Buf> bufs_;  // [n_threads][kSlots]
};

/// Number of processors this process may use: its affinity mask (omp_get_num_procs), capped by
/// its cgroup's CPU bandwidth limit rounded up (cgroup_cpu_limit, core/cpu_quota.h: a container's
/// `--cpus`). The default thread count. At least 1.
int available_cores();

}  // namespace snapkv
