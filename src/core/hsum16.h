// snapkv: horizontal sums of 16-lane f32 registers in one fixed order, shared by the decode
// attention tiles (attention/decode_simd.h) and the decode matmul kernels (quant/kern_legacy.h).
//
// Order: with x = lanes 0-7 + lanes 8-15 of a register, its sum is
// ((x0 + x4) + (x1 + x5)) + ((x2 + x6) + (x3 + x7)). hsum16 gives 16 registers' sums at once,
// each bit for bit hsum16_one of that register (every add combines two partial sums of one
// register; the shuffles only move them): 15 adds and 31 shuffles where 16 separate sums take
// about 128 operations.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace snapkv {

// The zero-masking forms with a full mask compile to the plain instructions; the plain intrinsics
// trip GCC 12's -Wmaybe-uninitialized on their internal _mm512_undefined_ps().
namespace hsum_detail {
template <int Imm>
inline __m512 shuffle_f32x4(__m512 a, __m512 b) {
  return _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, Imm);
}
inline __m256 low8(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 0)); }
inline __m256 high8(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 1)); }
}  // namespace hsum_detail

/// The sum of a's 16 lanes in the order of the file comment.
[[gnu::always_inline]] inline float hsum16_one(__m512 a) {
  const __m256 x = _mm256_add_ps(hsum_detail::low8(a), hsum_detail::high8(a));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));  // t_k = x_k + x_(k+4)
  const __m128 u = _mm_add_ps(t, _mm_movehdup_ps(t));                                   // t0 + t1, ., t2 + t3, .
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehl_ps(u, u)));
}

/// Lane i = hsum16_one(a[i]) for i < 16, as a transposing tree. Always inlined: as a call, the 16
/// accumulators of the decode score tiles go through memory (GCC once left it out of line in
/// attention/decode.cpp: the F16 decode tiles ran 1.3-1.7x slower on Zen 4).
[[gnu::always_inline]] inline __m512 hsum16(const __m512* a) {
  using hsum_detail::shuffle_f32x4;
  __m512 x[8], y[4], z[2];
  // x[i] = [low8 + high8 of a[2i] | of a[2i + 1]]
  for (int i = 0; i < 8; ++i)
    x[i] = _mm512_add_ps(shuffle_f32x4<_MM_SHUFFLE(1, 0, 1, 0)>(a[2 * i], a[2 * i + 1]),
                         shuffle_f32x4<_MM_SHUFFLE(3, 2, 3, 2)>(a[2 * i], a[2 * i + 1]));
  // 128-bit lane L of y[i]: t_k = x_k + x_(k+4), k < 4, of a[4i + L]
  for (int i = 0; i < 4; ++i)
    y[i] = _mm512_add_ps(shuffle_f32x4<_MM_SHUFFLE(2, 0, 2, 0)>(x[2 * i], x[2 * i + 1]),
                         shuffle_f32x4<_MM_SHUFFLE(3, 1, 3, 1)>(x[2 * i], x[2 * i + 1]));
  // lane L of z[i]: (t0 + t1, t2 + t3) of a[8i + L], then of a[8i + 4 + L]
  for (int i = 0; i < 2; ++i)
    z[i] = _mm512_add_ps(_mm512_shuffle_ps(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // element e of lane L of w: (t0 + t1) + (t2 + t3) of a[4e + L]; transposed back to lane order
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                     w);
}

}  // namespace snapkv

#endif  // __AVX512F__
