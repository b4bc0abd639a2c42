// Causal attention over the ragged per-head KV cache (see snapkv/attention.h).
#include "snapkv/attention.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/simd.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

constexpr int kQueryBlock = 16;        // prefill: query tokens per block
constexpr int kKeyBlock = 64;          // prefill: keys per block
constexpr int64_t kDecodeBlock = 128;  // decode: keys per parallel task
// With an F16 cache, rows shorter than this are dotted with double accumulation, like ggml's
// vec_dot_f16 does for rows shorter than its SIMD step (64 with AVX-512); F16 x F16 products are
// exact in f32, so the scores then equal ggml's bit for bit.
constexpr int kExactDotBelow = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t n_decode_blocks(int64_t max_keys) { return (max_keys + kDecodeBlock - 1) / kDecodeBlock + 1; }

// First entry index whose position is >= p (positions ascending).
int64_t lower_index(const int32_t* pos, int64_t n, int64_t p) {
  return std::lower_bound(pos, pos + n, p, [](int32_t a, int64_t b) { return a < b; }) - pos;
}
// First entry index whose position is > p.
int64_t upper_index(const int32_t* pos, int64_t n, int64_t p) {
  return std::upper_bound(pos, pos + n, p, [](int64_t a, int32_t b) { return a < b; }) - pos;
}

// Per-thread scratch of the prefill kernel, in floats.
size_t prefill_thread_floats(const AttentionParams& p) {
  const size_t G = static_cast<size_t>(p.n_head / p.n_head_kv);
  const size_t rows = kQueryBlock * G;
  const size_t hd = static_cast<size_t>(p.head_dim);
  return 2 * kKeyBlock * hd + rows * kKeyBlock + rows * hd + rows;
}

}  // namespace

AttentionWorkspace::AttentionWorkspace(const AttentionParams& shape, int64_t max_keys, int64_t max_queries)
    : max_keys_(max_keys), max_queries_(max_queries) {
  if (shape.n_head < 1 || shape.n_head_kv < 1 || shape.head_dim < 1 || shape.n_head % shape.n_head_kv != 0)
    throw Error(fmt::format("attention: bad shape n_head {} n_head_kv {} head_dim {}", shape.n_head, shape.n_head_kv,
                            shape.head_dim));
  if (max_keys < 1 || max_queries < 1)
    throw Error(fmt::format("attention: bad workspace size max_keys {} max_queries {}", max_keys, max_queries));
  const auto nh = static_cast<size_t>(shape.n_head);
  const auto hd = static_cast<size_t>(shape.head_dim);
  const auto nb = static_cast<size_t>(n_decode_blocks(max_keys));
  scores_.resize(nh * static_cast<size_t>(max_keys));
  partial_.resize(nh * nb * hd);
  blk_max_.resize(nh * nb);
  blk_sum_.resize(nh * nb);
  head_max_.resize(nh);
  head_inv_.resize(nh);
  task_off_.resize(static_cast<size_t>(shape.n_head_kv) + 1);
  j_begin_.resize(static_cast<size_t>(shape.n_head_kv));
  j_end_.resize(static_cast<size_t>(shape.n_head_kv));
  q16_.resize(static_cast<size_t>(max_queries) * nh * hd);
  thread_floats_ = prefill_thread_floats(shape);
}

namespace {

// Blocked causal attention with online softmax (several queries).
void attention_prefill(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                       const KVLayerCache& cache, float* out, float* thread_scratch, size_t thread_floats,
                       double* thread_sums) {
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  const int64_t nqb = (n_q + kQueryBlock - 1) / kQueryBlock;
  const int64_t n_tasks = nqb * p.n_head_kv;
  const bool f16 = cache.heads.empty() ? false : cache.heads[0].type() == KVType::F16;
  const bool exact_dot = f16 && hd < kExactDotBelow;

#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int g = static_cast<int>(task / nqb);
    const int64_t t0 = (task % nqb) * kQueryBlock;
    const int64_t t1 = std::min(n_q, t0 + kQueryBlock);
    const int nrows = static_cast<int>(t1 - t0) * G;
    float* base = thread_scratch + static_cast<size_t>(omp_get_thread_num()) * thread_floats;
    float* Kf = base;
    float* Vf = Kf + kKeyBlock * hd;
    float* S = Vf + kKeyBlock * hd;
    float* acc = S + static_cast<size_t>(kQueryBlock) * G * kKeyBlock;
    float* m = acc + static_cast<size_t>(kQueryBlock) * G * hd;
    double* l = thread_sums + static_cast<size_t>(omp_get_thread_num()) * kQueryBlock * G;

    const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
    const int32_t* P = hc.pos_data();
    const int64_t n = hc.size();
    int64_t qmin = q_pos[t0], qmax = q_pos[t0];
    for (int64_t t = t0; t < t1; ++t) {
      qmin = std::min<int64_t>(qmin, q_pos[t]);
      qmax = std::max<int64_t>(qmax, q_pos[t]);
    }
    const int64_t j_end = upper_index(P, n, qmax);
    const int64_t j_begin = p.window > 0 ? lower_index(P, j_end, qmin - p.window + 1) : 0;

    std::fill(acc, acc + static_cast<size_t>(nrows) * hd, 0.0f);
    std::fill(m, m + nrows, kNegInf);
    std::fill(l, l + nrows, 0.0);

    // Key block [kb, kb + nk) as f32 rows (converted from F16 into the thread's buffer).
    auto load_block = [&](int64_t kb, int nk, bool with_v, const float*& Kb, const float*& Vb) {
      if (f16) {
        attn::f16_to_f32(static_cast<const uint16_t*>(hc.k_data()) + kb * hd, Kf, nk * hd);
        if (with_v) attn::f16_to_f32(static_cast<const uint16_t*>(hc.v_data()) + kb * hd, Vf, nk * hd);
        Kb = Kf;
        Vb = Vf;
      } else {
        Kb = static_cast<const float*>(hc.k_data()) + kb * hd;
        Vb = static_cast<const float*>(hc.v_data()) + kb * hd;
      }
    };
    // Masked scores of row r against the block into Sr; returns the row maximum.
    auto score_row = [&](int r, int64_t kb, int nk, const float* Kb, float* Sr) {
      const int64_t t = t0 + r / G;
      const int h = g * G + r % G;
      const int64_t qp = q_pos[t];
      const float* qv = q + (t * p.n_head + h) * hd;
      float rmax = kNegInf;
      for (int j = 0; j < nk; ++j) {
        const int64_t kp = P[kb + j];
        if (kp > qp || (p.window > 0 && qp - kp >= p.window)) {
          Sr[j] = kNegInf;
          continue;
        }
        const float* kr = Kb + static_cast<size_t>(j) * hd;
        const float sc = p.scale * (exact_dot ? attn::dot_f32_acc64(qv, kr, hd) : attn::dot_f32(qv, kr, hd));
        Sr[j] = sc;
        rmax = std::max(rmax, sc);
      }
      return rmax;
    };

    if (!f16) {
      // One pass, online softmax: acc and l are rescaled whenever the running max grows.
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb, *Vb;
        load_block(kb, nk, true, Kb, Vb);
        for (int r = 0; r < nrows; ++r) {
          float* Sr = S + static_cast<size_t>(r) * kKeyBlock;
          const float rmax = score_row(r, kb, nk, Kb, Sr);
          if (rmax == kNegInf) continue;
          float* ar = acc + static_cast<size_t>(r) * hd;
          const float m_new = std::max(m[r], rmax);
          if (m[r] != kNegInf && m_new != m[r]) {
            const float corr = std::exp(m[r] - m_new);
            l[r] *= static_cast<double>(corr);
            attn::scale_f32(ar, corr, hd);
          }
          double lsum = 0.0;
          for (int j = 0; j < nk; ++j) {
            if (Sr[j] == kNegInf) continue;
            const float e = std::exp(Sr[j] - m_new);
            lsum += static_cast<double>(e);
            attn::axpy_f32(ar, e, Vb + static_cast<size_t>(j) * hd, hd);
          }
          l[r] += lsum;
          m[r] = m_new;
        }
      }
      for (int r = 0; r < nrows; ++r) {
        const float inv = l[r] > 0.0 ? static_cast<float>(1.0 / l[r]) : 0.0f;
        attn::scale_f32(acc + static_cast<size_t>(r) * hd, inv, hd);
      }
    } else {
      // F16 cache: like ggml, the normalized probabilities are rounded to F16 before the V
      // product, so the final max and sum are needed first: pass 1 computes them (online),
      // pass 2 recomputes the scores and accumulates round_f16(p) * v.
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb, *Vb;
        load_block(kb, nk, false, Kb, Vb);
        for (int r = 0; r < nrows; ++r) {
          float* Sr = S + static_cast<size_t>(r) * kKeyBlock;
          const float rmax = score_row(r, kb, nk, Kb, Sr);
          if (rmax == kNegInf) continue;
          const float m_new = std::max(m[r], rmax);
          if (m[r] != kNegInf && m_new != m[r]) l[r] *= std::exp(static_cast<double>(m[r]) - m_new);
          double lsum = 0.0;
          for (int j = 0; j < nk; ++j)
            if (Sr[j] != kNegInf) lsum += static_cast<double>(std::exp(Sr[j] - m_new));
          l[r] += lsum;
          m[r] = m_new;
        }
      }
      // l becomes the normalizer 1/sum, rounded to float as ggml's soft_max does.
      for (int r = 0; r < nrows; ++r) l[r] = l[r] > 0.0 ? static_cast<float>(1.0 / l[r]) : 0.0f;
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb, *Vb;
        load_block(kb, nk, true, Kb, Vb);
        for (int r = 0; r < nrows; ++r) {
          if (m[r] == kNegInf) continue;
          float* Sr = S + static_cast<size_t>(r) * kKeyBlock;
          if (score_row(r, kb, nk, Kb, Sr) == kNegInf) continue;
          float* ar = acc + static_cast<size_t>(r) * hd;
          for (int j = 0; j < nk; ++j) {
            if (Sr[j] == kNegInf) continue;
            const float pr = attn::round_f16(std::exp(Sr[j] - m[r]) * static_cast<float>(l[r]));
            if (pr != 0.0f) attn::axpy_f32(ar, pr, Vb + static_cast<size_t>(j) * hd, hd);
          }
        }
      }
    }
    for (int r = 0; r < nrows; ++r) {
      const int64_t t = t0 + r / G;
      const int h = g * G + r % G;
      float* o = out + (t * p.n_head + h) * hd;
      const float* ar = acc + static_cast<size_t>(r) * hd;
      for (int d = 0; d < hd; ++d) o[d] = ar[d];
    }
  }
}

}  // namespace

void attention(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q, const KVLayerCache& cache,
               float* out, AttentionWorkspace& ws) {
  if (static_cast<int>(cache.heads.size()) != p.n_head_kv || p.n_head_kv < 1 || p.n_head % p.n_head_kv != 0)
    throw Error(fmt::format("attention: cache has {} heads, expected n_head_kv {} (n_head {})", cache.heads.size(),
                            p.n_head_kv, p.n_head));
  if (n_q < 1) return;
  if (n_q > ws.max_queries_)
    throw Error(fmt::format("attention: {} queries exceed the workspace's {}", n_q, ws.max_queries_));
  for (const auto& hc : cache.heads)
    if (hc.head_dim() != p.head_dim)
      throw Error(fmt::format("attention: cache head_dim {} != {}", hc.head_dim(), p.head_dim));
  const int hd = p.head_dim;
  const bool f16 = cache.heads[0].type() == KVType::F16;
  const size_t q_floats = static_cast<size_t>(n_q) * static_cast<size_t>(p.n_head) * static_cast<size_t>(hd);
  if (q_floats > ws.q16_.size()) throw Error("attention: query buffer of the workspace too small");

  // ggml converts the f32 operand of an F16 mat-mul to F16: round the queries the same way.
  const float* qa = q;
  if (f16) {
    float* q16 = ws.q16_.data();
    for (size_t i = 0; i < q_floats; ++i) q16[i] = attn::round_f16(q[i]);
    qa = q16;
  }

  if (n_q > 1) {
    const auto threads = static_cast<size_t>(omp_get_max_threads());
    if (ws.thread_.size() < threads * ws.thread_floats_) ws.thread_.resize(threads * ws.thread_floats_);
    const size_t rows = static_cast<size_t>(kQueryBlock) * static_cast<size_t>(p.n_head / p.n_head_kv);
    if (ws.thread_sums_.size() < threads * rows) ws.thread_sums_.resize(threads * rows);
    attention_prefill(p, qa, q_pos, n_q, cache, out, ws.thread_.data(), ws.thread_floats_, ws.thread_sums_.data());
    return;
  }

  // Decode: one query per head; score rows, exact softmax, weighted sum of V.
  const int G = p.n_head / p.n_head_kv;
  const int64_t qp = q_pos[0];
  const int64_t nb_max = n_decode_blocks(ws.max_keys_);
  int64_t* off = ws.task_off_.data();
  if (ws.j_begin_.size() < static_cast<size_t>(p.n_head_kv) ||
      ws.scores_.size() < static_cast<size_t>(p.n_head) * static_cast<size_t>(ws.max_keys_) ||
      ws.partial_.size() < static_cast<size_t>(p.n_head) * static_cast<size_t>(nb_max) * static_cast<size_t>(hd))
    throw Error("attention: workspace made for another shape");
  int64_t* JB = ws.j_begin_.data();
  int64_t* JE = ws.j_end_.data();
  off[0] = 0;
  int64_t total_keys = 0;
  for (int g = 0; g < p.n_head_kv; ++g) {
    const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
    if (hc.size() > ws.max_keys_)
      throw Error(
          fmt::format("attention: head holds {} entries, more than the workspace's {}", hc.size(), ws.max_keys_));
    JE[g] = upper_index(hc.pos_data(), hc.size(), qp);
    JB[g] = p.window > 0 ? lower_index(hc.pos_data(), JE[g], qp - p.window + 1) : 0;
    const int64_t nk = JE[g] - JB[g];
    total_keys += nk;
    off[g + 1] = off[g] + (nk + kDecodeBlock - 1) / kDecodeBlock;
  }
  const int64_t n_tasks = off[p.n_head_kv];
  float* scores = ws.scores_.data();
  float* partial = ws.partial_.data();
  float* bmax = ws.blk_max_.data();
  double* bsum = ws.blk_sum_.data();
  float* hmax = ws.head_max_.data();
  float* hinv = ws.head_inv_.data();
  const int64_t max_keys = ws.max_keys_;

  auto task_range = [&](int64_t task, int& g, int64_t& b, int64_t& j0, int64_t& j1) {
    g = static_cast<int>(std::upper_bound(off, off + p.n_head_kv + 1, task) - off) - 1;
    b = task - off[g];
    j0 = JB[g] + b * kDecodeBlock;
    j1 = std::min(JE[g], j0 + kDecodeBlock);
  };

  const bool par = total_keys * G * hd >= 32768;
#pragma omp parallel if (par)
  {
    // 1. scores and per-block maxima
#pragma omp for schedule(static)
    for (int64_t task = 0; task < n_tasks; ++task) {
      int g;
      int64_t b, j0, j1;
      task_range(task, g, b, j0, j1);
      const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
      for (int hh = 0; hh < G; ++hh) {
        const int h = g * G + hh;
        const float* qv = qa + static_cast<size_t>(h) * hd;
        float* sr = scores + static_cast<size_t>(h) * max_keys;
        float mx = kNegInf;
        for (int64_t j = j0; j < j1; ++j) {
          float d;
          if (f16) {
            const uint16_t* kr = static_cast<const uint16_t*>(hc.k_data()) + j * hd;
            d = hd < kExactDotBelow ? attn::dot_f32_f16_acc64(qv, kr, hd) : attn::dot_f32_f16(qv, kr, hd);
          } else {
            d = attn::dot_f32(qv, static_cast<const float*>(hc.k_data()) + j * hd, hd);
          }
          const float s = p.scale * d;
          sr[j - JB[g]] = s;
          mx = std::max(mx, s);
        }
        bmax[static_cast<size_t>(h) * nb_max + b] = mx;
      }
    }
    // 2. per-head maximum
#pragma omp for schedule(static)
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / G;
      float mx = kNegInf;
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) mx = std::max(mx, bmax[static_cast<size_t>(h) * nb_max + b]);
      hmax[h] = mx;
    }
    // 3. exponentials and per-block sums (double, as ggml's soft_max)
#pragma omp for schedule(static)
    for (int64_t task = 0; task < n_tasks; ++task) {
      int g;
      int64_t b, j0, j1;
      task_range(task, g, b, j0, j1);
      for (int hh = 0; hh < G; ++hh) {
        const int h = g * G + hh;
        float* sr = scores + static_cast<size_t>(h) * max_keys;
        double sum = 0.0;
        for (int64_t j = j0; j < j1; ++j) {
          const float e = std::exp(sr[j - JB[g]] - hmax[h]);
          sr[j - JB[g]] = e;
          sum += static_cast<double>(e);
        }
        bsum[static_cast<size_t>(h) * nb_max + b] = sum;
      }
    }
    // 4. per-head normalizer
#pragma omp for schedule(static)
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / G;
      double sum = 0.0;
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) sum += bsum[static_cast<size_t>(h) * nb_max + b];
      hinv[h] = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    }
    // 5. partial weighted sums of V per block
#pragma omp for schedule(static)
    for (int64_t task = 0; task < n_tasks; ++task) {
      int g;
      int64_t b, j0, j1;
      task_range(task, g, b, j0, j1);
      const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
      for (int hh = 0; hh < G; ++hh) {
        const int h = g * G + hh;
        const float* sr = scores + static_cast<size_t>(h) * max_keys;
        float* acc = partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd;
        std::fill(acc, acc + hd, 0.0f);
        for (int64_t j = j0; j < j1; ++j) {
          float pr = sr[j - JB[g]] * hinv[h];
          if (f16) {
            pr = attn::round_f16(pr);  // ggml converts the probabilities to F16 for the V product
            if (pr != 0.0f) attn::axpy_f16(acc, pr, static_cast<const uint16_t*>(hc.v_data()) + j * hd, hd);
          } else if (pr != 0.0f) {
            attn::axpy_f32(acc, pr, static_cast<const float*>(hc.v_data()) + j * hd, hd);
          }
        }
      }
    }
    // 6. reduce the blocks
#pragma omp for schedule(static)
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / G;
      float* o = out + static_cast<size_t>(h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b)
        attn::axpy_f32(o, 1.0f, partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd, hd);
    }
  }
}

}  // namespace snapkv
