// INT8 prefill attention (PrefillAttention::Int8): see attention/prefill_int8.h.
//
// Per call, every KV head's keys and values are quantized to int8 in blocks of 64 entries at
// multiples of 64 of the head: keys with one f32 scale per 32 dims of a row, transposed by 4-dim
// words, Kq[d4][j] = the int32 word holding dims 4 d4 .. 4 d4 + 3 of key j, followed by the scales
// [hd / 32][64]; values with one scale per row, interleaved by 4 keys, Vq[j4][d] = the word holding
// dim d of keys 4 j4 .. 4 j4 + 3, followed by the 64 scales. One task = one KV head g and a run of
// query tokens (G query heads x tokens); its query rows are quantized as the keys (one scale per
// 32 dims). Per block of 64 keys:
//   1. Q K^T with keys in lanes: a query row's 4-dim word is broadcast and multiplied with 8 keys'
//      words by vpmaddubsw(|q|, sign(k, q)) (pairs of int8 products summed to int16, at most
//      2 x 127 x 127: no saturation), vpmaddwd by ones (int32) and vpaddd, or one vpdpbusd where
//      the CPU has VNNI (int8_dot.h: the same integers); no horizontal sums.
//      Score = sum over the 32-dim groups g of the exact int32 sum of g x (scale_k,g x scale_q,g).
//      Scales per 32 dims rather than per row: Gemma 3's keys have a few channels ~30x larger
//      than the median one, which a row scale spreads over all 256 dims (docs/attention.md, "INT8 prefill").
//   2. Mask (causal, sliding window) and online softmax per row in f32 (row sums in double); the
//      weights w_j = p_j x scale_v_j quantized to 7 bits per row and block.
//   3. P V with values in lanes: a row's word of 4 weights is broadcast and multiplied with 8 dims'
//      words of 4 values (vpmaddubsw on the unsigned weights, at most 2 x 127 x 127), vpmaddwd,
//      vpaddd (or vpdpbusd); the int32 sums times the row's weight scale are added to its f32 accumulators.
#include "attention/prefill_int8.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention/int8_dot.h"
#include "attention/positions.h"
#include "attention/prefill.h"
#include "attention/softmax_simd.h"
#include "core/rows_view.h"
#include "snapkv/error.h"

namespace snapkv::attn {

namespace {

constexpr int kKB = 64;     // keys per block
constexpr int kGroup = 32;  // dims per query or key scale
// Query rows per task: each quantized block of keys and values is read once for them all.
constexpr int kTargetRows = 64;
constexpr int kMaxTokens = 64;

int block_tokens(int G) { return std::clamp(kTargetRows / G, 1, kMaxTokens); }

size_t block_rows(const AttentionParams& p) {
  const int G = p.n_head / p.n_head_kv;
  return static_cast<size_t>(block_tokens(G)) * static_cast<size_t>(G);
}

// Bytes of the 64 quantized keys of a block: 64 x head_dim int8, then [head_dim / 32][64] f32 scales.
size_t key_half_bytes(int hd) {
  return static_cast<size_t>(kKB) * static_cast<size_t>(hd) + kKB * sizeof(float) * static_cast<size_t>(hd / kGroup);
}
// Bytes of the 64 quantized values of a block: 64 x head_dim int8, then 64 f32 scales.
size_t value_half_bytes(int hd) { return static_cast<size_t>(kKB) * static_cast<size_t>(hd) + kKB * sizeof(float); }
// Bytes of one quantized block: the keys, then the values (multiples of 32: both stay aligned).
size_t block_bytes(int hd) { return key_half_bytes(hd) + value_half_bytes(hd); }

// Offsets (in floats; multiples of 8, so 32-byte aligned) of one thread's buffers.
struct Layout {
  size_t qa, qs, sq, s, acc, m, l, w, ws, row, total;
  explicit Layout(const AttentionParams& p) {
    const size_t R = block_rows(p), hd = static_cast<size_t>(p.head_dim);
    size_t o = 0;
    auto take = [&](size_t n) {
      const size_t at = o;
      o += (n + 7) / 8 * 8;
      return at;
    };
    qa = take(R * hd / 4);   // int8 [R][hd]: |q8|
    qs = take(R * hd / 4);   // int8 [R][hd]: q8
    sq = take(R * hd / 32);  // f32 [R][hd / 32]: query scales per 32 dims
    s = take(R * kKB);       // f32 [R][64]: scores, then weights p_j x scale_v_j
    acc = take(R * hd);      // f32 [R][hd]
    m = take(R);             // f32 [R]: running maxima
    l = take(2 * R);         // double [R]: running sums
    w = take(R * kKB / 4);   // uint8 [R][64]: the weights in 7 bits
    ws = take(R);            // f32 [R]: their scales
    row = take(hd);          // f32 [hd]: one key or value row converted to f32
    total = o;
  }
};

}  // namespace

size_t prefill_int8_thread_floats(const AttentionParams& p) { return Layout(p).total; }

size_t prefill_int8_key_bytes(const AttentionParams& p, const KVLayerCache& cache) {
  size_t blocks = 0;
  for (const auto& hc : cache.heads) blocks += static_cast<size_t>((hc.size() + kKB - 1) / kKB);
  return blocks * block_bytes(p.head_dim);
}

#if SNAPKV_ATTN_AVX2

namespace {

// 32 int32 lanes (four vectors, in order) -> 32 int8 with signed saturation, in order.
inline __m256i pack_i8x32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // per 128-bit lane: a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Largest magnitudes below this count as zero (query / key group scales, value row scales, block
// weight scales): 127 / max is then finite, and the products they scale are below any score or
// output that matters.
constexpr float kTinyMax = 1e-30f;

// Quantizes x[0..hd) x mul (hd % 32 == 0, mul > 0) to int8: returns the scale s with x mul ~= s q,
// q = round(x mul / s) in [-127, 127] (round to nearest even), the largest |x mul| at 127. A row
// whose largest |x mul| is below kTinyMax gives s = 0 and zeros; a row holding NaN, inf or a
// magnitude above 3e38 gives s = NaN.
float quantize_row_i8(const float* x, int hd, float mul, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 vmax = _mm256_setzero_ps();
  __m256 bad = _mm256_setzero_ps();
  for (int d = 0; d < hd; d += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + d), abs_mask);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(3.0e38f), _CMP_NLE_UQ));  // NaN, or beyond f32 range
    vmax = _mm256_max_ps(vmax, a);
  }
  if (_mm256_movemask_ps(bad) != 0) {
    std::memset(q, 0, static_cast<size_t>(hd));
    return std::numeric_limits<float>::quiet_NaN();
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4) * mul;
  if (!(amax >= kTinyMax)) {
    std::memset(q, 0, static_cast<size_t>(hd));
    return 0.0f;
  }
  const __m256 inv = _mm256_set1_ps(127.0f / amax * mul);
  for (int d = 0; d < hd; d += 32) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + d + 8 * k), inv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + d), pack_i8x32(v[0], v[1], v[2], v[3]));
  }
  return amax / 127.0f;
}

// The int32 word of 4 int8 values at p, broadcast to 8 lanes.
inline __m256i bcast4(const int8_t* p) {
  int32_t w;
  std::memcpy(&w, p, sizeof(w));
  return _mm256_set1_epi32(w);
}

// x[0..hd) x mul quantized by groups of 32 dims (quantize_row_i8 on each): scales[g * stride]
// = the scale of dims [32 g, 32 g + 32).
void quantize_groups_i8(const float* x, int hd, float mul, int8_t* q, float* scales, int stride) {
  for (int g = 0; g < hd / kGroup; ++g)
    scales[g * stride] = quantize_row_i8(x + g * kGroup, kGroup, mul, q + g * kGroup);
}

// Key rows [kb, kb + 64) of head hc (those past its size as zeros) -> one quantized block at dst.
void quantize_key_block(const KVHeadCache& hc, int64_t kb, int hd, float* row, uint8_t* dst) {
  auto* words = reinterpret_cast<int32_t*>(dst);                                                      // [hd / 4][64]
  auto* scales = reinterpret_cast<float*>(dst + static_cast<size_t>(kKB) * static_cast<size_t>(hd));  // [hd / 32][64]
  const int nk = static_cast<int>(std::min<int64_t>(kKB, hc.size() - kb));
  alignas(32) int8_t k8[kInt8MaxHeadDim];
  const RowsView keys = hc.keys();
  for (int j = 0; j < kKB; ++j) {
    if (j < nk) {
      keys.row(kb + j, row);
      quantize_groups_i8(row, hd, 1.0f, k8, scales + j, kKB);
    } else {
      std::memset(k8, 0, static_cast<size_t>(hd));
      for (int g = 0; g < hd / kGroup; ++g) scales[g * kKB + j] = 0.0f;
    }
    for (int d4 = 0; d4 < hd / 4; ++d4) std::memcpy(words + static_cast<size_t>(d4) * kKB + j, k8 + 4 * d4, 4);
  }
}

// Value rows [kb, kb + 64) of head hc (those past its size as zeros) -> one quantized block at
// dst: Vq[j4][d] = the int32 word of v8 of keys 4 j4 .. 4 j4 + 3 at dim d, then the 64 scales.
void quantize_value_block(const KVHeadCache& hc, int64_t kb, int hd, float* row, uint8_t* dst) {
  auto* scales = reinterpret_cast<float*>(dst + static_cast<size_t>(kKB) * static_cast<size_t>(hd));
  const int nk = static_cast<int>(std::min<int64_t>(kKB, hc.size() - kb));
  alignas(32) int8_t v8[4][kInt8MaxHeadDim];
  const RowsView values = hc.values();
  for (int j4 = 0; j4 < kKB / 4; ++j4) {
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * j4 + i;
      if (j >= nk) {
        std::memset(v8[i], 0, static_cast<size_t>(hd));
        scales[j] = 0.0f;
        continue;
      }
      values.row(kb + j, row);
      scales[j] = quantize_row_i8(row, hd, 1.0f, v8[i]);
    }
    // Interleave the four rows' bytes: word d = (v8[0][d], v8[1][d], v8[2][d], v8[3][d]).
    uint8_t* out = dst + static_cast<size_t>(j4) * static_cast<size_t>(hd) * 4;
    for (int d = 0; d < hd; d += 16) {
      auto ld = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(v8[i] + d)); };
      const __m128i a = ld(0), b = ld(1), c = ld(2), e = ld(3);
      const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
      const __m128i ce_lo = _mm_unpacklo_epi8(c, e), ce_hi = _mm_unpackhi_epi8(c, e);
      auto st = [&](int k, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * d + 16 * k), v); };
      st(0, _mm_unpacklo_epi16(ab_lo, ce_lo));
      st(1, _mm_unpackhi_epi16(ab_lo, ce_lo));
      st(2, _mm_unpacklo_epi16(ab_hi, ce_hi));
      st(3, _mm_unpackhi_epi16(ab_hi, ce_hi));
    }
  }
}

// S[r][j0 .. j0 + 16) = sum_g (sum_{d in g} q8_r[d] k8_j[d]) x (sk[g][j] x sq[r][g]) over the
// 32-dim groups g, for rows r < NR (S row stride kKB; sk [hd / 32][kKB]; sq [NR][hd / 32]): per
// group NR x 2 int32 accumulators of 8 keys, added into NR x 2 f32 ones.
template <int NR>
inline void qk_i8_tile(const int8_t* qa, const int8_t* qs, int hd, const int32_t* Kq, const float* sk, const float* sq,
                       int j0, float* S) {
  const int ng = hd / kGroup;
  __m256 f[NR][2];
  for (int r = 0; r < NR; ++r) f[r][0] = f[r][1] = _mm256_setzero_ps();
  for (int g = 0; g < ng; ++g) {
    __m256i acc[NR][2];
    for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int d4 = g * (kGroup / 4); d4 < (g + 1) * (kGroup / 4); ++d4) {
      const int32_t* kw = Kq + static_cast<size_t>(d4) * kKB + j0;
      // The key words in registers (GCC otherwise reloads them for every row).
      __m256i k0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kw));
      __m256i k1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kw + 8));
      asm("" : "+x"(k0), "+x"(k1));
      for (int r = 0; r < NR; ++r) {
        const __m256i a = bcast4(qa + static_cast<size_t>(r) * hd + 4 * d4);
        const __m256i s = bcast4(qs + static_cast<size_t>(r) * hd + 4 * d4);
        acc[r][0] = int8_dot4(acc[r][0], a, _mm256_sign_epi8(k0, s));
        acc[r][1] = int8_dot4(acc[r][1], a, _mm256_sign_epi8(k1, s));
      }
    }
    const __m256 s0 = _mm256_loadu_ps(sk + g * kKB + j0), s1 = _mm256_loadu_ps(sk + g * kKB + j0 + 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 qg = _mm256_set1_ps(sq[r * ng + g]);
      // (sum x scale_q) x scale_k: a zero sum stays 0 even where the two scales' product would
      // overflow (group maxima near 1e21).
      f[r][0] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][0]), qg), s0, f[r][0]);
      f[r][1] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][1]), qg), s1, f[r][1]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    float* Sr = S + static_cast<size_t>(r) * kKB + j0;
    _mm256_storeu_ps(Sr, f[r][0]);
    _mm256_storeu_ps(Sr + 8, f[r][1]);
  }
}

// Scores of rows [0, nrows) x keys [0, nk16) (nk16 % 16 == 0) of one block.
void qk_i8_block(const int8_t* qa, const int8_t* qs, int hd, const uint8_t* block, const float* sq, int nrows, int nk16,
                 float* S) {
  const auto* Kq = reinterpret_cast<const int32_t*>(block);
  const auto* sk = reinterpret_cast<const float*>(block + static_cast<size_t>(kKB) * static_cast<size_t>(hd));
  for (int j0 = 0; j0 < nk16; j0 += 16) {
    // 3-row tiles (6 int32 accumulators, which stay in registers, and 6 f32 ones, of which GCC
    // spills 3 once per 32-dim group; with 4 rows the int32 ones spilled), then the 2 or 1 left.
    int r = 0;
    for (; r + 3 <= nrows; r += 3) {
      const size_t o = static_cast<size_t>(r) * hd;
      qk_i8_tile<3>(qa + o, qs + o, hd, Kq, sk, sq + o / kGroup, j0, S + static_cast<size_t>(r) * kKB);
    }
    const size_t o = static_cast<size_t>(r) * hd;
    float* Sr = S + static_cast<size_t>(r) * kKB;
    if (nrows - r == 2) qk_i8_tile<2>(qa + o, qs + o, hd, Kq, sk, sq + o / kGroup, j0, Sr);
    if (nrows - r == 1) qk_i8_tile<1>(qa + o, qs + o, hd, Kq, sk, sq + o / kGroup, j0, Sr);
  }
}

// e^x for x <= 0, -inf or NaN, relative error < 7e-6 for x >= -87 (far below the int8 scores'
// rounding): 2^t with t = x log2(e) clamped at -127, n = round(t), f = t - n in [-0.5, 0.5], 2^f by
// a quartic (the coefficients of prefill_bf16.cpp's exp16_bf16: relative error 2.9e-6) and 2^n
// from the exponent bits; n = -127 gives the bits of 0, so masked keys (-inf) weigh exactly 0. A
// NaN passes (vmaxps returns its second operand when one is NaN). 11 instructions against exp8's 19.
inline __m256 exp8_fast(__m256 x) {
  const __m256 t = _mm256_max_ps(_mm256_set1_ps(-127.0f), _mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)));
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  __m256 c = _mm256_fmadd_ps(_mm256_set1_ps(0.00958285f), f, _mm256_set1_ps(0.05590643f));
  c = _mm256_fmadd_ps(c, f, _mm256_set1_ps(0.24024099f));
  c = _mm256_fmadd_ps(c, f, _mm256_set1_ps(0.6931242f));
  c = _mm256_fmadd_ps(c, f, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(c, _mm256_castsi256_ps(e));
}

// A row's scores s[0..n) (n <= 64) -> weights s[j] = e^(s[j] - m) x sv[j] (0 where the exponential
// is 0: a masked key's value scale, even NaN, does not matter), zeros from n up to 64; returns
// sum_j e^(s[j] - m) (f32 lanes) and in wmax the largest weight (NaN if one is NaN).
inline float exp_weights_block(float* s, const float* sv, int n, float m, float& wmax) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps(), vmax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  int j = 0;
  for (; j < n; j += 8) {
    __m256 e = exp8_fast(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    if (j + 8 > n)
      e = _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - j),
                                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
    sum = _mm256_add_ps(sum, e);
    const __m256 w =
        _mm256_and_ps(_mm256_mul_ps(e, _mm256_loadu_ps(sv + j)), _mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(w, w, _CMP_UNORD_Q));
    vmax = _mm256_max_ps(vmax, w);
    _mm256_storeu_ps(s + j, w);
  }
  for (; j < kKB; j += 8) _mm256_storeu_ps(s + j, _mm256_setzero_ps());
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  wmax = _mm256_movemask_ps(bad) != 0 ? std::numeric_limits<float>::quiet_NaN() : _mm_cvtss_f32(m4);
  return hsum(sum);
}

// Weights w[0..n) (zeros up to n rounded to 32) with largest value wmax -> w8 = round(127 w / wmax)
// in [0, 127] (so a pair of w8 x v8 products stays within vpmaddubsw's int16); returns the scale
// wmax / 127 (0 and zeros for wmax below kTinyMax, NaN for wmax NaN).
inline float quantize_weights(const float* w, int n, float wmax, uint8_t* w8) {
  if (!(wmax >= kTinyMax)) {
    std::memset(w8, 0, kKB);
    return wmax == wmax ? 0.0f : wmax;
  }
  const __m256 inv = _mm256_set1_ps(127.0f / wmax);
  for (int j = 0; j < n; j += 32) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(w + j + 8 * k), inv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w8 + j), pack_i8x32(v[0], v[1], v[2], v[3]));
  }
  return wmax / 127.0f;
}

// acc[r][d0 .. d0 + 16) += ws[r] x sum_j w8_r[j] v8_j[d] for rows r < NR (w8 rows of kKB bytes),
// keys [0, 4 nj4): NR x 2 int32 accumulators of 8 dims, each step four keys (int8_dot4 of the
// unsigned weights and signed values).
template <int NR>
inline void pv_i8_tile(const uint8_t* W, const float* ws, const uint8_t* Vq, int hd, int nj4, int d0, float* acc) {
  __m256i a[NR][2];
  for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = _mm256_setzero_si256();
  for (int j4 = 0; j4 < nj4; ++j4) {
    const uint8_t* v = Vq + (static_cast<size_t>(j4) * static_cast<size_t>(hd) + static_cast<size_t>(d0)) * 4;
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32));
    for (int r = 0; r < NR; ++r) {
      const __m256i w = bcast4(reinterpret_cast<const int8_t*>(W + static_cast<size_t>(r) * kKB + 4 * j4));
      a[r][0] = int8_dot4(a[r][0], w, v0);
      a[r][1] = int8_dot4(a[r][1], w, v1);
    }
  }
  for (int r = 0; r < NR; ++r) {
    const __m256 s = _mm256_set1_ps(ws[r]);
    float* o = acc + static_cast<size_t>(r) * static_cast<size_t>(hd) + d0;
    _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][0]), s, _mm256_loadu_ps(o)));
    _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][1]), s, _mm256_loadu_ps(o + 8)));
  }
}

// acc[r][:] += ws[r] x sum_j w8_r[j] v8_j for rows r < nrows, keys [0, 4 nj4).
void pv_i8_block(const uint8_t* W, const float* ws, const uint8_t* Vq, int hd, int nj4, int nrows, float* acc) {
  for (int d0 = 0; d0 < hd; d0 += 16) {
    int r = 0;
    for (; r + 3 <= nrows; r += 3)
      pv_i8_tile<3>(W + static_cast<size_t>(r) * kKB, ws + r, Vq, hd, nj4, d0, acc + static_cast<size_t>(r) * hd);
    const uint8_t* Wr = W + static_cast<size_t>(r) * kKB;
    float* ar = acc + static_cast<size_t>(r) * hd;
    if (nrows - r == 2) pv_i8_tile<2>(Wr, ws + r, Vq, hd, nj4, d0, ar);
    if (nrows - r == 1) pv_i8_tile<1>(Wr, ws + r, Vq, hd, nj4, d0, ar);
  }
}

}  // namespace

void attention_prefill_int8(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q,
                            const KVLayerCache& cache, float* out, float* scratch, uint8_t* keys, int n_threads) {
  if (!int8_prefill_shape(p)) throw Error("attention: INT8 prefill needs head_dim % 32 == 0 and <= 512");
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  const int QB = block_tokens(G);
  const int64_t nqb = (n_q + QB - 1) / QB;
  const int64_t n_tasks = nqb * p.n_head_kv;
  const Layout L(p);
  const size_t bb = block_bytes(hd);

  // Where each head's quantized blocks start in `keys`.
  std::vector<size_t> head_block(static_cast<size_t>(p.n_head_kv) + 1, 0);
  for (size_t g = 0; g < static_cast<size_t>(p.n_head_kv); ++g)
    head_block[g + 1] = head_block[g] + static_cast<size_t>((cache.heads[g].size() + kKB - 1) / kKB);
  const auto n_blocks = static_cast<int64_t>(head_block.back());

  // The entries some query of this call sees, per head (a sliding window leaves the older ones
  // out): only their blocks are quantized.
  std::vector<KeyRange> seen(static_cast<size_t>(p.n_head_kv));
  for (size_t g = 0; g < seen.size(); ++g)
    seen[g] = prefill_key_range(cache.heads[g].pos_data(), cache.heads[g].size(), q_pos, 0, n_q, p.window, kKB);

#pragma omp parallel num_threads(n_threads)
  {
    float* base = scratch + static_cast<size_t>(omp_get_thread_num()) * L.total;
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const auto g = static_cast<size_t>(
          std::upper_bound(head_block.begin(), head_block.end(), static_cast<size_t>(b)) - head_block.begin() - 1);
      const int64_t kb = (b - static_cast<int64_t>(head_block[g])) * kKB;
      if (kb < seen[g].begin || kb >= seen[g].end) continue;
      uint8_t* dst = keys + static_cast<size_t>(b) * bb;
      quantize_key_block(cache.heads[g], kb, hd, base + L.row, dst);
      quantize_value_block(cache.heads[g], kb, hd, base + L.row, dst + key_half_bytes(hd));
    }

#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < n_tasks; ++task) {
      const PrefillTask tk = prefill_task(task, n_q, QB, G);
      const int g = tk.g;
      const int64_t t0 = tk.t0, t1 = tk.t1;
      const int nrows = tk.nrows;
      auto* qa = reinterpret_cast<int8_t*>(base + L.qa);
      auto* qs = reinterpret_cast<int8_t*>(base + L.qs);
      float* sq = base + L.sq;
      float* S = base + L.s;
      float* acc = base + L.acc;
      float* m = base + L.m;
      auto* l = reinterpret_cast<double*>(base + L.l);
      auto* W8 = reinterpret_cast<uint8_t*>(base + L.w);
      float* ws = base + L.ws;

      // Row r = (token t0 + r / G, query head g * G + r % G), pre-scaled by p.scale.
      for (int r = 0; r < nrows; ++r) {
        const float* qr = q + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
        int8_t* a = qa + static_cast<size_t>(r) * hd;
        int8_t* s = qs + static_cast<size_t>(r) * hd;
        quantize_groups_i8(qr, hd, p.scale, s, sq + static_cast<size_t>(r) * hd / kGroup, 1);
        for (int d = 0; d < hd; d += 32) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + d));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + d), _mm256_abs_epi8(v));
        }
      }
      std::fill(acc, acc + static_cast<size_t>(nrows) * hd, 0.0f);
      std::fill(m, m + nrows, kNegInf);
      std::fill(l, l + nrows, 0.0);

      const KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
      const int32_t* P = hc.pos_data();
      // Key blocks start at multiples of 64 whatever the query run, and every entry is quantized
      // on its own: a row's result does not depend on the chunking.
      const KeyRange kr = prefill_key_range(P, hc.size(), q_pos, t0, t1, p.window, kKB);
      for (int64_t kb = kr.begin; kb < kr.end; kb += kKB) {
        const int nk = static_cast<int>(std::min<int64_t>(kKB, kr.end - kb));
        const uint8_t* block = keys + (head_block[static_cast<size_t>(g)] + static_cast<size_t>(kb / kKB)) * bb;
        const uint8_t* vblock = block + key_half_bytes(hd);
        const auto* sv = reinterpret_cast<const float*>(vblock + static_cast<size_t>(kKB) * static_cast<size_t>(hd));
        qk_i8_block(qa, qs, hd, block, sq, nrows, (nk + 15) / 16 * 16, S);
        // A block that every query of the task sees entirely needs no mask.
        const bool masked = P[kb + nk - 1] > kr.qmin || (p.window > 0 && kr.qmax - P[kb] >= p.window);
        for (int r = 0; r < nrows; ++r) {
          float* Sr = S + static_cast<size_t>(r) * kKB;
          uint8_t* Wr = W8 + static_cast<size_t>(r) * kKB;
          const float rmax =
              masked ? mask_scale_max_row(Sr, nk, P + kb, q_pos[t0 + r / G], p.window, 1.0f) : row_max(Sr, nk);
          if (rmax == kNegInf) {  // no visible key in this block
            std::memset(Wr, 0, kKB);
            ws[r] = 0.0f;
            continue;
          }
          const float m_new = online_softmax_rescale(m[r], rmax, l[r], acc + static_cast<size_t>(r) * hd, hd);
          float wmax = 0.0f;
          l[r] += static_cast<double>(exp_weights_block(Sr, sv, nk, m_new, wmax));
          m[r] = m_new;
          ws[r] = quantize_weights(Sr, nk, wmax, Wr);
        }
        pv_i8_block(W8, ws, vblock, hd, (nk + 3) / 4, nrows, acc);
      }
      for (int r = 0; r < nrows; ++r) {
        float* o = out + ((t0 + r / G) * p.n_head + g * G + r % G) * hd;
        // A query row holding NaN or inf (a group scale NaN) has NaN scores, which the maxima
        // skip: NaN out.
        bool nan_row = false;
        for (int gi = 0; gi < hd / kGroup; ++gi) nan_row = nan_row || std::isnan(sq[r * (hd / kGroup) + gi]);
        const float inv = nan_row      ? std::numeric_limits<float>::quiet_NaN()
                          : l[r] > 0.0 ? static_cast<float>(1.0 / l[r])
                                       : 0.0f;
        const float* a = acc + static_cast<size_t>(r) * hd;
        for (int d = 0; d < hd; ++d) o[d] = a[d] * inv;
      }
    }
  }
}

#else

void attention_prefill_int8(const AttentionParams&, const float*, const int32_t*, int64_t, const KVLayerCache&, float*,
                            float*, uint8_t*, int) {
  throw Error("attention: this build has no AVX2 (prefill attention 'int8' is unavailable)");
}

#endif

}  // namespace snapkv::attn
