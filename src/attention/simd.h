// Small SIMD vector helpers of the attention kernels (AVX2/F16C when available, scalar otherwise;
// SNAPKV_ATTN_AVX512 marks builds where the prefill tiles use 16-lane AVX-512 registers).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/fp16.h"
#include "core/prefetch.h"
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define SNAPKV_ATTN_AVX2 1
#if defined(__AVX512F__) && defined(__AVX512VL__)  // VL: the 32 vector registers for 256-bit tiles too
#define SNAPKV_ATTN_AVX512 1
#endif
#endif

namespace snapkv::attn {

/// Score of a masked key.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if SNAPKV_ATTN_AVX2
inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}
#endif

#if SNAPKV_ATTN_AVX2
/// 8 floats from p, loaded once into a register for several FMAs: the empty asm statement hides
/// the value from GCC, which otherwise folds the load into each FMA that uses it (the AVX2 prefill
/// tiles then issued 10 loads per 8 FMAs and waited on Zen 3's two 256-bit load ports).
inline __m256 load8_in_register(const float* p) {
  __m256 v = _mm256_loadu_ps(p);
  asm("" : "+x"(v));
  return v;
}
#endif

#if SNAPKV_ATTN_AVX512
/// Lanes 0-7 and 8-15 (masked extracts: GCC 12 warns about the unmasked ones' undefined source).
inline __m256 low8(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 0)); }
inline __m256 high8(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 1)); }

/// 16 floats from p, loaded once into a register for several FMAs. The empty asm statement hides
/// the value from GCC, which otherwise folds the load into each FMA that uses it as a memory
/// operand. Zen 4 loads one 512-bit vector per cycle and issues one 512-bit FMA per cycle, so the
/// folded form left the tiles waiting on loads (the prefill P.V tile, `pv_rows_512` in tiles.h;
/// the decode score tile, `scores_tile` in decode_simd.h: Gemma 3's shape, cache-resident, score
/// tiles alone 1.65x faster in a stand-alone loop, the whole decode kernel 1.09-1.10x;
/// docs/benchmarks.md, "Decode attention: one query load per score tile").
inline __m512 load16_in_register(const float* p) {
  __m512 v = _mm512_loadu_ps(p);
  asm("" : "+v"(v));
  return v;
}
#endif

/// sum_i a[i] * b[i], f32 accumulation.
inline float dot_f32(const float* a, const float* b, int n) {
  int i = 0;
  float s = 0.0f;
#if SNAPKV_ATTN_AVX2
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  s = hsum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// sum_i a[i] * b[i] with the products (f32) accumulated in double, in order: the result is the
/// same as ggml_vec_dot_f16's scalar tail (used for rows shorter than its SIMD step).
inline float dot_f32_acc64(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(s);
}

/// Same with b in F16.
inline float dot_f32_f16_acc64(const float* a, const uint16_t* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i] * fp16_to_fp32(b[i]));
  return static_cast<float>(s);
}

/// sum_i a[i] * half(b[i]), f32 accumulation.
inline float dot_f32_f16(const float* a, const uint16_t* b, int n) {
  int i = 0;
  float s = 0.0f;
#if SNAPKV_ATTN_AVX2
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
  }
  s = hsum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) s += a[i] * fp16_to_fp32(b[i]);
  return s;
}

/// y[i] = y[i] * c (in place).
inline void scale_f32(float* y, float c, int n) {
  int i = 0;
#if SNAPKV_ATTN_AVX2
  const __m256 vc = _mm256_set1_ps(c);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vc));
#endif
  for (; i < n; ++i) y[i] *= c;
}

/// One step of the online softmax (Dao et al. 2022, FlashAttention, Alg. 1): a block whose row
/// maximum is rmax (finite) raises the running maximum m to max(m, rmax); when it grows from a
/// finite value, the running sum l and the accumulator row acc[0..hd) are scaled by e^(m - m_new).
/// Returns m_new.
inline float online_softmax_rescale(float m, float rmax, double& l, float* acc, int hd) {
  const float m_new = std::max(m, rmax);
  if (m != kNegInf && m_new != m) {
    const float corr = std::exp(m - m_new);
    l *= static_cast<double>(corr);
    scale_f32(acc, corr, hd);
  }
  return m_new;
}

/// y[i] += a * x[i].
inline void axpy_f32(float* y, float a, const float* x, int n) {
  int i = 0;
#if SNAPKV_ATTN_AVX2
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
  for (; i < n; ++i) y[i] += a * x[i];
}

/// y[i] += a * half(x[i]).
inline void axpy_f16(float* y, float a, const uint16_t* x, int n) {
  int i = 0;
#if SNAPKV_ATTN_AVX2
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + i)));
  }
#endif
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

/// dst[i] = half(src[i]) as f32.
inline void f16_to_f32(const uint16_t* src, float* dst, int n) {
  int i = 0;
#if SNAPKV_ATTN_AVX512
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
#if SNAPKV_ATTN_AVX2
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

/// Rounds to the nearest F16 value (kept as f32).
inline float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

/// dst[i] = round_f16(src[i]).
inline void round_f16_row(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
#if SNAPKV_ATTN_AVX2
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; i < n; ++i) dst[i] = round_f16(src[i]);
}

}  // namespace snapkv::attn
