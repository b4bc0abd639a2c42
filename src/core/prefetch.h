// snapkv: software prefetch into L2, shared by the decode attention kernel and the matmuls.
#pragma once

#include <cstddef>
#include <cstdint>

namespace snapkv {

/// Hints the 64-byte line holding p into L2 (x86: prefetcht1; never faults, changes no result).
/// An asm statement, not __builtin_prefetch: GCC 12 at -O3 deleted loops of __builtin_prefetch
/// calls written in one form (a pointer-offset loop inside a member function: the object file had
/// no prefetch instruction at all), while an older loop of the same builtin survived; the asm keeps
/// every request whatever the loop looks like.
inline void prefetch_line_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

/// Hints every line of the n bytes at p into L2 (nothing when n == 0).
inline void prefetch_l2(const void* p, size_t n) {
  if (n == 0) return;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64)
    prefetch_line_l2(reinterpret_cast<const void*>(a));
}

/// Whether software prefetch is on when its switch (SNAPKV_DECODE_PREFETCH,
/// SNAPKV_MATMUL_PREFETCH) is unset: on Intel and AMD CPUs, where both were measured faster end to
/// end (docs/benchmarks.md: the Intel Xeon host, and "Software prefetch on AMD Zen 4"); off
/// elsewhere (not measured). `env`: the switch's name; "1" / "0" force it on / off, any other
/// value means the default.
bool software_prefetch_enabled(const char* env);

}  // namespace snapkv
