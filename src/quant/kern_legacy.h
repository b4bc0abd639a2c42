// snapkv: micro-kernels for the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
// Q8 activations (act_quant.h). Per block and (row, token) pair:
//   isum = sum_j q_w[j] * q_x[j]                (exact, int32)
//   acc += (d_w * d_x) * isum                   (+ m_w * s_x for Q4_1 / Q5_1)
// as ggml_vec_dot_q*_q8_*. The SIMD path keeps 8 int32 lanes per block and 8 float lanes of
// accumulator per pair; weights are unpacked to unsigned bytes u = q + offset and the
// activation side carries corr = -offset * (sum of 4 quants) so dpbusd(corr, u, q_x) is the
// signed dot product. Q8_0 without VNNI uses the sign trick (|w| times sign-adjusted x).
#pragma once

#include "core/hsum16.h"
#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/simd.h"
#include "quant/tiling.h"

namespace snapkv::quant {

// ---- per-type block readers ---------------------------------------------------------------
// d(), m(): scales. u(): 32 unsigned quants (SIMD). v(): 32 signed values whose dot product
// with q_x is the block's isum (scalar path).

#if defined(SNAPKV_VNNI)
/// Two 16-byte nibble arrays (blocks b and b+1) -> 64 bytes: low then high nibbles of each.
/// Both arrays are broadcast from memory ([b | b | b+1 | b+1] in 128-bit lanes: loads and one
/// merge), then lanes 1 and 3 are shifted by a nibble.
SNAPKV_INLINE __m512i unpack_nibbles16x2(const uint8_t* p0, const uint8_t* p1) {
  const __m512i z0 = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0)));
  const __m512i z = _mm512_mask_broadcast_i32x4(z0, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)));
  return _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xFF00FF00u, z, 4), _mm512_set1_epi8(0x0F));
}
/// The f16 scales at p0 and p1 as 8 + 8 float lanes, looked up in tab (f16_f32_table()): two
/// broadcast loads and one merge, where a conversion takes three shuffle-port operations.
SNAPKV_INLINE __m512 scales_f16x2(const uint8_t* p0, const uint8_t* p1, const float* tab) {
  return _mm512_mask_broadcastss_ps(_mm512_set1_ps(tab[load_u16(p0)]), 0xFF00, _mm_load_ss(tab + load_u16(p1)));
}
/// Adds 16 to byte i of v where bit i of the 32-bit words at q0 (bytes 0..31) and q1
/// (bytes 32..63) is set: the 5th bit of two Q5 blocks.
SNAPKV_INLINE __m512i add_bit4(__m512i v, const uint8_t* q0, const uint8_t* q1) {
  const __mmask64 k = _mm512_kunpackd(_cvtu32_mask32(load_u32(q1)), _cvtu32_mask32(load_u32(q0)));
  return _mm512_mask_add_epi8(v, k, v, _mm512_set1_epi8(0x10));
}
#endif

struct UQ4_0 {
  static constexpr int kBytes = kQ4_0Bytes;
  static constexpr int kOffset = 8;
  static constexpr int kMaxU = 15;  ///< largest |quant| the SIMD kernels multiply (u, or |q| when signed)
  static constexpr bool kSigned = false, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) { return unpack_nibbles16(b + 2); }
#endif
#if defined(SNAPKV_VNNI)
  static SNAPKV_INLINE __m512i u2(const uint8_t* b) { return unpack_nibbles16x2(b + 2, b + kBytes + 2); }
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
  static constexpr int kMaxU = 15;
  static constexpr bool kSigned = false, kMin = true;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t* b) { return load_f16(b + 2); }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) { return unpack_nibbles16(b + 4); }
#endif
#if defined(SNAPKV_VNNI)
  static SNAPKV_INLINE __m512i u2(const uint8_t* b) { return unpack_nibbles16x2(b + 4, b + kBytes + 4); }
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
  static constexpr int kMaxU = 31;
  static constexpr bool kSigned = false, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles16(b + 6), bits_to_0x10(load_u32(b + 2)));
  }
#endif
#if defined(SNAPKV_VNNI)
  static SNAPKV_INLINE __m512i u2(const uint8_t* b) {
    return add_bit4(unpack_nibbles16x2(b + 6, b + kBytes + 6), b + 2, b + kBytes + 2);
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
  static constexpr int kMaxU = 31;
  static constexpr bool kSigned = false, kMin = true;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t* b) { return load_f16(b + 2); }
#if defined(SNAPKV_AVX2)
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_or_si256(unpack_nibbles16(b + 8), bits_to_0x10(load_u32(b + 4)));
  }
#endif
#if defined(SNAPKV_VNNI)
  static SNAPKV_INLINE __m512i u2(const uint8_t* b) {
    return add_bit4(unpack_nibbles16x2(b + 8, b + kBytes + 8), b + 4, b + kBytes + 4);
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
  static constexpr int kMaxU = 128;  ///< |q| of an int8 quant (q = -128 included)
  static constexpr bool kSigned = true, kMin = false;
  static float d(const uint8_t* b) { return load_f16(b); }
  static float m(const uint8_t*) { return 0.0f; }
#if defined(SNAPKV_AVX2)
  // Signed bytes; the kernel makes them unsigned (VNNI: xor 0x80) or uses the sign trick.
  static SNAPKV_INLINE __m256i u(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
#endif
#if defined(SNAPKV_VNNI)
  static SNAPKV_INLINE __m512i u2(const uint8_t* b) {
    const __m512i z =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kBytes + 2)), 1);
    return _mm512_xor_si512(z, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
#endif
  static void v(const uint8_t* b, int8_t* q) { std::memcpy(q, b + 2, 32); }
};

// ---- the kernel -----------------------------------------------------------------------------

template <class U>
struct KLegacy {
  static constexpr int kR = 4;  ///< rows per tile (prefill)
  static constexpr int kT = 4;  ///< tokens per tile
  /// Rows per tile for n_tokens == 1. AVX-512 VNNI: 16 rows, walked one after another (one
  /// sequential weight stream) and reduced together by hsum16; the tile asks for its rows itself
  /// (TileCtx::prefetch_rows), not tiling.h. AVX2: Q4_0, Q4_1 and Q5_0 take 2 rows side by side
  /// (two FMA chains, each row's arithmetic and bits unchanged; tiling.h asks for both rows
  /// ahead); Q5_1 and Q8_0 1 row (2 rows were 0.94x and 0.76-0.97x from memory). Measured on
  /// Zen 3: docs/benchmarks.md, "AVX2 decode matmuls: two rows per tile for Q4_0 / Q4_1" and
  /// "AVX2 decode matmuls: blocks by pairs, scales from the table, Q5_0 in 2-row tiles".
#if defined(SNAPKV_VNNI)
  static constexpr int kRDecode = 16;
  static constexpr bool kDecodeTilePrefetches = true;
#elif defined(SNAPKV_AVX2)
  static constexpr int kRDecode = (U::kMaxU == 15 || (U::kMaxU == 31 && !U::kMin)) ? 2 : 1;
  static constexpr bool kDecodeTilePrefetches = false;
#else
  static constexpr int kRDecode = 1;
  static constexpr bool kDecodeTilePrefetches = false;
#endif
  static constexpr bool kPrefetchRows = true;  ///< tiling.h asks for the weight rows ahead

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

#if defined(SNAPKV_VNNI)
  /// 32 unsigned quants of one block (Q8_0: made unsigned by xor 0x80).
  static SNAPKV_INLINE __m256i ublock(const uint8_t* blk) {
    __m256i u = U::u(blk);
    if constexpr (U::kSigned) u = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
    return u;
  }

  /// AVX-512: each (row, token) pair accumulates 16 float lanes, lanes 0-7 from the even
  /// block of a pair and 8-15 from the odd one; a lone last block leaves lanes 8-15 untouched.
  template <int R, int T, bool kFull>
  static SNAPKV_INLINE void step(const uint8_t* const* w, const uint8_t* const* a, const float* const* as, int64_t b,
                                 __m512 (&acc)[R][T], float (&accm)[R][T][2], const float* tab) {
    __m512i wu[R];
    __m512 wd[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* b0 = w[r] + b * U::kBytes;
      if constexpr (kFull) {
        wu[r] = U::u2(b0);
        wd[r] = scales_f16x2(b0, b0 + U::kBytes, tab);  // d is the first field of every legacy block
      } else {
        wu[r] = _mm512_zextsi256_si512(ublock(b0));
        wd[r] = _mm512_zextps256_ps512(_mm256_set1_ps(tab[load_u16(b0)]));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* ab = a[t] + b * (kQ8Pair / 2);  // b is even: the pair b/2
      const __m512i xq = _mm512_load_si512(ab);
      const __m512 xd = _mm512_load_ps(ab + kQ8Dv);
      __m512i init = _mm512_setzero_si512();
      if constexpr (act_offset() != 0) init = _mm512_load_si512(ab + kQ8Corr);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i is = _mm512_dpbusd_epi32(init, wu[r], xq);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(wd[r], xd), acc[r][t]);
        if constexpr (U::kMin) {
          accm[r][t][0] += tab[load_u16(w[r] + b * U::kBytes + 2)] * as[t][b];  // m follows d (Q4_1, Q5_1)
          if constexpr (kFull) accm[r][t][1] += tab[load_u16(w[r] + (b + 1) * U::kBytes + 2)] * as[t][b + 1];
        }
      }
    }
  }
#endif

#if defined(SNAPKV_AVX2) && !defined(SNAPKV_VNNI)
  /// AVX2: one activation block at ab (act_quant.h): its quants, its scale in 8 lanes and (when
  /// the kernel folds an offset) its corr.
  struct ActBlock {
    __m256i xq, init;
    __m256 xd;
  };
  static SNAPKV_INLINE ActBlock act_block(const uint8_t* ab) {
    ActBlock x{_mm256_load_si256(reinterpret_cast<const __m256i*>(ab)), _mm256_setzero_si256(),
               _mm256_load_ps(reinterpret_cast<const float*>(ab + kQ8Dv))};
    if constexpr (act_offset() != 0) x.init = _mm256_load_si256(reinterpret_cast<const __m256i*>(ab + kQ8Corr));
    return x;
  }
  /// AVX2: acc + (d_w * d_x) * isum of one (weight block, activation block) pair, wu the block's
  /// quants (U::u), wd its scale in 8 lanes.
  static SNAPKV_INLINE __m256 block_fma(const ActBlock& x, __m256i wu, __m256 wd, __m256 acc) {
    __m256i is;
    if constexpr (U::kSigned) {  // sign trick: |w| * (x with the sign of w)
      is = dot_u8s8(x.init, _mm256_sign_epi8(wu, wu), _mm256_sign_epi8(x.xq, wu));
    } else {
      is = dot_u8s8(x.init, wu, x.xq);
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(wd, x.xd), acc);
  }

  /// AVX2 decode tile (one token): block b of each of its R rows; w[r] points at the row's current
  /// pair of blocks, a at the token's (act_quant.h), `half` (0 or 1) picks the pair's block. The
  /// block scales come from `tab` (f16_f32_table(): one load, where F16C takes an insert, a
  /// conversion and a broadcast per block; the same float). Arithmetic per row as the tiles of
  /// 2-7 tokens, so the bits do not depend on the tile.
  template <int R>
  static SNAPKV_INLINE void decode_step_avx2(const uint8_t* const* w, const uint8_t* a, int half, const float* as,
                                             int64_t b, __m256 (&acc)[R][1], float (&accm)[R][1], const float* tab) {
    const ActBlock x = act_block(a + half * 32);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + half * U::kBytes;
      // d is the first field of every legacy block
      acc[r][0] = block_fma(x, U::u(blk), _mm256_broadcast_ss(tab + load_u16(blk)), acc[r][0]);
      if constexpr (U::kMin) accm[r][0] += U::m(blk) * as[b];
    }
  }
#endif

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const int64_t nb = c.cols / 32;
    const uint8_t* w[R];
    const uint8_t* a[T];
    const float* as[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) {
      a[t] = c.act + static_cast<size_t>(t0 + t) * c.a_stride;
      as[t] = reinterpret_cast<const float*>(a[t] + q8_s_offset(c.cols));
    }
#if defined(SNAPKV_VNNI)
    // Every (row, token) pair: y = hsum16_one(acc) + (accm[0] + accm[1]), whatever the tile.
    const float* tab = c.f16_table;
    if constexpr (T == 1 && R == 16) {  // the decode tile: rows one by one, reduced together
      __m512 sums[16];
      alignas(64) float mins[16];
      for (int r = 0; r < R; ++r) {
        if (c.prefetch_rows > 0 && r0 + r + c.prefetch_rows < c.rows)
          prefetch_l2(w[r] + static_cast<size_t>(c.prefetch_rows) * c.w_stride, c.w_stride);
        const uint8_t* w1[1] = {w[r]};
        __m512 acc[1][1] = {{_mm512_setzero_ps()}};
        float accm[1][1][2] = {};
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) step<1, 1, true>(w1, a, as, b, acc, accm, tab);
        if (b < nb) step<1, 1, false>(w1, a, as, b, acc, accm, tab);
        sums[r] = acc[0][0];
        mins[r] = accm[0][0][0] + accm[0][0][1];
      }
      _mm512_storeu_ps(c.y + t0 * c.y_stride + r0, _mm512_add_ps(hsum16(sums), _mm512_load_ps(mins)));
    } else {
      static_assert(R <= 4, "AVX-512 tiles of more than 4 rows are the 16-row decode tile only");
      float accm[R][T][2] = {};  // the min terms of even / odd blocks: two short chains, not one long one
      __m512 acc[R][T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) step<R, T, true>(w, a, as, b, acc, accm, tab);
      if (b < nb) step<R, T, false>(w, a, as, b, acc, accm, tab);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          c.y[(t0 + t) * c.y_stride + r0 + r] = hsum16_one(acc[r][t]) + (accm[r][t][0] + accm[r][t][1]);
    }
#elif defined(SNAPKV_AVX2)
    float accm[R][T] = {};
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    if constexpr (T == 1) {
      // Decode: blocks walked by pairs (the Q8 row's layout, act_quant.h) with pointers stepped
      // once per pair: q8_block_offset(b) per block cost ~9 scalar operations of a ~27-operation
      // Q8_0 loop. (The tiles of 2-7 tokens keep one block per step: through this helper, with 16
      // accumulators and 8 pointers, they measured 0.87-0.97x.)
      const float* tab = c.f16_table;
      const uint8_t* ap = a[0];
      const uint8_t* wp[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wp[r] = w[r];
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        decode_step_avx2<R>(wp, ap, 0, as[0], b, acc, accm, tab);
        decode_step_avx2<R>(wp, ap, 1, as[0], b + 1, acc, accm, tab);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) wp[r] += 2 * U::kBytes;
        ap += kQ8Pair;
      }
      if (b < nb) decode_step_avx2<R>(wp, ap, 0, as[0], b, acc, accm, tab);
    } else {
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
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const ActBlock x = act_block(a[t] + q8_block_offset(b));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            acc[r][t] = block_fma(x, wu[r], wd[r], acc[r][t]);
            if constexpr (U::kMin) accm[r][t] += wm[r] * as[t][b];
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = hsum(acc[r][t]) + accm[r][t];
#else
    float acc[R][T] = {};
    float accm[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * U::kBytes;
        int8_t q[32];
        U::v(blk, q);
        const float dw = U::d(blk);
        const float mw = U::m(blk);
        for (int t = 0; t < T; ++t) {
          const uint8_t* ab = a[t] + q8_block_offset(b);
          const auto* xq = reinterpret_cast<const int8_t*>(ab);
          float xd;
          std::memcpy(&xd, ab + kQ8Dv, 4);
          int32_t isum = 0;
          for (int j = 0; j < 32; ++j) isum += q[j] * xq[j];
          acc[r][t] += (dw * xd) * static_cast<float>(isum);
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
