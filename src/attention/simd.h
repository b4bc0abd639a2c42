// Small SIMD vector helpers of the attention kernels (AVX2/F16C when available, scalar otherwise).
#pragma once

#include <cstdint>

#include "snapkv/fp16.h"
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define SNAPKV_ATTN_AVX2 1
#endif

namespace snapkv::attn {

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

namespace snapkv::attn {

#if SNAPKV_ATTN_AVX2
/// dot(a, b) for n % 8 == 0 with one 8-lane accumulator: the same operation sequence as each
/// entry of qk_tile's register tile, so a score does not depend on where it falls in a tile.
inline float dot8(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
  return hsum(acc);
}
#endif

/// S[r * s_stride + j] = dot(q[r], K[j]) for r < nr, j < nk; q[r] = qrows[r] (hd floats each),
/// K rows contiguous [nk][hd]. Register-blocked 2 rows x 4 keys when hd % 8 == 0 (AVX2), so each
/// loaded vector feeds several FMAs; f32 accumulation.
inline void qk_tile(const float* const* qrows, int nr, const float* K, int nk, int hd, float* S, int s_stride) {
#if SNAPKV_ATTN_AVX2
  if (hd % 8 == 0) {
    int r = 0;
    for (; r + 2 <= nr; r += 2) {
      const float* q0 = qrows[r];
      const float* q1 = qrows[r + 1];
      int j = 0;
      for (; j + 4 <= nk; j += 4) {
        const float* k0 = K + static_cast<size_t>(j) * hd;
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
        __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
        for (int d = 0; d < hd; d += 8) {
          const __m256 x0 = _mm256_loadu_ps(q0 + d), x1 = _mm256_loadu_ps(q1 + d);
          const __m256 y0 = _mm256_loadu_ps(k0 + d), y1 = _mm256_loadu_ps(k0 + hd + d);
          const __m256 y2 = _mm256_loadu_ps(k0 + 2 * hd + d), y3 = _mm256_loadu_ps(k0 + 3 * hd + d);
          a00 = _mm256_fmadd_ps(x0, y0, a00);
          a01 = _mm256_fmadd_ps(x0, y1, a01);
          a02 = _mm256_fmadd_ps(x0, y2, a02);
          a03 = _mm256_fmadd_ps(x0, y3, a03);
          a10 = _mm256_fmadd_ps(x1, y0, a10);
          a11 = _mm256_fmadd_ps(x1, y1, a11);
          a12 = _mm256_fmadd_ps(x1, y2, a12);
          a13 = _mm256_fmadd_ps(x1, y3, a13);
        }
        float* s0 = S + static_cast<size_t>(r) * s_stride + j;
        float* s1 = s0 + s_stride;
        s0[0] = hsum(a00);
        s0[1] = hsum(a01);
        s0[2] = hsum(a02);
        s0[3] = hsum(a03);
        s1[0] = hsum(a10);
        s1[1] = hsum(a11);
        s1[2] = hsum(a12);
        s1[3] = hsum(a13);
      }
      for (; j < nk; ++j) {
        S[static_cast<size_t>(r) * s_stride + j] = dot8(q0, K + static_cast<size_t>(j) * hd, hd);
        S[static_cast<size_t>(r + 1) * s_stride + j] = dot8(q1, K + static_cast<size_t>(j) * hd, hd);
      }
    }
    for (; r < nr; ++r)
      for (int j = 0; j < nk; ++j)
        S[static_cast<size_t>(r) * s_stride + j] = dot8(qrows[r], K + static_cast<size_t>(j) * hd, hd);
    return;
  }
#endif
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < nk; ++j)
      S[static_cast<size_t>(r) * s_stride + j] = dot_f32(qrows[r], K + static_cast<size_t>(j) * hd, hd);
}

/// acc[r][:] += sum_j P[r * p_stride + j] * V[j][:] for r < nr (acc rows contiguous [nr][hd]).
/// Register-blocked 2 rows x 32 dims when hd % 32 == 0 (AVX2): acc stays in registers over the keys.
inline void pv_tile(const float* P, int p_stride, int nr, const float* V, int nk, int hd, float* acc) {
#if SNAPKV_ATTN_AVX2
  if (hd % 32 == 0) {
    int r = 0;
    for (; r + 2 <= nr; r += 2) {
      const float* p0 = P + static_cast<size_t>(r) * p_stride;
      const float* p1 = p0 + p_stride;
      float* c0 = acc + static_cast<size_t>(r) * hd;
      float* c1 = c0 + hd;
      for (int d = 0; d < hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(c0 + d), a1 = _mm256_loadu_ps(c0 + d + 8);
        __m256 a2 = _mm256_loadu_ps(c0 + d + 16), a3 = _mm256_loadu_ps(c0 + d + 24);
        __m256 b0 = _mm256_loadu_ps(c1 + d), b1 = _mm256_loadu_ps(c1 + d + 8);
        __m256 b2 = _mm256_loadu_ps(c1 + d + 16), b3 = _mm256_loadu_ps(c1 + d + 24);
        for (int j = 0; j < nk; ++j) {
          if (p0[j] == 0.0f && p1[j] == 0.0f) continue;
          const float* v = V + static_cast<size_t>(j) * hd + d;
          const __m256 w0 = _mm256_set1_ps(p0[j]), w1 = _mm256_set1_ps(p1[j]);
          const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
          const __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
          a0 = _mm256_fmadd_ps(w0, v0, a0);
          a1 = _mm256_fmadd_ps(w0, v1, a1);
          a2 = _mm256_fmadd_ps(w0, v2, a2);
          a3 = _mm256_fmadd_ps(w0, v3, a3);
          b0 = _mm256_fmadd_ps(w1, v0, b0);
          b1 = _mm256_fmadd_ps(w1, v1, b1);
          b2 = _mm256_fmadd_ps(w1, v2, b2);
          b3 = _mm256_fmadd_ps(w1, v3, b3);
        }
        _mm256_storeu_ps(c0 + d, a0);
        _mm256_storeu_ps(c0 + d + 8, a1);
        _mm256_storeu_ps(c0 + d + 16, a2);
        _mm256_storeu_ps(c0 + d + 24, a3);
        _mm256_storeu_ps(c1 + d, b0);
        _mm256_storeu_ps(c1 + d + 8, b1);
        _mm256_storeu_ps(c1 + d + 16, b2);
        _mm256_storeu_ps(c1 + d + 24, b3);
      }
    }
    for (; r < nr; ++r)
      for (int j = 0; j < nk; ++j) {
        const float w = P[static_cast<size_t>(r) * p_stride + j];
        if (w != 0.0f) axpy_f32(acc + static_cast<size_t>(r) * hd, w, V + static_cast<size_t>(j) * hd, hd);
      }
    return;
  }
#endif
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < nk; ++j) {
      const float w = P[static_cast<size_t>(r) * p_stride + j];
      if (w != 0.0f) axpy_f32(acc + static_cast<size_t>(r) * hd, w, V + static_cast<size_t>(j) * hd, hd);
    }
}

}  // namespace snapkv::attn
