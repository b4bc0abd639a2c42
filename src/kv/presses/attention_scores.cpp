// snapkv presses: softmax attention column sums (SnapKV steps 1-3, H2O, TOVA).
//
// SnapKV (Li et al. 2024, arXiv 2404.14469, Sec. 4 / Listing 1) scores prompt position j by
// the attention the last W prompt queries pay to it:
//   logits_i = attn_scale * q_i . K^T   (window query i at position L-W+i, causal mask)
//   p_i      = softmax(logits_i)        (fp32, max subtracted)
//   score_j  = sum_i p_i[j]             (j < L-W)
// This file computes such sums for any set of consecutive query rows without materialising
// more than a row-block x key-range tile of probabilities:
//   phase 1 (parallel over key chunks): logits of the rows against a chunk of keys (keys
//            converted to f32 and transposed chunk-wise so the inner loop is a SIMD axpy),
//            chunk-local row max m_rc, e = exp(l - m_rc) stored, chunk-local sums s_rc;
//   combine (per row): M_r = max_c m_rc, S_r = sum_c s_rc e^(m_rc - M_r), f_rc = e^(m_rc - M_r) / S_r;
//   phase 2 (parallel over output chunks): out[j] += sum_r f_rc * e_rj.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kv/presses/scoring.h"
#include "kv/presses/vec_math.h"

namespace snapkv::press_detail {
namespace {

constexpr int64_t kChunk = 64;                          // keys per chunk (one SIMD tile row)
constexpr int64_t kMaxTileFloats = int64_t{16} << 20;   // 64 MiB of probabilities per row block
constexpr int64_t kMinParallelWork = int64_t{1} << 21;  // multiply-adds below which one thread runs

/// Loads keys [j0, j0 + kChunk) (zeros past `nk`) transposed: kt[d * kChunk + t] = k_{j0+t}[d].
void load_keys_transposed(const RowsView& keys, int64_t j0, int64_t nk, float* kt, float* rows_tmp) {
  const int d = keys.head_dim;
  const int64_t cnt = std::min(kChunk, nk - j0);
  const float* src;
  if (keys.type == KVType::F32) {
    src = static_cast<const float*>(keys.data) + j0 * d;
  } else {
    f16_to_f32(static_cast<const uint16_t*>(keys.data) + j0 * d, rows_tmp, cnt * d);
    src = rows_tmp;
  }
  for (int64_t t = 0; t < cnt; ++t) {
    const float* kr = src + t * d;
    for (int i = 0; i < d; ++i) kt[i * kChunk + t] = kr[i];
  }
  for (int64_t t = cnt; t < kChunk; ++t)
    for (int i = 0; i < d; ++i) kt[i * kChunk + t] = 0.0f;
}

/// acc[t] = dot(q, k_{j0+t}) for the transposed chunk kt.
inline void dot_chunk(const float* q, const float* kt, int d, float* acc) {
  for (int64_t t = 0; t < kChunk; ++t) acc[t] = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float qi = q[i];
    const float* kr = kt + i * kChunk;
    for (int64_t t = 0; t < kChunk; ++t) acc[t] += qi * kr[t];
  }
}

/// One row block: rows [r0, r1) of the caller's rows (positions first_pos + r).
void row_block(const float* q, int64_t r0, int64_t r1, int64_t first_pos, const RowsView& keys, float scale, float* out,
               int64_t n_out) {
  const int d = keys.head_dim;
  const int64_t nr = r1 - r0;
  const int64_t nk = first_pos + r1;  // keys seen by the last row of the block
  const int64_t nc = (nk + kChunk - 1) / kChunk;
  const int64_t stride = nc * kChunk;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // Queries pre-multiplied by the logit scale.
  std::vector<float> qs(static_cast<size_t>(nr * d));
  for (int64_t r = 0; r < nr; ++r)
    for (int i = 0; i < d; ++i) qs[r * d + i] = q[(r0 + r) * d + i] * scale;

  std::vector<float> e(static_cast<size_t>(nr * stride));
  std::vector<float> m(static_cast<size_t>(nr * nc)), s(static_cast<size_t>(nr * nc));

  // Threads only pay off for real work (small calls would mostly wait at barriers).
  const bool par = nc > 1 && nr * nk * d >= kMinParallelWork;
#pragma omp parallel if (par)
  {
    std::vector<float> kt(static_cast<size_t>(kChunk * d)), tmp(static_cast<size_t>(kChunk * d));
    alignas(64) float acc[kChunk];
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t j0 = c * kChunk;
      load_keys_transposed(keys, j0, nk, kt.data(), tmp.data());
      for (int64_t r = 0; r < nr; ++r) {
        float* er = e.data() + r * stride + j0;
        const int64_t last = first_pos + r0 + r;  // last key this row sees
        const int64_t valid = std::min(kChunk, last - j0 + 1);
        if (valid <= 0) {
          for (int64_t t = 0; t < kChunk; ++t) er[t] = 0.0f;
          m[r * nc + c] = neg_inf;
          s[r * nc + c] = 0.0f;
          continue;
        }
        dot_chunk(qs.data() + r * d, kt.data(), d, acc);
        float mx = neg_inf;
        for (int64_t t = 0; t < valid; ++t) mx = std::max(mx, acc[t]);
        float sum = 0.0f;
        for (int64_t t = 0; t < valid; ++t) {
          er[t] = exp_neg(acc[t] - mx);
          sum += er[t];
        }
        for (int64_t t = valid; t < kChunk; ++t) er[t] = 0.0f;
        m[r * nc + c] = mx;
        s[r * nc + c] = sum;
      }
    }
  }

  // Combine the chunk-local softmax statistics: f[r][c] scales chunk c's e to probabilities.
  for (int64_t r = 0; r < nr; ++r) {
    float* mr = m.data() + r * nc;
    float* sr = s.data() + r * nc;
    float mx = neg_inf;
    for (int64_t c = 0; c < nc; ++c) mx = std::max(mx, mr[c]);
    double total = 0.0;
    for (int64_t c = 0; c < nc; ++c)
      if (sr[c] > 0.0f) total += static_cast<double>(sr[c]) * std::exp(static_cast<double>(mr[c]) - mx);
    for (int64_t c = 0; c < nc; ++c)
      sr[c] = sr[c] > 0.0f ? static_cast<float>(std::exp(static_cast<double>(mr[c]) - mx) / total) : 0.0f;
  }

  const int64_t n_out_blk = std::min(n_out, nk);  // later columns: no row of this block sees them
  const int64_t nco = (n_out_blk + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (nco > 1 && nr * n_out_blk * 16 >= kMinParallelWork)
  for (int64_t c = 0; c < nco; ++c) {
    const int64_t j0 = c * kChunk;
    alignas(64) float acc[kChunk] = {};
    for (int64_t r = 0; r < nr; ++r) {
      const float f = s[r * nc + c];
      if (f == 0.0f) continue;
      const float* er = e.data() + r * stride + j0;
      for (int64_t t = 0; t < kChunk; ++t) acc[t] += f * er[t];
    }
    const int64_t cnt = std::min(kChunk, n_out_blk - j0);
    for (int64_t t = 0; t < cnt; ++t) out[j0 + t] += acc[t];
  }
}

}  // namespace

void attention_column_sums(const float* q, int64_t n_rows, int64_t first_pos, const RowsView& keys, float scale,
                           float* out, int64_t n_out, int64_t max_tile_floats) {
  const int64_t nk = first_pos + n_rows;
  const int64_t cap = max_tile_floats > 0 ? max_tile_floats : kMaxTileFloats;
  const int64_t block = std::max<int64_t>(1, cap / (nk + kChunk));
  for (int64_t r0 = 0; r0 < n_rows; r0 += block)
    row_block(q, r0, std::min(n_rows, r0 + block), first_pos, keys, scale, out, n_out);
}

HeadScores window_attention_scores(const PressInput& in, int first_row) {
  const int64_t L = in.n_tokens;
  const int W = in.window;
  const int d = in.head_dim;
  const int group = in.n_head / in.n_head_kv;
  HeadScores out(static_cast<size_t>(in.n_head), std::vector<float>(static_cast<size_t>(L - W), 0.0f));
  for (int h = 0; h < in.n_head; ++h) {
    const float* q = in.window_q + (static_cast<int64_t>(h) * W + first_row) * d;
    attention_column_sums(q, W - first_row, L - W + first_row, in.keys[static_cast<size_t>(h / group)], in.attn_scale,
                          out[static_cast<size_t>(h)].data(), L - W);
  }
  return out;
}

}  // namespace snapkv::press_detail
