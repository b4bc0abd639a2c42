// Internal: the BF16 prefill attention kernel (PrefillAttention::BF16) of snapkv::attention().
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/attention.h"
#include "attention/simd.h"

namespace snapkv::attn {

#if SNAPKV_ATTN_AVX512 && defined(__AVX512BW__) && defined(__AVX512BF16__)
#define SNAPKV_ATTN_BF16 1
inline constexpr bool kHaveBF16Prefill = true;
/// Whether the CPU running this process executes AVX512-BF16 (checked once).
inline bool cpu_has_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}
#else
inline constexpr bool kHaveBF16Prefill = false;
inline bool cpu_has_bf16() { return false; }
#endif

/// Whether the BF16 kernel takes calls of shape p (head_dim a multiple of 32, built with AVX512-BF16).
inline bool bf16_prefill_shape(const AttentionParams& p) { return kHaveBF16Prefill && p.head_dim % 32 == 0; }

/// Floats of one thread's scratch for attention_prefill_bf16.
size_t prefill_bf16_thread_floats(const AttentionParams& p);

/// Attention of n_q > 1 queries (f32, unrounded; layout of snapkv::attention) over any cache type
/// with bfloat16 dot products: blocks of up to 128 query rows (one KV head's G query heads x a run
/// of tokens) x 64 keys, online softmax. Per row: s_j = bf16(scale q) . bf16(k_j) (f32 sums of
/// bf16 pair products), p_j = bf16(e^(s_j - m)) with the running max m (e^ to a relative 7e-6,
/// far below the bf16 step), out = sum_j p_j bf16(v_j) / sum_j p_j. The products run on AMX tiles
/// where amx_usable() (attention/amx.h), else on AVX512-BF16 vectors (vdpbf16ps). Results do not
/// depend on the thread count or on how a prompt is split into chunks. scratch:
/// [n_threads][prefill_bf16_thread_floats(p)]. Precondition: bf16_prefill_shape(p).
void attention_prefill_bf16(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                            const KVLayerCache& cache, float* out, float* scratch, int n_threads);

}  // namespace snapkv::attn
