// snapkv: causal multi-head attention straight over the ragged per-head KV cache.
//
// For query head h (KV head g = h / (n_head / n_head_kv)) at position p:
//   s_j = scale * dot(q_h, k_j)  for the entries j of KV head g with pos_j <= p
//                                (sliding window: also p - pos_j < window)
//   out_h = sum_j softmax(s)_j * v_j                       (Vaswani et al. 2017, eq. 1)
// Prefill (several queries) uses flash-attention-style blocking (Dao et al. 2022): blocks of
// queries x blocks of keys with an online softmax (running max and sum, rescaled), so memory is
// linear in the prompt length. Decode (one query) is the split-K kernel of attention/decode.h
// (flash-decoding) with one row: its scratch does not depend on the cache length.
// With an F16 cache the arithmetic mimics ggml's non-flash CPU path: the query is rounded to F16
// before the K.Q products (exactly summed for head_dim < 64, as ggml's scalar tail does); prefill
// also rounds the normalized probabilities to F16 before the product with V (it then needs the
// final row max and sum first: the scores are kept, then, as ggml's soft_max, the row max, the
// exponentials and their sum in double, then the products with V; over kScoreCacheMaxKeys visible
// keys the scores are computed again for the sum and for the products, with the same bits), decode
// does not (split-K
// never holds the normalized probabilities); accumulation is in f32. A Q8_0 or Q4_0 cache is
// dequantized block by block into f32 and then computed as an F32 cache holding the dequantized values (bit for
// bit: tests/attention/test_quantized_attention.cpp), except decode over Q8_0 keys with AVX512-VNNI,
// which rounds the query to int16 first (attention/decode_q8_keys.h: the F32 cache's result for
// that query, to f32 rounding). Results do not
// depend on the thread count, and prefill results do not depend on how a prompt is split into
// chunks of two or more tokens. A workspace made with PrefillAttention::BF16 runs prefill with
// bfloat16 dot products instead (attention/prefill_bf16.h; head_dim % 32 == 0; any cache type).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "snapkv/prefill_attention.h"

namespace snapkv {

class DecodeWorkspace;

/// Shape and scaling of one attention call.
struct AttentionParams {
  int n_head = 0;     ///< query heads
  int n_head_kv = 0;  ///< KV heads (n_head % n_head_kv == 0)
  int head_dim = 0;
  float scale = 1.0f;  ///< logit = scale * dot(q, k)
  int window = 0;      ///< 0 = full causal; else keys with q_pos - k_pos >= window are masked
};

/// Scratch memory of the attention kernels, allocated once (per Workspace) so decoding allocates
/// nothing. `max_queries` bounds the queries of one call (the prefill chunk). Nothing depends on
/// the cache length except the prefill's kept-scores buffer (F16 caches), which grows on demand up
/// to kScoreCacheMaxKeys keys per query row (plus the stride padding of attention.cpp: < 1040),
/// and with Int8 the int8 copy of the keys and values (2 head_dim + head_dim / 8 + 4 bytes per
/// cached position and KV head).
class AttentionWorkspace {
 public:
  /// `prefill`: the arithmetic of calls with two or more queries (BF16 and Int8 need
  /// prefill_attention_supported(), else throws snapkv::Error; shapes they do not take run Exact:
  /// head_dim % 32 != 0, and for Int8 head_dim > 512).
  AttentionWorkspace(const AttentionParams& shape, int64_t max_queries,
                     PrefillAttention prefill = PrefillAttention::Exact);
  ~AttentionWorkspace();
  int64_t max_queries() const { return max_queries_; }
  PrefillAttention prefill_attention() const { return prefill_; }
  /// Bytes held now (the prefill buffers grow on first use with the thread count).
  size_t bytes() const;

 private:
  friend void attention(const AttentionParams&, const float*, const int32_t*, int64_t, const KVLayerCache&, float*,
                        AttentionWorkspace&, int);
  int64_t max_queries_;
  PrefillAttention prefill_ = PrefillAttention::Exact;
  std::unique_ptr<DecodeWorkspace> decode_;  ///< decode: split-K scratch for one row
  std::vector<float> q16_;                   ///< prefill: queries rounded to F16 [max_queries][n_head][head_dim]
  std::vector<float> thread_;                ///< prefill: per-thread block buffers
  std::vector<double> thread_sums_;          ///< prefill: per-thread softmax sums
  std::vector<const float*> thread_rows_;    ///< prefill: per-thread query row pointers
  std::vector<float> bf16_thread_;           ///< prefill, BF16 and Int8: per-thread buffers
  std::vector<uint8_t> int8_keys_;           ///< prefill, Int8: the keys quantized to int8 (grows with the cache)
  std::vector<float> score_cache_;           ///< prefill, F16 cache: per-thread scores kept between passes
  size_t thread_floats_ = 0;                 ///< prefill: floats of one thread's buffers
};

/// Attention of `n_q` queries over the entries of `cache` (all heads of one layer).
/// q: [n_q][n_head][head_dim] f32 (after RoPE, unscaled); q_pos: [n_q] positions; out:
/// [n_q][n_head][head_dim] f32. A query with no visible key gets a zero output.
/// Runs on `n_threads` OpenMP threads (results do not depend on the count).
/// Throws snapkv::Error if n_q exceeds the workspace, shapes mismatch or n_threads < 1.
void attention(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q, const KVLayerCache& cache,
               float* out, AttentionWorkspace& ws, int n_threads);

}  // namespace snapkv
