// snapkv: micro-kernels for the K-quants Q4_K, Q5_K, Q6_K against Q8_K activations, as
// ggml_vec_dot_q{4,5,6}_K_q8_K. Per super-block (256 elements) and (row, token) pair:
//   Q4_K/Q5_K: isum = sum_j sc[j] * dot(q_j, x_j)   (8 sub-blocks of 32, q unsigned)
//              acc += (d_w*d_x) * isum - (dmin_w*d_x) * sum_j m[j] * bsum32_x[j]
//   Q6_K:      isum = sum_g sc[g] * dot(q_g, x_g) - 32 * sum_g sc[g] * bsum16_x[g]
//              acc += (d_w*d_x) * isum                   (16 groups of 16, q in 0..63)
// All integer work is exact; the SIMD path keeps 8 int32 lanes per pair over a super-block
// (vpmaddubsw then vpdpwssd / vpmaddwd with the scale) and 8 float lanes of accumulator.
#pragma once

#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/simd.h"
#include "quant/tiling.h"

namespace snapkv::quant {

/// The 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K super-block, decoded
/// with 32-bit word operations (same result as decode_k4_scales).
inline void decode_k4_scales_u64(const uint8_t* q, uint64_t* sc, uint64_t* mn) {
  const uint32_t a = load_u32(q), b = load_u32(q + 4), c = load_u32(q + 8);
  constexpr uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const uint32_t sc_lo = a & k6;
  const uint32_t m_lo = b & k6;
  const uint32_t sc_hi = (c & k4) | (((a >> 6) & k2) << 4);
  const uint32_t m_hi = ((c >> 4) & k4) | (((b >> 6) & k2) << 4);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

template <bool kFive>  // false: Q4_K, true: Q5_K
struct KQ45K {
  static constexpr int kR = 4;
  static constexpr int kRDecode = 1;
  static constexpr bool kPrefetchRows = true;  ///< tiling.h asks for the weight rows ahead
  static constexpr int kT = 4;
  static constexpr int kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  static constexpr int kQs = kFive ? kQ5_KQs : kQ4_KQs;

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const int64_t nb = c.cols / 256;
    const uint8_t* w[R];
    const uint8_t* a[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) a[t] = c.act + static_cast<size_t>(t0 + t) * c.a_stride;
#if defined(SNAPKV_AVX2)
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sc2[R];  // the 8 scales as int16, in both 128-bit lanes
      __m128i mins[R];
      float dw[R], dmw[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * kBytes;
        dw[r] = load_f16(blk);
        dmw[r] = load_f16(blk + 2);
        uint64_t sc, mn;
        decode_k4_scales_u64(blk + 4, &sc, &mn);
        sc2[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
        mins[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn)));
      }
      // Integer sums are exact, so small tiles split them over kNI accumulators (shorter
      // dependency chains) without changing any result.
      constexpr int kNI = R * T <= 2 ? 4 : 1;
      __m256i iacc[kNI][R][T];
#pragma GCC unroll 4
      for (int i = 0; i < kNI; ++i)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) iacc[i][r][t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // int16 broadcast of scale 2j (low nibbles) and 2j+1 (high nibbles).
        const __m256i pick_lo = _mm256_set1_epi16(static_cast<short>((4 * j) | ((4 * j + 1) << 8)));
        const __m256i pick_hi = _mm256_set1_epi16(static_cast<short>((4 * j + 2) | ((4 * j + 3) << 8)));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* blk = w[r] + b * kBytes;
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQs + 32 * j));
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          if constexpr (kFive) {
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ5_KQh));
            const __m256i one = _mm256_set1_epi8(1);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
          }
          const __m256i s_lo = _mm256_shuffle_epi8(sc2[r], pick_lo);
          const __m256i s_hi = _mm256_shuffle_epi8(sc2[r], pick_hi);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const uint8_t* xb = a[t] + b * kQ8KBlock + 64 * j;
            const __m256i x_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb));
            const __m256i x_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 32));
            __m256i& i0 = iacc[(2 * j) % kNI][r][t];
            i0 = madd_i16(i0, _mm256_maddubs_epi16(lo, x_lo), s_lo);
            __m256i& i1 = iacc[(2 * j + 1) % kNI][r][t];
            i1 = madd_i16(i1, _mm256_maddubs_epi16(hi, x_hi), s_hi);
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = a[t] + b * kQ8KBlock;
        float xd;
        std::memcpy(&xd, xb + kQ8KD, 4);
        const __m128i bs = _mm_load_si128(reinterpret_cast<const __m128i*>(xb + kQ8KBsum32));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 mm = _mm256_cvtepi32_ps(_mm256_zextsi128_si256(_mm_madd_epi16(mins[r], bs)));
          __m256i is = iacc[0][r][t];
#pragma GCC unroll 4
          for (int i = 1; i < kNI; ++i) is = _mm256_add_epi32(is, iacc[i][r][t]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw[r] * xd), acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(mm, _mm256_set1_ps(dmw[r] * xd), acc[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = hsum(acc[r][t]);
#else
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * kBytes;
        const float dw = load_f16(blk), dmw = load_f16(blk + 2);
        uint8_t sc[8], mn[8];
        decode_k4_scales(blk + 4, sc, mn);
        uint8_t q[256];
        for (int j = 0; j < 4; ++j) {
          for (int l = 0; l < 32; ++l) {
            const uint8_t v = blk[kQs + 32 * j + l];
            q[64 * j + l] = v & 0x0F;
            q[64 * j + 32 + l] = v >> 4;
            if constexpr (kFive) {
              const uint8_t h = blk[kQ5_KQh + l];
              q[64 * j + l] |= static_cast<uint8_t>(((h >> (2 * j)) & 1) << 4);
              q[64 * j + 32 + l] |= static_cast<uint8_t>(((h >> (2 * j + 1)) & 1) << 4);
            }
          }
        }
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = a[t] + b * kQ8KBlock;
          const auto* xq = reinterpret_cast<const int8_t*>(xb);
          float xd;
          int16_t bs[8];
          std::memcpy(&xd, xb + kQ8KD, 4);
          std::memcpy(bs, xb + kQ8KBsum32, sizeof(bs));
          int32_t isum = 0, msum = 0;
          for (int s = 0; s < 8; ++s) {
            int32_t d = 0;
            for (int l = 0; l < 32; ++l) d += q[32 * s + l] * xq[32 * s + l];
            isum += sc[s] * d;
            msum += mn[s] * bs[s];
          }
          acc[r][t] += (dw * xd) * static_cast<float>(isum);
          acc[r][t] -= (dmw * xd) * static_cast<float>(msum);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = acc[r][t];
#endif
  }
};

struct KQ6K {
  static constexpr int kR = 4;
  static constexpr int kRDecode = 1;
  static constexpr bool kPrefetchRows = true;  ///< tiling.h asks for the weight rows ahead
  static constexpr int kT = 4;

  template <int R, int T>
  static void tile(const TileCtx& c, int64_t r0, int64_t t0) {
    const int64_t nb = c.cols / 256;
    const uint8_t* w[R];
    const uint8_t* a[T];
    for (int r = 0; r < R; ++r) w[r] = c.w + static_cast<size_t>(r0 + r) * c.w_stride;
    for (int t = 0; t < T; ++t) a[t] = c.act + static_cast<size_t>(t0 + t) * c.a_stride;
#if defined(SNAPKV_AVX2)
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sc16[R];  // the 16 int8 scales as int16
      float dw[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * kQ6_KBytes;
        dw[r] = load_f16(blk + kQ6_KD);
        sc16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6_KScales)));
      }
      constexpr int kNI = R * T <= 2 ? 4 : 1;  // exact integer partial sums, as in KQ45K
      __m256i iacc[kNI][R][T];
#pragma GCC unroll 4
      for (int i = 0; i < kNI; ++i)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) iacc[i][r][t] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* blk = w[r] + b * kQ6_KBytes;
          const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQl + 64 * h));
          const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQl + 64 * h + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQh + 32 * h));
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            // quarter k: low 4 bits from ql0/ql1 (k even/odd), low/high nibble (k < 2 / k >= 2);
            // 2 high bits from qh bits 2k..2k+1, moved to bits 4..5.
            const __m256i l4 = (k & 1) ? ql1 : ql0;
            const __m256i lo = k < 2 ? _mm256_and_si256(l4, m4) : _mm256_and_si256(_mm256_srli_epi16(l4, 4), m4);
            __m256i hb;
            if (k == 0)
              hb = _mm256_slli_epi16(qh, 4);
            else if (k == 1)
              hb = _mm256_slli_epi16(qh, 2);
            else if (k == 2)
              hb = qh;
            else
              hb = _mm256_srli_epi16(qh, 2);
            const __m256i q = _mm256_or_si256(lo, _mm256_and_si256(hb, m30));
            const int cidx = 4 * h + k;  // scales 2*cidx (low 16 elements), 2*cidx+1 (high 16)
#if defined(SNAPKV_VNNI)
            const __m256i s = _mm256_permutexvar_epi16(
                _mm256_setr_epi16(2 * cidx, 2 * cidx, 2 * cidx, 2 * cidx, 2 * cidx, 2 * cidx, 2 * cidx, 2 * cidx,
                                  2 * cidx + 1, 2 * cidx + 1, 2 * cidx + 1, 2 * cidx + 1, 2 * cidx + 1, 2 * cidx + 1,
                                  2 * cidx + 1, 2 * cidx + 1),
                sc16[r]);
#else
            const __m256i pair = _mm256_permutevar8x32_epi32(sc16[r], _mm256_set1_epi32(cidx));
            const __m256i s =
                _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3,
                                                           2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
#endif
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
              const __m256i x =
                  _mm256_load_si256(reinterpret_cast<const __m256i*>(a[t] + b * kQ8KBlock + 128 * h + 32 * k));
              __m256i& ia = iacc[cidx % kNI][r][t];
              ia = madd_i16(ia, _mm256_maddubs_epi16(q, x), s);
            }
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = a[t] + b * kQ8KBlock;
        float xd;
        std::memcpy(&xd, xb + kQ8KD, 4);
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + kQ8KBsum16));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16[r], bs), 5);  // 32 * sum sc*bsum
          __m256i is = iacc[0][r][t];
#pragma GCC unroll 4
          for (int i = 1; i < kNI; ++i) is = _mm256_add_epi32(is, iacc[i][r][t]);
          is = _mm256_sub_epi32(is, corr);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw[r] * xd), acc[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = hsum(acc[r][t]);
#else
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + b * kQ6_KBytes;
        const float dw = load_f16(blk + kQ6_KD);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6_KScales);
        int8_t q[256];
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = blk + kQ6_KQl + 64 * h;
          const uint8_t* qh = blk + kQ6_KQh + 32 * h;
          for (int l = 0; l < 32; ++l) {
            q[128 * h + l] = static_cast<int8_t>(((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32);
            q[128 * h + 32 + l] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[128 * h + 64 + l] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[128 * h + 96 + l] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          }
        }
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = a[t] + b * kQ8KBlock;
          const auto* xq = reinterpret_cast<const int8_t*>(xb);
          float xd;
          std::memcpy(&xd, xb + kQ8KD, 4);
          int32_t isum = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t d = 0;
            for (int l = 0; l < 16; ++l) d += q[16 * g + l] * xq[16 * g + l];
            isum += sc[g] * d;
          }
          acc[r][t] += (dw * xd) * static_cast<float>(isum);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) c.y[(t0 + t) * c.y_stride + r0 + r] = acc[r][t];
#endif
  }
};

}  // namespace snapkv::quant
