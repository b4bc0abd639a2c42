// snapkv presses: scoring and selection helpers shared by the policies in this folder.
//
// The SnapKV pipeline (Li et al., "SnapKV: LLM Knows What You are Looking for Before
// Generation", NeurIPS 2024, arXiv 2404.14469, Sec. 4 / Listing 1) is split into its steps so
// that the baselines can reuse them:
//   window_attention_scores  steps 1-3 (window-query softmax, summed over the window)
//   gqa_reduce               step 4    (query heads -> KV head)
//   pool1d                   step 5    (1D pooling along positions)
//   top_k_positions          step 6    (top C-W prefix positions; the window is added by the
//                                       shared base, press_base.h)
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kv/presses/press.h"

namespace snapkv::press_detail {

/// Per-head score vectors: [heads][positions].
using HeadScores = std::vector<std::vector<float>>;

/// Causal softmax attention of `n_rows` query rows over keys, summed over the rows:
///   out[j] += sum_r softmax_r(j), j < n_out,
/// where row r (q[r * head_dim .. +head_dim], f32) is the query at position first_pos + r and
/// attends to keys 0..first_pos+r with logits scale * dot(q_r, k_j); softmax in f32 with the
/// row max subtracted. Works on row blocks x key chunks (never a full L x L matrix; at most
/// max_tile_floats probabilities at a time, default (0) 16 Mi floats = 64 MiB, at least one
/// row), keys converted to f32 chunk by chunk, OpenMP over key chunks with n_threads threads
/// (>= 1). Results do not depend on the thread count.
/// Requires first_pos >= 0, n_rows >= 1, first_pos + n_rows <= keys.n and
/// 0 <= n_out <= first_pos + n_rows (unchecked: callers validate with check_input()).
void attention_column_sums(const float* q, int64_t n_rows, int64_t first_pos, const RowsView& keys, float scale,
                           float* out, int64_t n_out, int64_t max_tile_floats = 0, int n_threads = 1);

/// attention_column_sums for n_heads query heads that share `keys` (the query heads of one KV
/// head): q[h] and out[h] as q and out above. Keys are converted once for all of them.
void attention_column_sums_heads(const float* const* q, int n_heads, int64_t n_rows, int64_t first_pos,
                                 const RowsView& keys, float scale, float* const* out, int64_t n_out,
                                 int64_t max_tile_floats = 0, int n_threads = 1);

/// SnapKV steps 1-3 for every query head: window rows first_row..W-1 of in.window_q (row i is
/// the query at position L-W+i and sees keys 0..L-W+i), softmax over keys, probabilities summed
/// over those rows for the prefix positions 0..L-W-1. Returns [n_head][L-W].
/// first_row = 0 is SnapKV; first_row = W-1 uses the last prompt query only (TOVA). Uses
/// in.n_threads threads.
HeadScores window_attention_scores(const PressInput& in, int first_row = 0);

/// SnapKV step 4 (GQA/MQA): reduces per-query-head scores [n_head][n] to [n_head_kv][n] with
/// mean / max / sum over the n_head/n_head_kv query heads of each KV head (query head q uses
/// KV head q / (n_head / n_head_kv)).
HeadScores gqa_reduce(const HeadScores& per_qhead, int n_head_kv, GQAAgg agg);

/// SnapKV step 5: 1D pooling along positions, stride 1, odd kernel K, padding K/2, output of
/// the same length n. Max: padding ignored (max over the clipped window). Avg: sum over the
/// clipped window divided by K (PyTorch avg_pool1d default count_include_pad=True).
/// O(n) for any K. Throws snapkv::Error for an even or non-positive kernel.
std::vector<float> pool1d(const std::vector<float>& x, int kernel, PoolType type);

/// Indices of the k highest scores of scores[0..n), ascending. Order: higher score first, equal
/// scores -> earlier position first (deterministic); NaN ranks as -inf. 0 <= k <= n.
std::vector<int32_t> top_k_positions(const float* scores, int64_t n, int64_t k);

/// A result that keeps every position of every KV head (scores +inf).
PressResult keep_all(int n_head_kv, int64_t n_tokens);

/// Validates the layer input of press `press` for capacity C. Checks the head counts (n_head_kv
/// divides n_head), head_dim, the key views (one per KV head, L rows of head_dim, data set),
/// and, when uses_window and C < L (compression applies), 1 <= W < L, C >= W and window_q set;
/// when uses_all_q, all_q set; n_threads >= 1.
/// Throws snapkv::Error naming the press, layer, field and value.
void check_input(const PressInput& in, int64_t capacity, std::string_view press, bool uses_window, bool uses_all_q);

/// SnapKV steps 1-5: window-attention scores reduced to the KV heads by `agg` and pooled with
/// `kernel` (odd) / `pool`, [n_head_kv][L-W].
HeadScores snapkv_scores(const PressInput& in, int kernel, PoolType pool, GQAAgg agg);

/// PyramidKV (Cai et al. 2024, arXiv 2406.02069, Sec. 3) prefix budgets (window excluded) of
/// n_layers compressed layers, bottom (index 0) to top, for a uniform prefix budget P = C - W:
///   min = floor(P / beta), max = 2P - min, budget(i) = max - (max - min) * i / (n_layers - 1)
/// rounded by the largest-remainder method (floors, then +1 to the layers with the largest
/// fractional parts, earlier layers first on ties), so the budgets are non-increasing, lie in
/// [min, max] and sum to exactly n_layers * P. Fallback (documented rule): when the prompt is
/// too short for the pyramid, i.e. max > max_prefix (= L - W, the prefix length), every layer
/// gets the uniform P (as the reference code falls back to SnapKV for short prompts).
/// n_layers == 1 also gives {P}. Throws snapkv::Error for P < 0, P > max_prefix, beta < 1 or
/// n_layers < 1.
std::vector<int64_t> pyramid_budgets(int64_t prefix_budget, int64_t max_prefix, double beta, int n_layers);

/// AdaKV (Feng et al. 2024, arXiv 2407.11550, Alg. 1) head-adaptive selection over one layer:
/// every head first gets its own top floor(alpha * k) positions (safeguard), then the remaining
/// n_heads * (k - floor(alpha * k)) slots go to the highest remaining scores of all heads
/// together (ties: earlier position, then lower head). Returns per head its ascending picks;
/// the total is exactly n_heads * k. Requires k <= each head's length.
std::vector<std::vector<int32_t>> adaptive_top_k(const HeadScores& scores, int64_t k, double alpha);

}  // namespace snapkv::press_detail
