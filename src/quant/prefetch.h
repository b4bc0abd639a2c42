// snapkv: software prefetch of the weight rows a matmul is about to read (see tiling.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace snapkv::quant {

/// Bytes ahead of the row tile being computed that its weight rows are asked for (rounded up to
/// whole rows). 4 KiB: 1-16 KiB measured alike on Gemma 3's 178 MB Q8_0 output matrix
/// (docs/benchmarks.md, "Weight rows prefetched in the matmuls").
inline constexpr size_t kPrefetchAheadBytes = 4096;

/// Whether the quantized matmul kernels ask for their weight rows ahead (into L2). On by default
/// on Intel CPUs, where decode of Gemma 3 270M / SmolLM2-135M measured 1.28x / 1.63x faster with
/// it (the cores' DRAM loads and compute hardly overlap otherwise); off elsewhere (not measured).
/// SNAPKV_MATMUL_PREFETCH=1 / 0 forces it on / off (any other value: the default). Read once.
bool matmul_prefetch();

/// Hints the lines of bytes [p, p + n) into L2 (x86 prefetcht1, an asm statement so the compiler
/// keeps it; never faults).
inline void prefetch_rows_l2(const uint8_t* p, size_t n) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64) {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(a)));
#else
    __builtin_prefetch(reinterpret_cast<const char*>(a), 0, 2);
#endif
  }
}

}  // namespace snapkv::quant
