// snapkv: micro-kernels for F32, F16 and BF16 weights against f32 activations (for F16 /
// BF16 the activations were first rounded to the weight type, as ggml converts them to its
// vec_dot_type). Weights are widened to f32 and multiplied with FMA; each (row, token) pair
// has one vector accumulator (16 lanes with AVX-512, 8 with AVX2) plus a scalar one for the
// columns past the last full vector.
#pragma once

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/simd.h"
#include "quant/tiling.h"

namespace snapkv::quant {

enum class FKind { F32, F16, BF16 };

template <FKind kKind>
struct KFloat {
  static constexpr int kEsz = kKind == FKind::F32 ? 4 : 2;  ///< bytes per weight element
  static constexpr int kR = 4;
  static constexpr int kRDecode = 1;
  /// No row prefetch: these stream near the read bandwidth without it, and it measured 5-27 %
  /// slower (docs/benchmarks.md, "Weight rows prefetched in the matmuls").
  static constexpr bool kPrefetchRows = false;
#if defined(SNAPKV_AVX512F)
  static constexpr int kT = 4;
  static constexpr int kW = 16;
  using V = __m512;
  static SNAPKV_INLINE V zero() { return _mm512_setzero_ps(); }
  static SNAPKV_INLINE V loadx(const float* p) { return _mm512_loadu_ps(p); }
  static SNAPKV_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static SNAPKV_INLINE float sum(V v) { return _mm512_reduce_add_ps(v); }
  static SNAPKV_INLINE V loadw(const uint8_t* p) {
    if constexpr (kKind == FKind::F32) {
      return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (kKind == FKind::F16) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    }
  }
#elif defined(SNAPKV_AVX2)
  static constexpr int kT = 2;
  static constexpr int kW = 8;
  using V = __m256;
  static SNAPKV_INLINE V zero() { return _mm256_setzero_ps(); }
  static SNAPKV_INLINE V loadx(const float* p) { return _mm256_loadu_ps(p); }
  static SNAPKV_INLINE V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static SNAPKV_INLINE float sum(V v) { return hsum(v); }
  static SNAPKV_INLINE V loadw(const uint8_t* p) {
    if constexpr (kKind == FKind::F32) {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (kKind == FKind::F16) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
  }
#else
  static constexpr int kT = 2;
  static constexpr int kW = 0;
#endif

  static float wscalar(const uint8_t* p) {
    if constexpr (kKind == FKind::F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    } else if constexpr (kKind == FKind::F16) {
      return fp16_to_fp32(load_u16(p));
    } else {
      return bf16_to_fp32(load_u16(p));
    }
  }

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const uint8_t* w[R];
    const float* x[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(c.act + static_cast<size_t>(t0 + t) * c.a_stride);
    int64_t i = 0;
    float res[R][T];
#if defined(SNAPKV_AVX2)
    V acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = zero();
    for (; i + kW <= c.cols; i += kW) {
      V wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wv[r] = loadw(w[r] + i * kEsz);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const V xv = loadx(x[t] + i);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = fma(wv[r], xv, acc[r][t]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) res[r][t] = sum(acc[r][t]);
#else
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) res[r][t] = 0.0f;
#endif
    if (i < c.cols) {
      float tail[R][T] = {};
      for (; i < c.cols; ++i) {
        for (int r = 0; r < R; ++r) {
          const float wv = wscalar(w[r] + i * kEsz);
          for (int t = 0; t < T; ++t) tail[r][t] += wv * x[t][i];
        }
      }
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) res[r][t] += tail[r][t];
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = res[r][t];
  }
};

#if defined(SNAPKV_AVX512F) && defined(__AVX512BF16__)
/// BF16 weights with AVX512-BF16: the activations are stored as bf16 (act row = u16[cols])
/// and vdpbf16ps accumulates 32 products per instruction into 16 f32 lanes per pair.
struct KBF16Dot {
  static constexpr int kR = 4;
  static constexpr int kRDecode = 1;
  /// No row prefetch: these stream near the read bandwidth without it, and it measured 5-27 %
  /// slower (docs/benchmarks.md, "Weight rows prefetched in the matmuls").
  static constexpr bool kPrefetchRows = false;
  static constexpr int kT = 4;

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const uint8_t* w[R];
    const uint8_t* x[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) x[t] = c.act + static_cast<size_t>(t0 + t) * c.a_stride;
    __m512 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= c.cols; i += 32) {
      __m512i wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(w[r] + 2 * i);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_loadu_si512(x[t] + 2 * i);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], (__m512bh)xv);
      }
    }
    float res[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) res[r][t] = _mm512_reduce_add_ps(acc[r][t]);
    if (i < c.cols) {
      float tail[R][T] = {};
      for (; i < c.cols; ++i) {
        for (int r = 0; r < R; ++r) {
          const float wv = bf16_to_fp32(load_u16(w[r] + 2 * i));
          for (int t = 0; t < T; ++t) tail[r][t] += wv * bf16_to_fp32(load_u16(x[t] + 2 * i));
        }
      }
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) res[r][t] += tail[r][t];
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = res[r][t];
  }
};
#endif

}  // namespace snapkv::quant
