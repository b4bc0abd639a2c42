// snapkv: software prefetch of the weight rows a matmul is about to read (see tiling.h).
#pragma once

#include <cstddef>

#include "core/prefetch.h"

namespace snapkv::quant {

/// Bytes ahead of the row tile being computed that its weight rows are asked for (rounded up to
/// whole rows). 1, 4 and 16 KiB gave 1.43x / 1.34x / 1.40x on Gemma 3's 178 MB Q8_0 output
/// matrix (2 threads, one run each: within this host's noise); 4 KiB is kept.
inline constexpr size_t kPrefetchAheadBytes = 4096;

/// Whether the quantized matmul kernels ask for their weight rows ahead (into L2): on by default
/// on Intel and AMD CPUs, where decode of Gemma 3 270M / SmolLM2-135M at ~500 tokens measured
/// 1.19x / 1.44x (Intel) and 1.08x / 1.26-1.28x (Zen 4) faster with it (docs/benchmarks.md,
/// "Weight rows prefetched in the matmuls", "Software prefetch on AMD Zen 4").
/// SNAPKV_MATMUL_PREFETCH=1 / 0 forces it on / off. Read once.
inline bool matmul_prefetch() {
  static const bool on = software_prefetch_enabled("SNAPKV_MATMUL_PREFETCH");
  return on;
}

}  // namespace snapkv::quant
