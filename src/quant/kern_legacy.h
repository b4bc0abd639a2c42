// snapkv: micro-kernels for the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
// Q8 activations (act_quant.h). Per block and (row, token) pair:
//   isum = sum_j q_w[j] * q_x[j]                (exact, int32)
//   acc += (d_w * d_x) * isum                   (+ m_w * s_x for Q4_1 / Q5_1)
// as ggml_vec_dot_q*_q8_*. The SIMD path keeps 8 int32 lanes per block and 8 float lanes of
// accumulator per pair; weights are unpacked to unsigned bytes u = q + offset and the
// activation side carries corr = -offset * (sum of 4 quants) so dpbusd(corr, u, q_x) is the
// signed dot product. Q8_0 without VNNI uses the sign trick (|w| times sign-adjusted x).
#pragma once

#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/simd.h"
#include "quant/tiling.h"

namespace snapkv::quant {

// ---- per-type block readers ---------------------------------------------------------------
// d(), m(): scales. u(): 32 unsigned quants (SIMD). v(): 32 signed values whose dot product
// with q_x is the block's isum (scalar path).

struct UQ4_0 {
  static constexpr int kBytes = kQ4_0Bytes;
  static constexpr int kOffset = 8;
  static constexpr bool kSigned = false, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) { return unpack_nibbles16(b + 2); }
#endif
  static void v(const uint8_t* b, int8_t* q) {
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>((b[2 + j] & 0x0F) - 8);
      q[j + 16] = static_cast<int8_t>((b[2 + j] >> 4) - 8);
    }
  }
};

struct UQ4_1 {
  static constexpr int kBytes = kQ4_1Bytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSigned = false, kMin = true;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t* b) { return load_f16(b + 2); }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) { return unpack_nibbles16(b + 4); }
#endif
  static void v(const uint8_t* b, int8_t* q) {
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(b[4 + j] & 0x0F);
      q[j + 16] = static_cast<int8_t>(b[4 + j] >> 4);
    }
  }
};

struct UQ5_0 {
  static constexpr int kBytes = kQ5_0Bytes;
  static constexpr int kOffset = 16;
  static constexpr bool kSigned = false, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles16(b + 6), bits_to_0x10(load_u32(b + 2)));
  }
#endif
  static void v(const uint8_t* b, int8_t* q) {
    const uint32_t qh = load_u32(b + 2);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(((b[6 + j] & 0x0F) | (((qh >> j) & 1u) << 4)) - 16);
      q[j + 16] = static_cast<int8_t>(((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
    }
  }
};

struct UQ5_1 {
  static constexpr int kBytes = kQ5_1Bytes;
  static constexpr int kOffset = 0;
  static constexpr bool kSigned = false, kMin = true;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t* b) { return load_f16(b + 2); }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles16(b + 8), bits_to_0x10(load_u32(b + 4)));
  }
#endif
  static void v(const uint8_t* b, int8_t* q) {
    const uint32_t qh = load_u32(b + 4);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>((b[8 + j] & 0x0F) | (((qh >> j) & 1u) << 4));
      q[j + 16] = static_cast<int8_t>((b[8 + j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    }
  }
};

struct UQ8_0 {
  static constexpr int kBytes = kQ8_0Bytes;
  static constexpr int kOffset = 128;
  static constexpr bool kSigned = true, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  // Signed bytes; the kernel makes them unsigned (VNNI: xor 0x80) or uses the sign trick.
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
#endif
  static void v(const uint8_t* b, int8_t* q) { std::memcpy(q, b + 2, 32); }
};

// ---- the kernel -----------------------------------------------------------------------------

template <class U>
struct KLegacy {
  static constexpr int kR = 4;
  static constexpr int kT = 4;

  /// The `offset` quantize_q8_row must fold into corr for this kernel.
  static constexpr int act_offset() {
#if defined(SNAPKV_VNNI)
    return U::kOffset;
#elif defined(SNAPKV_AVX2)
    return U::kSigned ? 0 : U::kOffset;
#else
    return 0;
#endif
  }

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const int64_t nb = c.cols / 32;
    const uint8_t* w[R];
    const uint8_t* a[T];
    const float* ad[T];
    const float* as[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) {
      a[t] = c.act + static_cast<size_t>(t0 + t) * c.a_stride;
      ad[t] = reinterpret_cast<const float*>(a[t] + q8_d_offset(c.cols));
      as[t] = reinterpret_cast<const float*>(a[t] + q8_s_offset(c.cols));
    }
    float accm[R][T] = {};
#if defined(SNAPKV_AVX2)
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m256i wu[R];
      __m256 wd[R];
      float wm[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * U::kBytes;
        wd[r] = _mm256_set1_ps(U::d(blk));
        wu[r] = U::u(blk);
        if constexpr (U::kMin) wm[r] = U::m(blk);
#if defined(SNAPKV_VNNI)
        if constexpr (U::kSigned) wu[r] = _mm256_xor_si256(wu[r], _mm256_set1_epi8(static_cast<char>(0x80)));
#endif
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* ab = a[t] + b * kQ8Block;
        const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(ab));
        const __m256 xd = _mm256_set1_ps(ad[t][b]);
        __m256i init = _mm256_setzero_si256();
        if constexpr (act_offset() != 0) init = _mm256_load_si256(reinterpret_cast<const __m256i*>(ab + 32));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __m256i is;
#if !defined(SNAPKV_VNNI)
          if constexpr (U::kSigned) {
            is = dot_u8s8(init, _mm256_sign_epi8(wu[r], wu[r]), _mm256_sign_epi8(xq, wu[r]));
          } else {
            is = dot_u8s8(init, wu[r], xq);
          }
#else
          is = dot_u8s8(init, wu[r], xq);
#endif
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(wd[r], xd), acc[r][t]);
          if constexpr (U::kMin) accm[r][t] += wm[r] * as[t][b];
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = hsum(acc[r][t]) + accm[r][t];
#else
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * U::kBytes;
        int8_t q[32];
        U::v(blk, q);
        const float dw = U::d(blk);
        const float mw = U::m(blk);
        for (int t = 0; t < T; ++t) {
          const auto* xq = reinterpret_cast<const int8_t*>(a[t] + b * kQ8Block);
          int32_t isum = 0;
          for (int j = 0; j < 32; ++j) isum += q[j] * xq[j];
          acc[r][t] += (dw * ad[t][b]) * static_cast<float>(isum);
          if constexpr (U::kMin) accm[r][t] += mw * as[t][b];
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = acc[r][t] + accm[r][t];
#endif
  }
};

}  // namespace snapkv::quant
