// Internal: the blocked (flash-attention-style) prefill kernel of snapkv::attention().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "attention/attention.h"

namespace snapkv::attn {

/// With an F16 cache, rows shorter than this are dotted with double accumulation, like ggml's
/// vec_dot_f16 does for rows shorter than its SIMD step (64 with AVX-512); F16 x F16 products are
/// exact in f32, so the scores then equal ggml's bit for bit.
constexpr int kExactDotBelow = 64;

/// F16 caches: at most this many keys per query row have their scores kept from pass 1 for pass 2
/// (up to 64 rows x 64K keys x 4 bytes = 16 MiB per thread; the row stride is rounded up to a
/// multiple of 1024 keys plus 16, so spans up to 65552 keys fit); longer key ranges are scored twice.
constexpr int64_t kScoreCacheMaxKeys = 65536;

/// Doubles of thread_sums per query row: the row's sum, then the lanes of exp_sum_add (8).
constexpr size_t kSumsPerRow = 9;

/// One prefill task: KV head g and the query tokens [t0, t1), i.e. nrows = (t1 - t0) x G query rows
/// (row r = token t0 + r / G, query head g * G + r % G).
struct PrefillTask {
  int g = 0;
  int64_t t0 = 0, t1 = 0;
  int nrows = 0;
};

/// Task number `task` of a prefill of n_q tokens in blocks of QB tokens, head-major
/// (task = g * ceil(n_q / QB) + block), G query heads per KV head.
inline PrefillTask prefill_task(int64_t task, int64_t n_q, int QB, int G) {
  const int64_t nqb = (n_q + QB - 1) / QB;
  PrefillTask t;
  t.g = static_cast<int>(task / nqb);
  t.t0 = (task % nqb) * QB;
  t.t1 = std::min(n_q, t.t0 + QB);
  t.nrows = static_cast<int>(t.t1 - t.t0) * G;
  return t;
}

/// Query rows (tokens x heads of one KV group) processed together by one task.
size_t prefill_block_rows(const AttentionParams& p);
/// Floats of one thread's block buffers.
size_t prefill_thread_floats(const AttentionParams& p);

/// Attention of n_q > 1 queries (already rounded to F16 precision for an F16 cache). Per-thread
/// scratch: thread_scratch[threads][thread_floats], thread_sums[threads][rows * kSumsPerRow],
/// thread_rows[threads][rows] with rows = prefill_block_rows(p), and for an F16 cache
/// score_cache[threads][rows][score_keys] (unused for F32; score_keys >= 0).
void attention_prefill(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                       const KVLayerCache& cache, float* out, float* thread_scratch, size_t thread_floats,
                       double* thread_sums, const float** thread_rows, float* score_cache, int64_t score_keys,
                       int n_threads);

}  // namespace snapkv::attn
