// Internal: the INT8 prefill attention kernel (PrefillAttention::Int8) of snapkv::attention().
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/attention.h"
#include "attention/simd.h"

namespace snapkv::attn {

#if SNAPKV_ATTN_AVX2
inline constexpr bool kHaveInt8Prefill = true;
#else
inline constexpr bool kHaveInt8Prefill = false;
#endif

/// Largest head_dim the INT8 kernel takes (its per-thread row buffers are sized for it).
inline constexpr int kInt8MaxHeadDim = 512;

/// Whether the INT8 kernel takes calls of shape p (built with AVX2, head_dim a multiple of 32 and
/// at most kInt8MaxHeadDim); other shapes run the exact kernel.
inline bool int8_prefill_shape(const AttentionParams& p) {
  return kHaveInt8Prefill && p.head_dim % 32 == 0 && p.head_dim <= kInt8MaxHeadDim;
}

/// Bytes of the int8 copy of the cache's keys and values that attention_prefill_int8 makes per
/// call: per KV head, ceil(size / 64) blocks of 64 entries x (key: head_dim bytes + head_dim / 32
/// f32 scales; value: head_dim bytes + one f32 scale).
size_t prefill_int8_key_bytes(const AttentionParams& p, const KVLayerCache& cache);

/// Floats of one thread's scratch for attention_prefill_int8.
size_t prefill_int8_thread_floats(const AttentionParams& p);

/// Attention of n_q > 1 queries (f32, layout of snapkv::attention) over any cache type with int8
/// products (after SageAttention, Zhang et al. 2025, arXiv 2410.02367, which quantizes Q K^T to
/// int8; here P V too). Query rows (pre-scaled by p.scale) and key rows are quantized
/// symmetrically to int8 with one f32 scale per 32 dims, value rows with one per row (round to
/// nearest even, the largest magnitude at 127): s_j = sum_g (sum_{d in g} q8_d k8_jd) x
/// scale_k_jg x scale_q_g over the 32-dim groups g, the integer sums exact in int32 (AVX2
/// vpmaddubsw on |q8| and sign(k8, q8), then vpmaddwd; one vpdpbusd with AVX512-VNNI or
/// AVX-VNNI, the same integers: int8_dot.h). Online softmax in f32 with
/// double row sums l (Dao et al. 2022, FlashAttention, Alg. 1); per block of 64 keys the weights
/// w_j = e^(s_j - m) x scale_v_j are quantized to w8 = round(127 w_j / max w) and
/// out = sum_blocks (max w / 127) x sum_j w8_j v8_j / l. Keys and values are quantized once per
/// call into `keys` (prefill_int8_key_bytes(p, cache) bytes, 32-byte aligned) in blocks of 64
/// entries at multiples of 64 of a head, each entry on its own, so a row's result depends only on
/// its query, its position and the cache: not on the chunking or the thread count. scratch:
/// [n_threads][prefill_int8_thread_floats(p)], 32-byte aligned. A query row holding NaN or inf
/// gives a NaN output row; a key or value row holding them gives NaN in the rows that see it.
/// Precondition: int8_prefill_shape(p).
void attention_prefill_int8(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                            const KVLayerCache& cache, float* out, float* scratch, uint8_t* keys, int n_threads);

}  // namespace snapkv::attn
