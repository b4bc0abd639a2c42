// Row helpers of the blocked prefill softmax: causal/sliding-window masking with the attention
// scale, row maxima, and exponentials, 8 lanes at a time with AVX2 (16 with AVX-512, the same
// operations lane for lane; scalar otherwise).
//
// Every element goes through the same exp() whatever its place in a row (row tails are padded to a
// full vector), so a probability does not depend on how many keys a block holds; that keeps the
// prefill independent of the query chunk size.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attention/simd.h"

namespace snapkv::attn {

/// Below this exp() gives 0 (its result would be subnormal): the same in the vector and scalar code.
constexpr float kExpMinArg = -87.33654f;

/// Scalar e^x with the vector exp's range convention (0 below kExpMinArg, including -inf).
inline float exp_or_zero(float x) { return x < kExpMinArg ? 0.0f : std::exp(x); }

#if SNAPKV_ATTN_AVX2
/// exp8()'s range reduction and polynomial, x already clamped: x = n ln2 + r with |r| <= ln2 / 2
/// (ln2 split in a high part exact in f32 and a low correction, Cody & Waite 1980); returns e^r
/// by a degree-7 Taylor polynomial (truncation error r^8 / 8! < 1.3e-8, Horner's rule) and n
/// (rounded, as a float).
inline __m256 exp8_reduced(__m256 x, __m256& n) {
  n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

/// 2^n for integral n in [-126, 127] (exponent bits).
inline __m256 exp8_pow2(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

/// e^x for 8 lanes, relative error below 2e-7 (about 2 ulp) for x in [-87.3, 88.7]; 0 below that
/// range (including -inf), FLT_MAX above it, NaN for NaN: exp8_reduced's e^r scaled by 2^n
/// through the exponent bits.
inline __m256 exp8(__m256 x) {
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);  // all bits set: a NaN, propagated below
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMinArg), _CMP_LT_OQ);
  __m256 n;
  const __m256 p =
      exp8_reduced(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMinArg)), _mm256_set1_ps(88.72283f)), n);
  // n in [-126, 128]: 2^n = 2^(n/2) * 2^(n - n/2) keeps both factors normal up to n = 128.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, exp8_pow2(h)), exp8_pow2(_mm256_sub_epi32(ni, h)));
  return _mm256_or_ps(is_nan, _mm256_andnot_ps(too_small, e));
}

/// exp8(x) for the arguments of a softmax row, x = s - max <= 0 (or -inf, or NaN): the same bits
/// with one 2^n product instead of two and no upper clamp (exp16_nonpos's argument: for x in
/// [kExpMinArg, 88.37), n = round(x log2 e) <= 127, so 2^n is a normal float and p * 2^n is the
/// one rounding of the value that (p * 2^h) * 2^(n - h) rounds once). Callers pass s - max.
inline __m256 exp8_nonpos(__m256 x) {
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMinArg), _CMP_LT_OQ);
  __m256 n;
  const __m256 p = exp8_reduced(_mm256_max_ps(x, _mm256_set1_ps(kExpMinArg)), n);
  return _mm256_or_ps(is_nan, _mm256_andnot_ps(too_small, _mm256_mul_ps(p, exp8_pow2(_mm256_cvtps_epi32(n)))));
}

#if SNAPKV_ATTN_AVX512
/// exp8()'s range reduction and polynomial for 16 lanes, x already clamped: x = n ln2 + r; returns
/// e^r (degree 7, Horner) and n (rounded, as a float).
inline __m512 exp16_reduced(__m512 x, __m512& n) {
  n = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

/// 2^n for integral n in [-126, 127] (exponent bits).
inline __m512 exp16_pow2(__m512i n) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

/// e^x for 16 lanes: exp8()'s operations lane for lane (the same results, NaN and range
/// conventions included: 0 below kExpMinArg, FLT_MAX above 88.72, all-ones NaN for a NaN).
inline __m512 exp16(__m512 x) {
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMinArg), _CMP_LT_OQ);
  x = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, x, _mm512_set1_ps(kExpMinArg)),
                          _mm512_set1_ps(88.72283f));
  __m512 n;
  const __m512 p = exp16_reduced(x, n);
  // n in [-126, 128]: 2^n = 2^(n/2) * 2^(n - n/2) keeps both factors normal up to n = 128.
  const __m512i ni = _mm512_maskz_cvtps_epi32(0xFFFF, n);
  const __m512i h = _mm512_maskz_srai_epi32(0xFFFF, ni, 1);
  const __m512 e =
      _mm512_maskz_mov_ps(static_cast<__mmask16>(~too_small),
                          _mm512_mul_ps(_mm512_mul_ps(p, exp16_pow2(h)), exp16_pow2(_mm512_sub_epi32(ni, h))));
  return _mm512_mask_mov_ps(e, is_nan, _mm512_castsi512_ps(_mm512_set1_epi32(-1)));
}

/// exp16(x) for the arguments of a softmax row, x = s - max <= 0 (or -inf, or NaN): the same bits
/// in 19 instructions instead of 24. For x in [kExpMinArg, 88.37), n = round(x log2 e) lies in
/// [-126, 127], so 2^n is a normal float and the one product p * 2^n is the correctly rounded
/// value that exp16's (p * 2^h) * 2^(n - h) gives (its first product is exact, neither overflows);
/// exp16's upper clamp (88.72) does not act there. The same bits as exp16 for every x < 88.37
/// (tested); above that it differs (inf or garbage where exp16 clamps), so callers pass s - max.
inline __m512 exp16_nonpos(__m512 x) {
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMinArg), _CMP_LT_OQ);
  __m512 n;
  const __m512 p = exp16_reduced(_mm512_maskz_max_ps(0xFFFF, x, _mm512_set1_ps(kExpMinArg)), n);
  const __m512 e = _mm512_maskz_mov_ps(static_cast<__mmask16>(~too_small),
                                       _mm512_mul_ps(p, exp16_pow2(_mm512_maskz_cvtps_epi32(0xFFFF, n))));
  return _mm512_mask_mov_ps(e, is_nan, _mm512_castsi512_ps(_mm512_set1_epi32(-1)));
}

#endif

/// Loads n < 8 floats, the other lanes set to fill.
inline __m256 load_partial(const float* x, int n, float fill) {
  alignas(32) float buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = i < n ? x[i] : fill;
  return _mm256_load_ps(buf);
}
inline void store_partial(float* y, int n, __m256 v) {
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  for (int i = 0; i < n; ++i) y[i] = buf[i];
}
inline double hsum_pd(__m256d v) {
  const __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
  const __m128d s = _mm_add_pd(lo, hi);
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#endif

/// s[j] = scale * s[j] for the keys that query position qp sees, -inf for the others: key
/// positions kpos[0..n) (ascending) after qp (causal) or at distance >= window (window > 0).
inline void mask_scale_row(float* s, int n, const int32_t* kpos, int64_t qp, int window, float scale) {
  if (n <= 0) return;
  const bool all_visible = kpos[n - 1] <= qp && (window <= 0 || qp - kpos[0] < window);
  if (all_visible) {
    int j = 0;
#if SNAPKV_ATTN_AVX2
    const __m256 vs = _mm256_set1_ps(scale);
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), vs));
#endif
    for (; j < n; ++j) s[j] *= scale;
    return;
  }
  for (int j = 0; j < n; ++j) {
    const int64_t kp = kpos[j];
    s[j] = (kp > qp || (window > 0 && qp - kp >= window)) ? kNegInf : scale * s[j];
  }
}

/// max_j s[j] (-inf for an all-masked row).
inline float row_max(const float* s, int n) {
  int j = 0;
  float m = kNegInf;
#if SNAPKV_ATTN_AVX2
  if (n >= 8) {
    __m256 vm = _mm256_set1_ps(kNegInf);
    for (; j + 8 <= n; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + j));
    alignas(32) float buf[8];
    _mm256_store_ps(buf, vm);
    for (const float v : buf) m = std::max(m, v);
  }
#endif
  for (; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

/// mask_scale_row(s, n, kpos, qp, window, scale), then returns row_max(s, n): one pass over the
/// row when every key is visible (the common case), with the same products and the same maximum.
inline float mask_scale_max_row(float* s, int n, const int32_t* kpos, int64_t qp, int window, float scale) {
#if SNAPKV_ATTN_AVX2
  if (n >= 8 && kpos[n - 1] <= qp && (window <= 0 || qp - kpos[0] < window)) {
    // The same products, and row_max's 8-lane maximum and fold in its order (so a NaN score is
    // treated as row_max treats it).
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vm = _mm256_set1_ps(kNegInf);
    int j = 0;
#if SNAPKV_ATTN_AVX512
    const __m512 ws = _mm512_set1_ps(scale);
    for (; j + 16 <= n; j += 16) {
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + j), ws);
      _mm512_storeu_ps(s + j, x);
      vm = _mm256_max_ps(vm, low8(x));
      vm = _mm256_max_ps(vm, high8(x));
    }
#endif
    for (; j + 8 <= n; j += 8) {
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
      _mm256_storeu_ps(s + j, x);
      vm = _mm256_max_ps(vm, x);
    }
    alignas(32) float buf[8];
    _mm256_store_ps(buf, vm);
    float m = kNegInf;
    for (const float v : buf) m = std::max(m, v);
    for (; j < n; ++j) {
      s[j] *= scale;
      m = std::max(m, s[j]);
    }
    return m;
  }
#endif
  mask_scale_row(s, n, kpos, qp, window, scale);
  return row_max(s, n);
}

/// Lanes of a running sum of exponentials in double, as exp_sum_row keeps it: lanes 0-3 take
/// elements 0-3 of each group of 8, lanes 4-7 elements 4-7 (lane 0 only with the scalar code). A
/// row summed in pieces that start at multiples of 16 gives the same bits as one call over it.
constexpr int kExpSumLanes = 8;

/// Adds e^(s[j] - m) for j < n to the sum lane[0..kExpSumLanes) (masked -inf entries add 0); when
/// out is not null also writes out[j] = e^(s[j] - m) (out may equal s). m must be finite and at
/// least every s[j] (a row maximum).
inline void exp_sum_add(const float* s, int n, float m, float* out, double* lane) {
#if SNAPKV_ATTN_AVX2
  const __m256 vm = _mm256_set1_ps(m);
  __m256d a0 = _mm256_loadu_pd(lane), a1 = _mm256_loadu_pd(lane + 4);
  int j = 0;
  auto step = [&](__m256 e) {
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  };
#if SNAPKV_ATTN_AVX512
  // 16 exponentials at a time, summed as two groups of 8 in the order below; lanes 0-7 of the
  // 8-double register are a0 and a1 (the same adds, half the instructions).
  const __m512 wm = _mm512_set1_ps(m);
  if (j + 16 <= n) {
    __m512d a = _mm512_mask_broadcast_f64x4(_mm512_maskz_broadcast_f64x4(0x0F, a0), 0xF0, a1);
    for (; j + 16 <= n; j += 16) {
      const __m512 e = exp16_nonpos(_mm512_sub_ps(_mm512_loadu_ps(s + j), wm));
      if (out != nullptr) _mm512_storeu_ps(out + j, e);
      a = _mm512_add_pd(a, _mm512_maskz_cvtps_pd(0xFF, low8(e)));
      a = _mm512_add_pd(a, _mm512_maskz_cvtps_pd(0xFF, high8(e)));
    }
    a0 = _mm512_maskz_extractf64x4_pd(0xFF, a, 0);
    a1 = _mm512_maskz_extractf64x4_pd(0xFF, a, 1);
  }
#endif
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    if (out != nullptr) _mm256_storeu_ps(out + j, e);
    step(e);
  }
  if (j < n) {
    const __m256 e = exp8_nonpos(_mm256_sub_ps(load_partial(s + j, n - j, kNegInf), vm));
    if (out != nullptr) store_partial(out + j, n - j, e);
    step(e);
  }
  _mm256_storeu_pd(lane, a0);
  _mm256_storeu_pd(lane + 4, a1);
#else
  for (int j = 0; j < n; ++j) {
    const float e = exp_or_zero(s[j] - m);
    if (out != nullptr) out[j] = e;
    lane[0] += static_cast<double>(e);
  }
#endif
}

/// The sum the lanes hold, paired as hsum_pd(lanes 0-3 + lanes 4-7).
inline double exp_sum_total(const double* lane) {
  double c[4];
  for (int i = 0; i < 4; ++i) c[i] = lane[i] + lane[i + 4];
  return (c[0] + c[2]) + (c[1] + c[3]);
}

/// Returns sum_j e^(s[j] - m) in double (masked -inf entries add 0); when out is not null also
/// writes out[j] = e^(s[j] - m) (out may equal s). m must be finite and at least every s[j].
inline double exp_sum_row(const float* s, int n, float m, float* out) {
  double lane[kExpSumLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  exp_sum_add(s, n, m, out, lane);
  return exp_sum_total(lane);
}

/// out[j] = round_f16(e^(s[j] - m) * inv): the normalized probabilities rounded to F16 as ggml
/// does before multiplying them with an F16 V (masked -inf entries give 0). m must be finite.
inline void softmax_f16_row(const float* s, int n, float m, float inv, float* out) {
#if SNAPKV_ATTN_AVX2
  const __m256 vm = _mm256_set1_ps(m), vi = _mm256_set1_ps(inv);
  auto prob = [&](__m256 x) {
    const __m256 p = _mm256_mul_ps(exp8(_mm256_sub_ps(x, vm)), vi);
    return _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT));
  };
  int j = 0;
#if SNAPKV_ATTN_AVX512
  const __m512 wm = _mm512_set1_ps(m), wi = _mm512_set1_ps(inv);
  for (; j + 16 <= n; j += 16) {
    const __m512 p = _mm512_mul_ps(exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), wm)), wi);
    _mm512_storeu_ps(out + j,
                     _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtps_ph(0xFFFF, p, _MM_FROUND_TO_NEAREST_INT)));
  }
#endif
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, prob(_mm256_loadu_ps(s + j)));
  if (j < n) store_partial(out + j, n - j, prob(load_partial(s + j, n - j, kNegInf)));
#else
  for (int j = 0; j < n; ++j) out[j] = round_f16(exp_or_zero(s[j] - m) * inv);
#endif
}

/// out[j] = round_f16(e[j] * inv): probabilities from exponentials already taken (the cached F16
/// prefill's pass 3), rounded to F16 as ggml does before the product with an F16 V.
inline void scale_round_f16_row(const float* e, int n, float inv, float* out) {
  int j = 0;
#if SNAPKV_ATTN_AVX512
  const __m512 wi = _mm512_set1_ps(inv);
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(
        out + j, _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtps_ph(0xFFFF, _mm512_mul_ps(_mm512_loadu_ps(e + j), wi),
                                                                     _MM_FROUND_TO_NEAREST_INT)));
#endif
#if SNAPKV_ATTN_AVX2
  const __m256 vi = _mm256_set1_ps(inv);
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(e + j), vi),
                                                              _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; j < n; ++j) out[j] = round_f16(e[j] * inv);
}

}  // namespace snapkv::attn
