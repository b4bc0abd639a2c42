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
#include <memory>
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
  } else if (keys.type == KVType::F16) {
    f16_to_f32(static_cast<const uint16_t*>(keys.data) + j0 * d, rows_tmp, cnt * d);
    src = rows_tmp;
  } else {  // Q8_0, Q4_0
    keys.rows(j0, cnt, rows_tmp);
    src = rows_tmp;
  }
  for (int64_t t = 0; t < cnt; ++t) {
    const float* kr = src + t * d;
    for (int i = 0; i < d; ++i) kt[i * kChunk + t] = kr[i];
  }
  for (int64_t t = cnt; t < kChunk; ++t)
    for (int i = 0; i < d; ++i) kt[i * kChunk + t] = 0.0f;
}

// Rows whose logits are computed together (they share the loads of the key chunk): the
// accumulators, kRowTile x kChunk floats, stay in vector registers.
#if defined(__AVX512F__)
constexpr int kRowTile = 4;
#else
constexpr int kRowTile = 2;
#endif

/// acc[r][t] = dot(q_r, k_{j0+t}) for kRowTile rows q_r = q + r * d and the transposed chunk kt.
inline void dot_tile(const float* q, const float* kt, int d, float (*acc)[kChunk]) {
  float a[kRowTile][kChunk] = {};
  for (int i = 0; i < d; ++i) {
    const float* kr = kt + i * kChunk;
    for (int r = 0; r < kRowTile; ++r) {
      const float qi = q[r * d + i];
      for (int64_t t = 0; t < kChunk; ++t) a[r][t] += qi * kr[t];
    }
  }
  for (int r = 0; r < kRowTile; ++r)
    for (int64_t t = 0; t < kChunk; ++t) acc[r][t] = a[r][t];
}

/// Max of acc[0..kChunk) via kLanes independent partial maxima (vectorizes without -ffast-math).
constexpr int64_t kLanes = 16;
inline float max_chunk(const float* acc) {
  float part[kLanes];
  for (int64_t u = 0; u < kLanes; ++u) part[u] = acc[u];
  for (int64_t t0 = kLanes; t0 < kChunk; t0 += kLanes)
    for (int64_t u = 0; u < kLanes; ++u) part[u] = part[u] > acc[t0 + u] ? part[u] : acc[t0 + u];
  float mx = part[0];
  for (int64_t u = 1; u < kLanes; ++u) mx = part[u] > mx ? part[u] : mx;
  return mx;
}

/// e[t] = exp(acc[t] - mx) for t < kChunk; returns their sum (kLanes partial sums).
inline float exp_sum_chunk(const float* acc, float mx, float* e) {
  float part[kLanes] = {};
  for (int64_t t0 = 0; t0 < kChunk; t0 += kLanes)
    for (int64_t u = 0; u < kLanes; ++u) {
      const float v = exp_neg(acc[t0 + u] - mx);
      e[t0 + u] = v;
      part[u] += v;
    }
  float sum = 0.0f;
  for (int64_t u = 0; u < kLanes; ++u) sum += part[u];
  return sum;
}

/// One row block: rows [r0, r1) (positions first_pos + r) of each of the nh query heads q[hh]
/// (all attending to the same keys), summed into out[hh].
void row_block(const float* const* q, int nh, int64_t r0, int64_t r1, int64_t first_pos, const RowsView& keys,
               float scale, float* const* out, int64_t n_out, int n_threads) {
  const int d = keys.head_dim;
  const int64_t nr = r1 - r0;
  const int64_t nb = nh * nr;  // rows of the block, b = hh * nr + r
  const int64_t nb_pad = (nb + kRowTile - 1) / kRowTile * kRowTile;
  const int64_t nk = first_pos + r1;  // keys seen by the last row of the block
  const int64_t nc = (nk + kChunk - 1) / kChunk;
  const int64_t stride = nc * kChunk;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const auto last_key = [&](int64_t b) { return first_pos + r0 + b % nr; };  // causal limit of row b

  // Queries pre-multiplied by the logit scale; padding rows are zero and never used.
  std::vector<float> qs(static_cast<size_t>(nb_pad * d), 0.0f);
  for (int hh = 0; hh < nh; ++hh)
    for (int64_t r = 0; r < nr; ++r)
      for (int i = 0; i < d; ++i) qs[(hh * nr + r) * d + i] = q[hh][(r0 + r) * d + i] * scale;

  // e[b][j]: exp(logit - chunk max); every element is written in phase 1.
  const auto e = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(nb * stride));
  std::vector<float> m(static_cast<size_t>(nb * nc)), s(static_cast<size_t>(nb * nc));

  // Threads only pay off for real work (small calls would mostly wait at barriers).
  const bool par = nc > 1 && nb * nk * d >= kMinParallelWork;
#pragma omp parallel if (par) num_threads(n_threads)
  {
    std::vector<float> kt(static_cast<size_t>(kChunk * d)), tmp(static_cast<size_t>(kChunk * d));
    alignas(64) float acc[kRowTile][kChunk];
#pragma omp for schedule(dynamic, 4)
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t j0 = c * kChunk;
      load_keys_transposed(keys, j0, nk, kt.data(), tmp.data());
      for (int64_t b0 = 0; b0 < nb; b0 += kRowTile) {
        const int nt = static_cast<int>(std::min<int64_t>(kRowTile, nb - b0));
        bool any = false;
        for (int u = 0; u < nt; ++u) any = any || last_key(b0 + u) >= j0;
        if (any) dot_tile(qs.data() + b0 * d, kt.data(), d, acc);
        for (int u = 0; u < nt; ++u) {
          const int64_t b = b0 + u;
          float* eb = e.get() + b * stride + j0;
          const int64_t valid = std::min(kChunk, last_key(b) - j0 + 1);
          if (valid <= 0) {
            for (int64_t t = 0; t < kChunk; ++t) eb[t] = 0.0f;
            m[c * nb + b] = neg_inf;
            s[c * nb + b] = 0.0f;
            continue;
          }
          for (int64_t t = valid; t < kChunk; ++t) acc[u][t] = neg_inf;  // causal mask: exp -> 0
          const float mx = max_chunk(acc[u]);
          m[c * nb + b] = mx;
          s[c * nb + b] = exp_sum_chunk(acc[u], mx, eb);
        }
      }
    }
  }

  // Combine the chunk-local softmax statistics (m and s are [chunk][row] so that threads working
  // on different chunks write apart): w_c = e^(m_c - M), S = sum_c s_c w_c, and s_c becomes the
  // factor w_c / S that turns chunk c of e[b] into probabilities.
  std::vector<float> w(static_cast<size_t>(nc));
  for (int64_t b = 0; b < nb; ++b) {
    float mx = neg_inf;
    for (int64_t c = 0; c < nc; ++c) mx = std::max(mx, m[c * nb + b]);
    double total = 0.0;
    for (int64_t c = 0; c < nc; ++c) {
      w[c] = exp_neg(m[c * nb + b] - mx);  // 0 for chunks the row does not see (m = -inf)
      total += static_cast<double>(s[c * nb + b]) * w[c];
    }
    const double inv = 1.0 / total;
    for (int64_t c = 0; c < nc; ++c) s[c * nb + b] = static_cast<float>(w[c] * inv);
  }

  const int64_t n_out_blk = std::min(n_out, nk);  // later columns: no row of this block sees them
  const int64_t nco = (n_out_blk + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic, 4) if (nco > 1 && nb * n_out_blk * 16 >= kMinParallelWork) \
    num_threads(n_threads)
  for (int64_t c = 0; c < nco; ++c) {
    const int64_t j0 = c * kChunk;
    const int64_t cnt = std::min(kChunk, n_out_blk - j0);
    for (int hh = 0; hh < nh; ++hh) {
      alignas(64) float acc[kChunk] = {};
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t b = hh * nr + r;
        const float f = s[c * nb + b];
        if (f == 0.0f) continue;
        const float* eb = e.get() + b * stride + j0;
        for (int64_t t = 0; t < kChunk; ++t) acc[t] += f * eb[t];
      }
      for (int64_t t = 0; t < cnt; ++t) out[hh][j0 + t] += acc[t];
    }
  }
}

}  // namespace

void attention_column_sums_heads(const float* const* q, int n_heads, int64_t n_rows, int64_t first_pos,
                                 const RowsView& keys, float scale, float* const* out, int64_t n_out,
                                 int64_t max_tile_floats, int n_threads) {
  const int64_t nk = first_pos + n_rows;
  const int64_t cap = max_tile_floats > 0 ? max_tile_floats : kMaxTileFloats;
  const int64_t block = std::max<int64_t>(1, cap / (n_heads * (nk + kChunk)));
  for (int64_t r0 = 0; r0 < n_rows; r0 += block)
    row_block(q, n_heads, r0, std::min(n_rows, r0 + block), first_pos, keys, scale, out, n_out, n_threads);
}

void attention_column_sums(const float* q, int64_t n_rows, int64_t first_pos, const RowsView& keys, float scale,
                           float* out, int64_t n_out, int64_t max_tile_floats, int n_threads) {
  attention_column_sums_heads(&q, 1, n_rows, first_pos, keys, scale, &out, n_out, max_tile_floats, n_threads);
}

HeadScores window_attention_scores(const PressInput& in, int first_row) {
  const int64_t L = in.n_tokens;
  const int W = in.window;
  const int d = in.head_dim;
  const int group = in.n_head / in.n_head_kv;
  HeadScores out(static_cast<size_t>(in.n_head), std::vector<float>(static_cast<size_t>(L - W), 0.0f));
  // The query heads of one KV head are processed together (keys converted once per KV head).
  std::vector<const float*> q(static_cast<size_t>(group));
  std::vector<float*> o(static_cast<size_t>(group));
  for (int kv = 0; kv < in.n_head_kv; ++kv) {
    for (int g = 0; g < group; ++g) {
      const int h = kv * group + g;
      q[g] = in.window_q + (static_cast<int64_t>(h) * W + first_row) * d;
      o[g] = out[static_cast<size_t>(h)].data();
    }
    attention_column_sums_heads(q.data(), group, W - first_row, L - W + first_row, in.keys[static_cast<size_t>(kv)],
                                in.attn_scale, o.data(), L - W, 0, in.n_threads);
  }
  return out;
}

}  // namespace snapkv::press_detail
