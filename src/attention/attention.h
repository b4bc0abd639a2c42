// snapkv: causal multi-head attention straight over the ragged per-head KV cache.
//
// For query head h (KV head g = h / (n_head / n_head_kv)) at position p:
//   s_j = scale * dot(q_h, k_j)  for the entries j of KV head g with pos_j <= p
//                                (sliding window: also p - pos_j < window)
//   out_h = sum_j softmax(s)_j * v_j                       (Vaswani et al. 2017, eq. 1)
// Prefill (several queries) uses flash-attention-style blocking (Dao et al. 2022): blocks of
// queries x blocks of keys with an online softmax (running max and sum, rescaled), so memory is
// linear in the prompt length. Decode (one query) computes the full score row, an exact softmax
// and the weighted sum of V, parallel over heads and key blocks.
// With an F16 cache the arithmetic mimics ggml's non-flash CPU path: the query is rounded to F16
// before the K.Q products (exactly summed for head_dim < 64, as ggml's scalar tail does), and the
// normalized probabilities are rounded to F16 before the product with V (prefill then needs the
// final row max and sum first: a second pass over the keys, reusing the kept scores); accumulation
// is in f32. Results do not depend on the thread count, and prefill results do not depend on how
// a prompt is split into chunks of two or more tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace snapkv {

/// Shape and scaling of one attention call.
struct AttentionParams {
  int n_head = 0;     ///< query heads
  int n_head_kv = 0;  ///< KV heads (n_head % n_head_kv == 0)
  int head_dim = 0;
  float scale = 1.0f;  ///< logit = scale * dot(q, k)
  int window = 0;      ///< 0 = full causal; else keys with q_pos - k_pos >= window are masked
};

/// Scratch memory of the attention kernels, allocated once (per Session) so decoding allocates
/// nothing. `max_keys` sizes the decode kernel's score rows (a decode query over a longer head
/// takes the blocked kernel instead, whose buffers grow on first use); `max_queries` bounds the
/// queries of one call (the prefill chunk).
class AttentionWorkspace {
 public:
  AttentionWorkspace(const AttentionParams& shape, int64_t max_keys, int64_t max_queries);
  int64_t max_keys() const { return max_keys_; }
  int64_t max_queries() const { return max_queries_; }
  /// Bytes held now (the prefill buffers grow on first use with the thread count).
  size_t bytes() const;

 private:
  friend void attention(const AttentionParams&, const float*, const int32_t*, int64_t, const KVLayerCache&, float*,
                        AttentionWorkspace&, int);
  int64_t max_keys_;
  int64_t max_queries_;
  std::vector<float> scores_;              ///< decode: [n_head][max_keys] scores, then exponentials
  std::vector<float> partial_;             ///< decode: [n_head][n_key_blocks][head_dim] partial outputs
  std::vector<float> blk_max_;             ///< decode: [n_head][n_key_blocks]
  std::vector<double> blk_sum_;            ///< decode: [n_head][n_key_blocks]
  std::vector<int64_t> task_off_;          ///< decode: [n_head_kv + 1] first block task of each KV head
  std::vector<int64_t> j_begin_, j_end_;   ///< decode: [n_head_kv] visible entry range
  std::vector<float> q16_;                 ///< queries rounded to F16 precision [max_queries][n_head][head_dim]
  std::vector<float> thread_;              ///< prefill: per-thread block buffers
  std::vector<double> thread_sums_;        ///< prefill: per-thread softmax sums
  std::vector<const float*> thread_rows_;  ///< prefill: per-thread query row pointers
  std::vector<float> score_cache_;         ///< prefill, F16 cache: per-thread scores kept between passes
  size_t thread_floats_ = 0;               ///< prefill: floats of one thread's buffers
};

/// Attention of `n_q` queries over the entries of `cache` (all heads of one layer).
/// q: [n_q][n_head][head_dim] f32 (after RoPE, unscaled); q_pos: [n_q] positions; out:
/// [n_q][n_head][head_dim] f32. A query with no visible key gets a zero output.
/// Runs on `n_threads` OpenMP threads (results do not depend on the count).
/// Throws snapkv::Error if n_q exceeds the workspace's max_queries, shapes mismatch or
/// n_threads < 1.
void attention(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q, const KVLayerCache& cache,
               float* out, AttentionWorkspace& ws, int n_threads);

}  // namespace snapkv
