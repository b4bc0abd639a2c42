// snapkv: split-K decode attention (flash-decoding) over many sequences at once.
//
// Each row is one query token of one sequence: q [n_head][head_dim] at position pos, over that
// sequence's KVLayerCache (ragged: every KV head holds its own positions). For query head h (KV
// head g = h / G, G = n_head / n_head_kv) the visible entries of head g (pos_j <= pos; sliding
// window: also pos - pos_j < window) form one contiguous index range, which is cut into n_split
// pieces (splits). One task = (row, KV head, split): the G query heads of that KV head over the
// split's keys, in blocks of kKeyBlock keys with an online softmax (Milakov & Gimelshein 2018;
// Dao et al. 2022, FlashAttention, Alg. 1):
//   s_j = scale * dot(q_h, k_j)
//   m' = max(m, max_j s_j);  l' = e^{m - m'} l + sum_j e^{s_j - m'};  a' = e^{m - m'} a + sum_j e^{s_j - m'} v_j
// leaving (m_s, l_s, a_s) per split. The splits of a (row, head) are then combined in split order
// (Dao, Haziza, Massa & Sizov 2023, Flash-Decoding):
//   M = max_s m_s;  out = sum_s e^{m_s - M} a_s / sum_s e^{m_s - M} l_s.
// The number of splits and their boundaries depend only on the head's visible key count nk and the
// layer's shape (G, head_dim):
//   n_split = clamp(ceil(nk / min_keys), 1, kMaxSplits), split length = ceil(nk / n_split)
//   rounded up to a multiple of kKeyBlock (so n_split may shrink by the rounding),
// with min_keys = min_split_keys(G, head_dim) (a split holds at least ~kMinSplitWork multiply-adds),
// never on the thread count or the other rows: a row's output is bit-identical alone or in any
// batch, and for any thread count. A query with no visible key gets zeros.
// With an F16 cache the query is rounded to F16 first and the scores use the dot helpers of the
// non-flash path (double-summed below kExactDotBelow): ggml's rounding of K.Q. The probabilities
// are not rounded to F16 (ggml's non-flash path rounds the normalized ones, which split-K cannot
// know before the end). A Q8_0 or Q4_0 cache is treated exactly as an F32 cache holding its
// dequantized values (f32 query, no rounding); the AVX-512 and AVX2 tiles dequantize in registers,
// scalar builds a key block at a time into a per-thread tile. V sums accumulate in f32; each
// block's exponentials are summed in double, the running sum l is kept in f32, and the splits are combined in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attention/attention.h"
#include "kv/kv_cache.h"

namespace snapkv {

/// One decode query: one token of one sequence.
struct DecodeQuery {
  const float* q = nullptr;  ///< [n_head][head_dim] f32, after RoPE, unscaled
  int32_t pos = 0;           ///< its position (keys with pos_j <= pos are visible; SWA: pos - pos_j < window)
  const KVLayerCache* cache = nullptr;  ///< that sequence's cache of this layer (already holding this token's K/V)
  float* out = nullptr;                 ///< [n_head][head_dim] f32 (may alias q)
};

/// Scratch of attention_decode() for up to max_rows rows, allocated once. Its size depends on the
/// shape and max_rows only, never on the cache lengths (see bytes_for), except for Q8_0 / Q4_0
/// caches in scalar builds (AVX-512 and AVX2 builds dequantize in registers): they also use
/// one dequantized key block per thread (n_threads x 2 x kKeyBlock x head_dim floats), allocated by
/// the first call with such rows and that many threads, before its parallel region, and kept. One call at a time.
class DecodeWorkspace {
 public:
  static constexpr int kKeyBlock = 64;  ///< keys per online-softmax block; split boundaries are multiples
  /// K.Q multiply-adds a split holds at least (G x head_dim per key): the work below which a
  /// parallel region costs more than it saves (attention_decode runs one-task calls on one thread).
  static constexpr int64_t kMinSplitWork = int64_t{1} << 18;
  static constexpr int64_t kMaxMinSplitKeys = 512;  ///< upper bound of min_split_keys()
  static constexpr int kMaxSplits = 16;             ///< most splits of one (row, KV head)

  /// Throws snapkv::Error for a bad shape or max_rows < 1.
  DecodeWorkspace(const AttentionParams& shape, int64_t max_rows);

  const AttentionParams& shape() const { return shape_; }
  int64_t max_rows() const { return max_rows_; }
  /// Bytes held: bytes_for(shape(), max_rows()), plus the dequantization tiles once allocated.
  size_t bytes() const;
  /// 4 * R * n_head * (kMaxSplits * (head_dim + 2) + head_dim)   (split partials, F16-rounded q)
  /// + 8 * (3 * R * n_head_kv + 1)                                 (visible ranges, task offsets)
  /// + 8 * (R * n_head_kv * kMaxSplits + 1)                        (keys before each task)
  /// with R = max_rows.
  static size_t bytes_for(const AttentionParams& shape, int64_t max_rows);

  /// Keys a split holds at least when `group` query heads of head_dim share a KV head:
  /// kMinSplitWork / (group x head_dim) rounded down to whole kKeyBlocks, within [kKeyBlock,
  /// kMaxMinSplitKeys]. SmolLM2-135M (3 x 64): 512; Gemma 3 270M (4 x 256): 256, so that its
  /// 512-key sliding windows take two splits (two threads) instead of one.
  static int64_t min_split_keys(int group, int head_dim);
  /// Splits of a head that sees nk keys (0 for nk = 0), and their length in keys (a multiple of
  /// kKeyBlock; the last split may be shorter); min_keys from min_split_keys().
  static int n_splits(int64_t nk, int64_t min_keys);
  static int64_t split_keys(int64_t nk, int64_t min_keys);

 private:
  friend void attention_decode(const AttentionParams&, std::span<const DecodeQuery>, DecodeWorkspace&, int);
  AttentionParams shape_;
  int64_t max_rows_;
  std::vector<float> partial_;     ///< [R][n_head][kMaxSplits][head_dim + 2]: a_s, then m_s, l_s
  std::vector<float> q16_;         ///< [R][n_head][head_dim] queries rounded to F16 (F16 caches)
  std::vector<int64_t> j_begin_;   ///< [R][n_head_kv] first visible entry
  std::vector<int64_t> j_end_;     ///< [R][n_head_kv] one past the last visible entry
  std::vector<int64_t> task_off_;  ///< [R * n_head_kv + 1] first task of each (row, KV head)
  std::vector<int64_t> task_key_;  ///< [R * n_head_kv * kMaxSplits + 1] keys of all tasks before each task
  std::vector<float> quant_tile_;  ///< uses_tile() caches: [threads][2][kKeyBlock][head_dim] dequantized K, V
};

/// Decode attention of rows (each one query token of its own sequence) of one layer, parallel over
/// (row, KV head, split) tasks on n_threads OpenMP threads (one parallel region; run serially when
/// the work is small). Thread t of T runs the tasks, in order, whose middle key lies in the t-th
/// T-th of all the tasks' keys: about equal keys per thread, and a head's consecutive splits (K and
/// V rows that follow one another in memory) on one thread. p.window masks, as in attention() (a
/// layer's window is the same for every sequence; cache->window is not read, so a test may override
/// it). Throws snapkv::Error (naming the row) for more rows than the workspace holds, a workspace of
/// another shape, null pointers, a cache whose head count, head_dim or element types do not match,
/// or n_threads < 1.
void attention_decode(const AttentionParams& p, std::span<const DecodeQuery> rows, DecodeWorkspace& ws, int n_threads);

}  // namespace snapkv
