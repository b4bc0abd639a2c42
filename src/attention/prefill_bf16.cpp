// BF16 prefill attention (PrefillAttention::BF16): see attention/prefill_bf16.h.
//
// One task = one KV head g and a run of query tokens: R rows (G query heads x tokens, padded to a
// multiple of 16). Per block of 64 keys:
//   1. Q K^T, transposed: S[j][r] = sum_d2 dot2(Qp[d2][r], K[j][d2]), 16 rows per vector. Qp holds
//      the pre-scaled queries as bf16 pairs (dims 2 d2, 2 d2 + 1 of row r in one 32-bit word),
//      packed once per task; a key row converted to bf16 is already a row of such pairs, broadcast
//      one word at a time. vdpbf16ps adds both products of a pair into an f32 lane.
//   2. Online softmax over the 16-row vectors (max, rescale, e^(s - m), sum) — rows are lanes, so
//      no horizontal reductions; the probabilities of keys 2 j2 and 2 j2 + 1 are rounded to bf16
//      and interleaved into one word per row: W[j2][r].
//   3. P V: acc[r][d] += dot2(W[j2][r] broadcast, Vp[j2][d]) with Vp[j2][d] = the bf16 pair
//      (v_{2 j2}[d], v_{2 j2 + 1}[d]), 16 dims per vector, packed per block.
// Key blocks start at multiples of 64 of the head's entries whatever the query run, so a row's
// result depends only on its own query and position: not on the chunking or the thread count.
#include "attention/prefill_bf16.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "attention/amx.h"
#include "attention/positions.h"
#include "attention/prefill.h"
#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "attention/tiles_amx.h"
#include "core/kv_rows.h"
#include "snapkv/error.h"

namespace snapkv::attn {

namespace {

constexpr int kKB = 64;  // keys per block
constexpr int kLanes = 16;
// Query rows per task: twice the exact kernel's, so each key/value block converted to bf16 (and
// read from the cache) serves more rows.
constexpr int kTargetRows = 128;
constexpr int kMaxTokens = 64;

int block_tokens(int G) { return std::clamp(kTargetRows / G, 1, kMaxTokens); }

size_t block_rows(const AttentionParams& p) {
  const int G = p.n_head / p.n_head_kv;
  return static_cast<size_t>(block_tokens(G)) * static_cast<size_t>(G);
}

size_t padded_rows(const AttentionParams& p) { return (block_rows(p) + kLanes - 1) / kLanes * kLanes; }

// Offsets (in floats; all multiples of 16) of one thread's buffers.
struct Layout {
  size_t qp, kf, vf, kw, vp, s, w, wt, acc, m, l, corr, qpos, total;
  explicit Layout(const AttentionParams& p) {
    const size_t R = padded_rows(p), hd = static_cast<size_t>(p.head_dim), hd2 = hd / 2;
    size_t o = 0;
    auto take = [&](size_t n) {
      const size_t at = o;
      o += (n + kLanes - 1) / kLanes * kLanes;
      return at;
    };
    qp = take(hd2 * R);       // uint32 [hd/2][R]
    kf = take(kKB * hd);      // f32 key rows of the block
    vf = take(kKB * hd);      // f32 value rows of the block
    kw = take(kKB * hd2);     // uint32 [64][hd/2]: bf16 key rows
    vp = take(kKB / 2 * hd);  // uint32 [32][hd]: bf16 value pairs
    s = take(kKB * R);        // f32 [64][R]: scores, transposed
    w = take(kKB / 2 * R);    // uint32 [32][R]: bf16 probability pairs
    wt = take(R * kKB / 2);   // uint32 [R][32]: the same transposed (AMX tiles only)
    acc = take(R * hd);       // f32 [R][hd]
    m = take(R);
    l = take(R);
    corr = take(R);
    qpos = take(R);  // int32
    total = o;
  }
};

}  // namespace

#if SNAPKV_ATTN_BF16

namespace {

// e^x for x <= 0 or -inf (a NaN stays NaN) with relative error < 7e-6 (x >= -87), for
// probabilities that are rounded to bf16 (relative step 2^-8) right after: e^x = 2^f 2^n,
// t = x log2(e) clamped at -200, n = round(t), f = t - n in [-0.5, 0.5],
// 2^f = 1 + f (c1 + f (c2 + f (c3 + f c4))) (a least-squares fit on Chebyshev nodes reweighted
// toward minimax: relative error 2.9e-6, exactly 1 at f = 0; the rounding of t adds up to 4e-6 at
// x = -87), and 2^n by vscalefps (-inf -> 2^-200 underflows to 0). 9 instructions against
// exp16's ~25.
inline __m512 exp16_bf16(__m512 x) {
  // max(-200, t): vmaxps returns its second operand when one is NaN, so NaN passes through.
  const __m512 t = _mm512_maskz_max_ps(0xFFFF, _mm512_set1_ps(-200.0f), _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)));
  const __m512 n = _mm512_maskz_roundscale_ps(0xFFFF, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(0.00958285f), f, _mm512_set1_ps(0.05590643f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0.24024099f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0.6931242f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(0xFFFF, q, n);
}

// 32 f32 -> 32 bf16 (round to nearest even), lo in the low half.
inline __m512i bf16x32(__m512 lo, __m512 hi) { return std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)); }

// 32 f16 -> 32 bf16 (exact widening to f32, then round to nearest even).
inline __m512i bf16x32_from_f16(const uint16_t* x) {
  const __m512 lo = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  const __m512 hi = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16)));
  return bf16x32(lo, hi);
}

// Rows [0, n) of f32 (row stride hd) -> bf16 rows as pair words: dst[j][d2] (hd / 2 words per row).
void pack_rows_bf16(const float* src, int n, int hd, uint32_t* dst) {
  for (int j = 0; j < n; ++j) {
    const float* x = src + static_cast<size_t>(j) * hd;
    uint32_t* y = dst + static_cast<size_t>(j) * (hd / 2);
    for (int d = 0; d < hd; d += 32)
      _mm512_storeu_si512(y + d / 2, bf16x32(_mm512_loadu_ps(x + d), _mm512_loadu_ps(x + d + 16)));
  }
}

// The same from F16 rows.
void pack_rows_bf16(const uint16_t* src, int n, int hd, uint32_t* dst) {
  for (int j = 0; j < n; ++j) {
    const uint16_t* x = src + static_cast<size_t>(j) * hd;
    uint32_t* y = dst + static_cast<size_t>(j) * (hd / 2);
    for (int d = 0; d < hd; d += 32) _mm512_storeu_si512(y + d / 2, bf16x32_from_f16(x + d));
  }
}

// Value rows [0, n) (f32 or f16, stride hd) -> Vp[j2][d] = (bf16 v_{2 j2}[d], bf16 v_{2 j2 + 1}[d]);
// a missing odd row is zero. Writes ceil(n / 2) pair rows.
inline __m512i load_bf16x32(const float* x) { return bf16x32(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)); }
inline __m512i load_bf16x32(const uint16_t* x) { return bf16x32_from_f16(x); }

template <typename T>
void pack_value_pairs(const T* src, int n, int hd, uint32_t* dst) {
  alignas(64) static constexpr uint16_t kLo[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                   8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t kHi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                   24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo_idx = _mm512_load_si512(kLo), hi_idx = _mm512_load_si512(kHi);
  for (int j = 0; j < n; j += 2) {
    const T* a = src + static_cast<size_t>(j) * hd;
    const T* b = a + hd;
    const bool has_b = j + 1 < n;
    uint32_t* y = dst + static_cast<size_t>(j / 2) * hd;
    for (int d = 0; d < hd; d += 32) {
      const __m512i va = load_bf16x32(a + d);
      const __m512i vb = has_b ? load_bf16x32(b + d) : _mm512_setzero_si512();
      _mm512_storeu_si512(y + d, _mm512_permutex2var_epi16(va, lo_idx, vb));
      _mm512_storeu_si512(y + d + 16, _mm512_permutex2var_epi16(va, hi_idx, vb));
    }
  }
}

// S[j][c * 16 ..] for keys [j0, j0 + NK) and row chunks [c0, c0 + NC): NK x NC accumulators.
template <int NK, int NC>
inline void qk_tile(const uint32_t* Qp, size_t R, const uint32_t* Kw, int hd2, int j0, int c0, float* S) {
  __m512 acc[NK][NC];
  for (int k = 0; k < NK; ++k)
    for (int c = 0; c < NC; ++c) acc[k][c] = _mm512_setzero_ps();
  for (int d2 = 0; d2 < hd2; ++d2) {
    __m512bh q[NC];
    for (int c = 0; c < NC; ++c)
      q[c] = std::bit_cast<__m512bh>(
          _mm512_loadu_si512(Qp + static_cast<size_t>(d2) * R + static_cast<size_t>(c0 + c) * kLanes));
    for (int k = 0; k < NK; ++k) {
      const __m512bh kv = std::bit_cast<__m512bh>(
          _mm512_set1_epi32(static_cast<int>(Kw[static_cast<size_t>(j0 + k) * static_cast<size_t>(hd2) + d2])));
      for (int c = 0; c < NC; ++c) acc[k][c] = _mm512_dpbf16_ps(acc[k][c], q[c], kv);
    }
  }
  for (int k = 0; k < NK; ++k)
    for (int c = 0; c < NC; ++c)
      _mm512_storeu_ps(S + static_cast<size_t>(j0 + k) * R + static_cast<size_t>(c0 + c) * kLanes, acc[k][c]);
}

template <int NC>
void qk_block(const uint32_t* Qp, size_t R, const uint32_t* Kw, int hd2, int nk, int c0, float* S) {
  int j = 0;
  for (; j + 4 <= nk; j += 4) qk_tile<4, NC>(Qp, R, Kw, hd2, j, c0, S);
  for (; j < nk; ++j) qk_tile<1, NC>(Qp, R, Kw, hd2, j, c0, S);
}

// acc[r][d0 + ...] += sum_j2 W[j2][r] . Vp[j2][d0 + ...] for rows [r0, r0 + NR), ND 16-dim chunks.
template <int NR, int ND>
inline void pv_tile(const uint32_t* W, size_t R, const uint32_t* Vp, int hd, int np, int r0, int d0, float* acc) {
  __m512 a[NR][ND];
  for (int r = 0; r < NR; ++r)
    for (int d = 0; d < ND; ++d) a[r][d] = _mm512_loadu_ps(acc + static_cast<size_t>(r0 + r) * hd + d0 + d * kLanes);
  for (int j2 = 0; j2 < np; ++j2) {
    __m512bh v[ND];
    for (int d = 0; d < ND; ++d)
      v[d] = std::bit_cast<__m512bh>(_mm512_loadu_si512(Vp + static_cast<size_t>(j2) * hd + d0 + d * kLanes));
    for (int r = 0; r < NR; ++r) {
      const __m512bh w = std::bit_cast<__m512bh>(
          _mm512_set1_epi32(static_cast<int>(W[static_cast<size_t>(j2) * R + static_cast<size_t>(r0 + r)])));
      for (int d = 0; d < ND; ++d) a[r][d] = _mm512_dpbf16_ps(a[r][d], w, v[d]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int d = 0; d < ND; ++d) _mm512_storeu_ps(acc + static_cast<size_t>(r0 + r) * hd + d0 + d * kLanes, a[r][d]);
}

template <int ND>
void pv_rows(const uint32_t* W, size_t R, const uint32_t* Vp, int hd, int np, int nrows, int d0, float* acc) {
  int r = 0;
  for (; r + 4 <= nrows; r += 4) pv_tile<4, ND>(W, R, Vp, hd, np, r, d0, acc);
  for (; r < nrows; ++r) pv_tile<1, ND>(W, R, Vp, hd, np, r, d0, acc);
}

void pv_block(const uint32_t* W, size_t R, const uint32_t* Vp, int hd, int np, int nrows, float* acc) {
  const int nd = hd / kLanes;  // even: hd % 32 == 0
  int d = 0;
  for (; d + 4 <= nd; d += 4) pv_rows<4>(W, R, Vp, hd, np, nrows, d * kLanes, acc);
  if (d + 2 <= nd) pv_rows<2>(W, R, Vp, hd, np, nrows, d * kLanes, acc);
}

}  // namespace

size_t prefill_bf16_thread_floats(const AttentionParams& p) { return Layout(p).total; }

void attention_prefill_bf16(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                            const KVLayerCache& cache, float* out, float* scratch, int n_threads) {
  if (!bf16_prefill_shape(p)) throw Error("attention: BF16 prefill needs head_dim % 32 == 0");
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim, hd2 = hd / 2;
  const int QB = block_tokens(G);
  const int64_t nqb = (n_q + QB - 1) / QB;
  const int64_t n_tasks = nqb * p.n_head_kv;
  const KVType k_type = cache.heads[0].k_type();
  const KVType v_type = cache.heads[0].v_type();  // == k_type unless both are quantized
  const Layout L(p);
  const bool use_amx = amx_usable();

#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (int64_t task = 0; task < n_tasks; ++task) {
#if SNAPKV_ATTN_AMX
    if (use_amx) amx::configure();
#endif
    const PrefillTask tk = prefill_task(task, n_q, QB, G);
    const int g = tk.g;
    const int64_t t0 = tk.t0, t1 = tk.t1;
    const int nrows = tk.nrows;
    const size_t R = (static_cast<size_t>(nrows) + kLanes - 1) / kLanes * kLanes;
    const int NCH = static_cast<int>(R / kLanes);
    float* base = scratch + static_cast<size_t>(omp_get_thread_num()) * L.total;
    auto* Qp = reinterpret_cast<uint32_t*>(base + L.qp);
    float* Kf = base + L.kf;
    float* Vf = base + L.vf;
    auto* Kw = reinterpret_cast<uint32_t*>(base + L.kw);
    auto* Vp = reinterpret_cast<uint32_t*>(base + L.vp);
    float* S = base + L.s;
    auto* W = reinterpret_cast<uint32_t*>(base + L.w);
    [[maybe_unused]] auto* Wt = reinterpret_cast<uint32_t*>(base + L.wt);
    float* acc = base + L.acc;
    float* m = base + L.m;
    float* l = base + L.l;
    float* corr = base + L.corr;
    auto* qp = reinterpret_cast<int32_t*>(base + L.qpos);

    // Row r = (token t0 + r / G, query head g * G + r % G); padded rows repeat the last row's
    // position and have zero queries (their results are dropped).
    for (size_t r = 0; r < R; ++r) {
      const int rr = std::min(static_cast<int>(r), nrows - 1);
      qp[r] = q_pos[t0 + rr / G];
    }
    {
      alignas(64) float qs[512];
      for (int d2 = 0; d2 < hd2; ++d2)
        for (size_t r = static_cast<size_t>(nrows); r < R; ++r) Qp[static_cast<size_t>(d2) * R + r] = 0;
      for (int r = 0; r < nrows; ++r) {
        const float* qr = q + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
        for (int d0 = 0; d0 < hd; d0 += 512) {
          const int n = std::min(512, hd - d0);
          for (int d = 0; d < n; ++d) qs[d] = qr[d0 + d] * p.scale;
          alignas(64) uint32_t words[256];
          pack_rows_bf16(qs, 1, n, words);
          for (int k = 0; k < n / 2; ++k) Qp[static_cast<size_t>(d0 / 2 + k) * R + static_cast<size_t>(r)] = words[k];
        }
      }
    }
    std::fill(acc, acc + R * static_cast<size_t>(hd), 0.0f);
    std::fill(m, m + R, kNegInf);
    std::fill(l, l + R, 0.0f);

    const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
    const int32_t* P = hc.pos_data();
    const KeyRange kr = prefill_key_range(P, hc.size(), q_pos, t0, t1, p.window, kKB);
    const int64_t j_begin = kr.begin, j_end = kr.end, qmin = kr.qmin, qmax = kr.qmax;
    const __m512 neg_inf = _mm512_set1_ps(kNegInf);
    const __m512i window = _mm512_set1_epi32(p.window);

    for (int64_t kb = j_begin; kb < j_end; kb += kKB) {
      const int nk = static_cast<int>(std::min<int64_t>(kKB, j_end - kb));
      const int np = (nk + 1) / 2;
      // Key and value rows as f32, then bf16.
      if (k_type == KVType::F16) {
        pack_rows_bf16(static_cast<const uint16_t*>(hc.k_data()) + kb * hd, nk, hd, Kw);
        pack_value_pairs(static_cast<const uint16_t*>(hc.v_data()) + kb * hd, nk, hd, Vp);
      } else if (kv_type_quantized(k_type)) {
        const auto row = static_cast<size_t>(kb);
        dequantize_kv_rows(k_type, static_cast<const uint8_t*>(hc.k_data()) + row * hc.k_row_bytes(), Kf, nk, hd);
        dequantize_kv_rows(v_type, static_cast<const uint8_t*>(hc.v_data()) + row * hc.v_row_bytes(), Vf, nk, hd);
        pack_rows_bf16(Kf, nk, hd, Kw);
        pack_value_pairs(static_cast<const float*>(Vf), nk, hd, Vp);
      } else {
        pack_rows_bf16(static_cast<const float*>(hc.k_data()) + kb * hd, nk, hd, Kw);
        pack_value_pairs(static_cast<const float*>(hc.v_data()) + kb * hd, nk, hd, Vp);
      }

      // 1. Scores.
#if SNAPKV_ATTN_AMX
      if (use_amx) amx::qk_block(Qp, R, Kw, hd2, nk, NCH, S);
#endif
      for (int c0 = 0; c0 < NCH && !use_amx; c0 += 4) {
        switch (std::min(4, NCH - c0)) {
          case 4:
            qk_block<4>(Qp, R, Kw, hd2, nk, c0, S);
            break;
          case 3:
            qk_block<3>(Qp, R, Kw, hd2, nk, c0, S);
            break;
          case 2:
            qk_block<2>(Qp, R, Kw, hd2, nk, c0, S);
            break;
          default:
            qk_block<1>(Qp, R, Kw, hd2, nk, c0, S);
            break;
        }
      }
      // 2. Mask, online softmax, probabilities as bf16 pairs.
      const bool causal_edge = P[kb + nk - 1] > qmin;
      const bool window_edge = p.window > 0 && qmax - P[kb] >= p.window;
      bool rescale = false;
      for (int c = 0; c < NCH; ++c) {
        float* Sc = S + static_cast<size_t>(c) * kLanes;
        const __m512i qv = _mm512_loadu_si512(qp + c * kLanes);
        // The masked score of key j (stored back when a mask applies).
        auto score = [&](int j) {
          __m512 s = _mm512_loadu_ps(Sc + static_cast<size_t>(j) * R);
          if (causal_edge || window_edge) {
            const __m512i kp = _mm512_set1_epi32(P[kb + j]);
            __mmask16 masked = _mm512_cmpgt_epi32_mask(kp, qv);
            if (window_edge) masked |= _mm512_cmpge_epi32_mask(_mm512_sub_epi32(qv, kp), window);
            s = _mm512_mask_mov_ps(s, masked, neg_inf);
            _mm512_storeu_ps(Sc + static_cast<size_t>(j) * R, s);
          }
          return s;
        };
        auto vmax = [](__m512 a, __m512 b) { return _mm512_maskz_max_ps(0xFFFF, a, b); };
        // Four independent chains (vmaxps latency, not throughput, bounds one chain).
        __m512 b0 = neg_inf, b1 = neg_inf, b2 = neg_inf, b3 = neg_inf;
        int jm = 0;
        for (; jm + 4 <= nk; jm += 4) {
          b0 = vmax(b0, score(jm));
          b1 = vmax(b1, score(jm + 1));
          b2 = vmax(b2, score(jm + 2));
          b3 = vmax(b3, score(jm + 3));
        }
        for (; jm < nk; ++jm) b0 = vmax(b0, score(jm));
        const __m512 bm = vmax(vmax(b0, b1), vmax(b2, b3));
        const __m512 m_old = _mm512_loadu_ps(m + c * kLanes);
        const __m512 m_new = _mm512_maskz_max_ps(0xFFFF, m_old, bm);
        // Rows that have seen no visible key keep m = -inf; their exponentials use 0 (all give 0).
        const __m512 m_use =
            _mm512_mask_mov_ps(m_new, _mm512_cmp_ps_mask(m_new, neg_inf, _CMP_EQ_OQ), _mm512_setzero_ps());
        const __m512 cr = exp16(_mm512_sub_ps(m_old, m_use));
        if (_mm512_cmp_ps_mask(m_old, m_new, _CMP_NEQ_UQ) != 0) rescale = true;
        __m512 sum = _mm512_mul_ps(_mm512_loadu_ps(l + c * kLanes), cr);
        for (int j2 = 0; j2 < np; ++j2) {
          const int j = 2 * j2;
          const __m512 e0 = exp16_bf16(_mm512_sub_ps(_mm512_loadu_ps(Sc + static_cast<size_t>(j) * R), m_use));
          const __m512 e1 = j + 1 < nk
                                ? exp16_bf16(_mm512_sub_ps(_mm512_loadu_ps(Sc + static_cast<size_t>(j + 1) * R), m_use))
                                : _mm512_setzero_ps();
          // Interleave: word r = (bf16 e0[r], bf16 e1[r]).
          const __m512i pr = bf16x32(e0, e1);  // e0 in elements 0-15, e1 in 16-31
          alignas(64) static constexpr uint16_t kMix[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                            21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                            11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
          const __m512i w = _mm512_permutexvar_epi16(_mm512_load_si512(kMix), pr);
          _mm512_storeu_si512(W + static_cast<size_t>(j2) * R + static_cast<size_t>(c) * kLanes, w);
          // The normalizer sums the probabilities as rounded (the weights P V uses): the output is
          // then a true weighted average of the values. bf16 e0 = w << 16, bf16 e1 = w & 0xFFFF0000.
          const __m512 r0 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, w, 16));
          const __m512 r1 = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(-65536)));
          sum = _mm512_add_ps(sum, _mm512_add_ps(r0, r1));
        }
        _mm512_storeu_ps(l + c * kLanes, sum);
        _mm512_storeu_ps(m + c * kLanes, m_new);
        _mm512_storeu_ps(corr + c * kLanes, cr);
      }
      if (rescale) {
        for (int r = 0; r < nrows; ++r)
          if (corr[r] != 1.0f) scale_f32(acc + static_cast<size_t>(r) * hd, corr[r], hd);
      }
      // 3. P V.
#if SNAPKV_ATTN_AMX
      if (use_amx) {
        // Whole 16-pair k steps: the pairs past np get zero weights and zero (not stale) values.
        const int np16 = (np + 15) / 16 * 16;
        std::fill(Vp + static_cast<size_t>(np) * hd, Vp + static_cast<size_t>(np16) * hd, 0u);
        amx::transpose_probabilities(W, R, np, NCH, Wt);
        amx::pv_block(Wt, Vp, hd, np, NCH, acc);
        continue;
      }
#endif
      pv_block(W, R, Vp, hd, np, nrows, acc);
    }
    for (int r = 0; r < nrows; ++r) {
      float* o = out + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      const float* a = acc + static_cast<size_t>(r) * hd;
      for (int d = 0; d < hd; ++d) o[d] = a[d] * inv;
    }
#if SNAPKV_ATTN_AMX
    if (use_amx) _tile_release();
#endif
  }
}

#else

size_t prefill_bf16_thread_floats(const AttentionParams& p) { return Layout(p).total; }

void attention_prefill_bf16(const AttentionParams&, const float*, const int32_t*, int64_t, const KVLayerCache&, float*,
                            float*, int) {
  throw Error("attention: this build has no AVX512-BF16 (prefill attention 'bf16' is unavailable)");
}

#endif

}  // namespace snapkv::attn
