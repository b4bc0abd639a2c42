// Blocked causal attention for prefill (several queries): blocks of query rows x blocks of keys
// with an online softmax (Dao et al. 2022, FlashAttention, Alg. 1), so the memory used is
// O(rows x key block) whatever the prompt length.
#include "attention/prefill.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "attention/positions.h"
#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "attention/tiles.h"
#include "core/kv_rows.h"
#include "core/prefetch.h"

namespace snapkv::attn {

namespace {

constexpr int kKeyBlock = 64;   // keys per block
constexpr int kMaxTokens = 16;  // query tokens per block (fewer for large GQA groups)
constexpr int kTargetRows = 64;

int block_tokens(int G) { return std::clamp(kTargetRows / G, 1, kMaxTokens); }

}  // namespace

size_t prefill_block_rows(const AttentionParams& p) {
  const int G = p.n_head / p.n_head_kv;
  return static_cast<size_t>(block_tokens(G)) * static_cast<size_t>(G);
}

size_t prefill_thread_floats(const AttentionParams& p) {
  const size_t rows = prefill_block_rows(p);
  const auto hd = static_cast<size_t>(p.head_dim);
  return 2 * kKeyBlock * hd + rows * kKeyBlock + 2 * rows * hd + rows;  // K, V, S, acc, m, packed Q
}

void attention_prefill(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                       const KVLayerCache& cache, float* out, float* thread_scratch, size_t thread_floats,
                       double* thread_sums, const float** thread_rows, float* score_cache_all, int64_t score_keys,
                       int n_threads) {
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  const int QB = block_tokens(G);
  const size_t max_rows = prefill_block_rows(p);
  const int64_t nqb = (n_q + QB - 1) / QB;
  const int64_t n_tasks = nqb * p.n_head_kv;
  const KVType k_type = cache.heads[0].k_type();
  const KVType v_type = cache.heads[0].v_type();  // == k_type unless both are quantized
  const bool f16 = k_type == KVType::F16;
  const bool exact_dot = f16 && hd < kExactDotBelow;
  // Asks for the next key block's F16 rows (K in pass 1, V in pass 3) while this block is scored:
  // a task streams its head's whole key range from L3 or DRAM. Zen 4, SmolLM2 shape, 16K keys:
  // the block conversion went from 13.5 % to 8.1 % of the samples, PrefillAttn 1.03-1.08x (5 % at
  // 4K keys, 0.97-1.07x there). SNAPKV_PREFILL_PREFETCH=0|1 overrides the CPU default.
  static const bool prefetch = software_prefetch_enabled("SNAPKV_PREFILL_PREFETCH");

#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const PrefillTask tk = prefill_task(task, n_q, QB, G);
    const int g = tk.g;
    const int64_t t0 = tk.t0, t1 = tk.t1;
    const int nrows = tk.nrows;
    const auto tid = static_cast<size_t>(omp_get_thread_num());
    float* Kf = thread_scratch + tid * thread_floats;
    float* Vf = Kf + kKeyBlock * hd;
    float* S = Vf + kKeyBlock * hd;  // [rows][kKeyBlock] scores, then probabilities
    float* acc = S + max_rows * kKeyBlock;
    float* m = acc + max_rows * static_cast<size_t>(hd);
    float* qpack = m + max_rows;  // [rows / 4][2][hd / 8][16] (tiles.h pack_q_pairs)
    double* l = thread_sums + tid * max_rows * kSumsPerRow;
    double* lanes = l + max_rows;  // [rows][kExpSumLanes]: the F16 path's uncached sums
    const float** qrows = thread_rows + tid * max_rows;
    float* score_cache = f16 ? score_cache_all + tid * max_rows * static_cast<size_t>(score_keys) : nullptr;
    // Row r = (token t0 + r / G, query head g * G + r % G).
    for (int r = 0; r < nrows; ++r) qrows[r] = q + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
#if SNAPKV_ATTN_AVX512
    const bool packed = !exact_dot && hd % 8 == 0;
    if (packed) pack_q_pairs(qrows, nrows, hd, qpack);
#else
    const bool packed = false;
#endif

    const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
    const int32_t* P = hc.pos_data();
    // Key blocks start at multiples of kKeyBlock whatever the query block, so every query sees
    // the same blocks in the same order: results do not depend on how a prompt is chunked.
    const KeyRange kr = prefill_key_range(P, hc.size(), q_pos, t0, t1, p.window, kKeyBlock);
    const int64_t j_begin = kr.begin, j_end = kr.end;

    std::fill(acc, acc + static_cast<size_t>(nrows) * hd, 0.0f);
    std::fill(m, m + nrows, kNegInf);
    std::fill(l, l + nrows, 0.0);

    // Key block [kb, kb + nk) as f32 rows (converted from F16 / Q8_0 / Q4_0 into the thread's buffers).
    auto load = [&](int64_t kb, int nk, bool with_v, const float*& Kb, const float*& Vb) {
      if (f16) {
        f16_to_f32(static_cast<const uint16_t*>(hc.k_data()) + kb * hd, Kf, nk * hd);
        if (with_v) f16_to_f32(static_cast<const uint16_t*>(hc.v_data()) + kb * hd, Vf, nk * hd);
        Kb = Kf;
        Vb = Vf;
      } else if (kv_type_quantized(k_type)) {
        const auto row = static_cast<size_t>(kb);
        dequantize_kv_rows(k_type, static_cast<const uint8_t*>(hc.k_data()) + row * hc.k_row_bytes(), Kf, nk, hd);
        if (with_v)
          dequantize_kv_rows(v_type, static_cast<const uint8_t*>(hc.v_data()) + row * hc.v_row_bytes(), Vf, nk, hd);
        Kb = Kf;
        Vb = Vf;
      } else {
        Kb = static_cast<const float*>(hc.k_data()) + kb * hd;
        Vb = static_cast<const float*>(hc.v_data()) + kb * hd;
      }
    };
    // F16 rows [kb, kb + kKeyBlock) of base (K or V), clipped to the task's range, into L2.
    auto prefetch_block = [&](const void* base, int64_t kb) {
      if (!prefetch || kb >= j_end) return;
      const auto n = static_cast<size_t>(std::min<int64_t>(kKeyBlock, j_end - kb) * hd);
      prefetch_l2(static_cast<const uint16_t*>(base) + kb * hd, n * sizeof(uint16_t));
    };
    // dst[r * stride + j] = q_r . k_j (unscaled, unmasked).
    auto qk = [&](int nk, const float* Kb, float* dst, size_t stride) {
      if (exact_dot) {
        for (int r = 0; r < nrows; ++r)
          for (int j = 0; j < nk; ++j)
            dst[r * stride + j] = dot_f32_acc64(qrows[r], Kb + static_cast<size_t>(j) * hd, hd);
      } else {
        qk_tile(qrows, nrows, Kb, nk, hd, dst, static_cast<int>(stride), packed ? qpack : nullptr);
      }
    };
    // dst[r * stride + j] = scale * q_r . k_j with the causal / sliding-window mask (-inf).
    auto scores = [&](int64_t kb, int nk, const float* Kb, float* dst, size_t stride) {
      qk(nk, Kb, dst, stride);
      for (int r = 0; r < nrows; ++r)
        mask_scale_row(dst + r * stride, nk, P + kb, q_pos[t0 + r / G], p.window, p.scale);
    };
    // scores(), and m[r] = max(m[r], the row's maximum) in the same pass as the mask and scale.
    auto scores_max = [&](int64_t kb, int nk, const float* Kb, float* dst, size_t stride) {
      qk(nk, Kb, dst, stride);
      for (int r = 0; r < nrows; ++r)
        m[r] = std::max(m[r], mask_scale_max_row(dst + r * stride, nk, P + kb, q_pos[t0 + r / G], p.window, p.scale));
    };

    if (!f16) {
      // F32, Q8_0 and Q4_0 caches (f32 queries, f32 scores): one pass, acc and l are rescaled whenever a
      // row's running max grows.
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb, *Vb;
        load(kb, nk, true, Kb, Vb);
        scores(kb, nk, Kb, S, kKeyBlock);
        for (int r = 0; r < nrows; ++r) {
          float* Sr = S + static_cast<size_t>(r) * kKeyBlock;
          const float rmax = row_max(Sr, nk);
          if (rmax == kNegInf) {
            std::fill(Sr, Sr + nk, 0.0f);
            continue;
          }
          const float m_new = online_softmax_rescale(m[r], rmax, l[r], acc + static_cast<size_t>(r) * hd, hd);
          l[r] += exp_sum_row(Sr, nk, m_new, Sr);
          m[r] = m_new;
        }
        pv_tile(S, kKeyBlock, nrows, Vb, nk, hd, acc);
      }
      for (int r = 0; r < nrows; ++r)
        scale_f32(acc + static_cast<size_t>(r) * hd, l[r] > 0.0 ? static_cast<float>(1.0 / l[r]) : 0.0f, hd);
    } else {
      // F16 cache: like ggml, the normalized probabilities are rounded to F16 before the V
      // product, so the final max and sum are needed first; as ggml's soft_max, the exponentials
      // are taken against the final row max and summed in double. Pass 1 computes the scores and
      // the row maxima. When the visible key range fits the thread's score cache (score_keys per
      // row), pass 1 keeps the scores there, pass 2 turns each row into e^(s - max) in place and
      // sums it, pass 3 multiplies by 1 / sum, rounds to F16 and accumulates p * v: one exp per
      // score. Longer ranges compute the scores again in pass 2 (summed block by block into the
      // same lanes, so the sum has the same bits) and in pass 3.
      const int64_t span = j_end - j_begin;
      const bool cached = span <= score_keys;
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb, *Vb;
        load(kb, nk, false, Kb, Vb);
        prefetch_block(hc.k_data(), kb + kKeyBlock);
        float* dst = cached ? score_cache + (kb - j_begin) : S;
        const size_t stride = cached ? static_cast<size_t>(score_keys) : static_cast<size_t>(kKeyBlock);
        scores_max(kb, nk, Kb, dst, stride);
      }
      if (cached) {
        for (int r = 0; r < nrows; ++r) {
          float* Sr = score_cache + static_cast<size_t>(r) * static_cast<size_t>(score_keys);
          l[r] = m[r] == kNegInf ? 0.0 : exp_sum_row(Sr, static_cast<int>(span), m[r], Sr);
        }
      } else {
        std::fill(lanes, lanes + static_cast<size_t>(nrows) * kExpSumLanes, 0.0);
        for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
          const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
          const float *Kb, *Vb;
          load(kb, nk, false, Kb, Vb);
          scores(kb, nk, Kb, S, kKeyBlock);
          for (int r = 0; r < nrows; ++r)
            if (m[r] != kNegInf)
              exp_sum_add(S + static_cast<size_t>(r) * kKeyBlock, nk, m[r], nullptr, lanes + r * kExpSumLanes);
        }
        for (int r = 0; r < nrows; ++r) l[r] = m[r] == kNegInf ? 0.0 : exp_sum_total(lanes + r * kExpSumLanes);
      }
      // l becomes the normalizer 1/sum, rounded to float as ggml's soft_max does.
      for (int r = 0; r < nrows; ++r) l[r] = l[r] > 0.0 ? static_cast<float>(1.0 / l[r]) : 0.0f;
      for (int64_t kb = j_begin; kb < j_end; kb += kKeyBlock) {
        const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j_end - kb));
        const float *Kb = nullptr, *Vb = nullptr;
        if (!cached) load(kb, nk, true, Kb, Vb);  // the cached path needs V only (converted below)
        if (cached) {
          f16_to_f32(static_cast<const uint16_t*>(hc.v_data()) + kb * hd, Vf, nk * hd);
          prefetch_block(hc.v_data(), kb + kKeyBlock);
          Vb = Vf;
        } else {
          scores(kb, nk, Kb, S, kKeyBlock);
        }
        for (int r = 0; r < nrows; ++r) {
          float* Pr = S + static_cast<size_t>(r) * kKeyBlock;
          if (m[r] == kNegInf) {
            std::fill(Pr, Pr + nk, 0.0f);
          } else if (cached) {
            scale_round_f16_row(score_cache + static_cast<size_t>(r) * static_cast<size_t>(score_keys) + (kb - j_begin),
                                nk, static_cast<float>(l[r]), Pr);
          } else {
            softmax_f16_row(S + static_cast<size_t>(r) * kKeyBlock, nk, m[r], static_cast<float>(l[r]), Pr);
          }
        }
        pv_tile(S, kKeyBlock, nrows, Vb, nk, hd, acc);
      }
    }
    for (int r = 0; r < nrows; ++r) {
      float* o = out + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
      std::copy(acc + static_cast<size_t>(r) * hd, acc + static_cast<size_t>(r + 1) * hd, o);
    }
  }
}

}  // namespace snapkv::attn
