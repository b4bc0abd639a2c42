// Causal attention over the ragged per-head KV cache (see attention/attention.h).
#include "attention/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attention/positions.h"
#include "attention/prefill.h"
#include "attention/simd.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

constexpr int64_t kDecodeBlock = 128;  // decode: keys per parallel task

int64_t n_decode_blocks(int64_t max_keys) { return (max_keys + kDecodeBlock - 1) / kDecodeBlock + 1; }

using attn::kNegInf;
using attn::lower_index;
using attn::upper_index;

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
  task_off_.resize(static_cast<size_t>(shape.n_head_kv) + 1);
  j_begin_.resize(static_cast<size_t>(shape.n_head_kv));
  j_end_.resize(static_cast<size_t>(shape.n_head_kv));
  q16_.resize(static_cast<size_t>(max_queries) * nh * hd);
  thread_floats_ = attn::prefill_thread_floats(shape);
}

size_t AttentionWorkspace::bytes() const {
  return sizeof(float) *
             (scores_.size() + partial_.size() + blk_max_.size() + q16_.size() + thread_.size() + score_cache_.size()) +
         sizeof(double) * (blk_sum_.size() + thread_sums_.size()) +
         sizeof(int64_t) * (task_off_.size() + j_begin_.size() + j_end_.size()) +
         sizeof(const float*) * thread_rows_.size();
}

void attention(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q, const KVLayerCache& cache,
               float* out, AttentionWorkspace& ws, int n_threads) {
  if (n_threads < 1) throw Error(fmt::format("attention: thread count {} must be >= 1", n_threads));
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
    attn::round_f16_row(q, q16, static_cast<int64_t>(q_floats));
    qa = q16;
  }

  // A decode query over a head longer than the decode scratch holds (max_keys) takes the blocked
  // kernel, which has no key-count bound: a sequence may hold more positions than the engine
  // sized its workspaces for (n_ctx_train), and failing here would fail a whole Engine::step.
  bool beyond = false;
  for (const auto& hc : cache.heads) beyond = beyond || hc.size() > ws.max_keys_;
  if (n_q > 1 || beyond) {
    const auto threads = static_cast<size_t>(n_threads);
    const size_t rows = attn::prefill_block_rows(p);
    if (ws.thread_.size() < threads * ws.thread_floats_) ws.thread_.resize(threads * ws.thread_floats_);
    if (ws.thread_sums_.size() < threads * rows) ws.thread_sums_.resize(threads * rows);
    if (ws.thread_rows_.size() < threads * rows) ws.thread_rows_.resize(threads * rows);
    // Scores kept between the two passes of an F16 cache: one row per query row, as long as the
    // longest head (a task's visible key range never exceeds it), capped.
    int64_t score_keys = 0;
    if (f16) {
      for (const auto& hc : cache.heads) score_keys = std::max(score_keys, hc.size());
      score_keys = std::min(score_keys, attn::kScoreCacheMaxKeys);
      if (ws.score_cache_.size() < threads * rows * static_cast<size_t>(score_keys))
        ws.score_cache_.resize(threads * rows * static_cast<size_t>(score_keys));
    }
    attn::attention_prefill(p, qa, q_pos, n_q, cache, out, ws.thread_.data(), ws.thread_floats_, ws.thread_sums_.data(),
                            ws.thread_rows_.data(), ws.score_cache_.data(), score_keys, n_threads);
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
  const int64_t max_keys = ws.max_keys_;

  auto task_range = [&](int64_t task, int& g, int64_t& b, int64_t& j0, int64_t& j1) {
    g = static_cast<int>(std::upper_bound(off, off + p.n_head_kv + 1, task) - off) - 1;
    b = task - off[g];
    j0 = JB[g] + b * kDecodeBlock;
    j1 = std::min(JE[g], j0 + kDecodeBlock);
  };

  // Below ~256K multiply-adds a parallel region costs more than it saves (and much more when the
  // other core is busy); the phases need two barriers.
  const bool par = total_keys * G * hd >= (int64_t{1} << 18);
  auto head_max = [&](int h, int g) {
    float mx = kNegInf;
    for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) mx = std::max(mx, bmax[static_cast<size_t>(h) * nb_max + b]);
    return mx;
  };
  auto head_inv = [&](int h, int g) {
    double sum = 0.0;
    for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) sum += bsum[static_cast<size_t>(h) * nb_max + b];
    return sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  };
#pragma omp parallel num_threads(n_threads) if (par)
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
            d = hd < attn::kExactDotBelow ? attn::dot_f32_f16_acc64(qv, kr, hd) : attn::dot_f32_f16(qv, kr, hd);
          } else {
            d = attn::dot_f32(qv, static_cast<const float*>(hc.k_data()) + j * hd, hd);
          }
          const float sc = p.scale * d;
          sr[j - JB[g]] = sc;
          mx = std::max(mx, sc);
        }
        bmax[static_cast<size_t>(h) * nb_max + b] = mx;
      }
    }
    // 2. exponentials against the head's maximum, and per-block sums (double, as ggml's soft_max)
#pragma omp for schedule(static)
    for (int64_t task = 0; task < n_tasks; ++task) {
      int g;
      int64_t b, j0, j1;
      task_range(task, g, b, j0, j1);
      for (int hh = 0; hh < G; ++hh) {
        const int h = g * G + hh;
        const float mx = head_max(h, g);
        float* sr = scores + static_cast<size_t>(h) * max_keys;
        double sum = 0.0;
        for (int64_t j = j0; j < j1; ++j) {
          const float e = std::exp(sr[j - JB[g]] - mx);
          sr[j - JB[g]] = e;
          sum += static_cast<double>(e);
        }
        bsum[static_cast<size_t>(h) * nb_max + b] = sum;
      }
    }
    // 3. partial weighted sums of V per block, with the normalized probabilities
#pragma omp for schedule(static)
    for (int64_t task = 0; task < n_tasks; ++task) {
      int g;
      int64_t b, j0, j1;
      task_range(task, g, b, j0, j1);
      const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
      for (int hh = 0; hh < G; ++hh) {
        const int h = g * G + hh;
        const float inv = head_inv(h, g);
        const float* sr = scores + static_cast<size_t>(h) * max_keys;
        float* acc = partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd;
        std::fill(acc, acc + hd, 0.0f);
        for (int64_t j = j0; j < j1; ++j) {
          float pr = sr[j - JB[g]] * inv;
          if (f16) {
            pr = attn::round_f16(pr);  // ggml converts the probabilities to F16 for the V product
            if (pr != 0.0f) attn::axpy_f16(acc, pr, static_cast<const uint16_t*>(hc.v_data()) + j * hd, hd);
          } else if (pr != 0.0f) {
            attn::axpy_f32(acc, pr, static_cast<const float*>(hc.v_data()) + j * hd, hd);
          }
        }
      }
    }
  }
  // 4. reduce the blocks (in block order: the result does not depend on the thread count)
  for (int h = 0; h < p.n_head; ++h) {
    const int g = h / G;
    float* o = out + static_cast<size_t>(h) * hd;
    std::fill(o, o + hd, 0.0f);
    for (int64_t b = 0; b < off[g + 1] - off[g]; ++b)
      attn::axpy_f32(o, 1.0f, partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd, hd);
  }
}

}  // namespace snapkv
