// snapkv: token-lane prefill kernels (AVX-512 VNNI; AVX2) for the 32-element block types.
//
// For many tokens the pair kernels of kern_legacy.h spend most of their time on per-pair
// float work (convert, scale, accumulate 16 lanes of one (row, token) pair). Here the 16
// lanes of a register are 16 tokens instead: per block and row,
//   isum[16 tokens] = corr + sum_g dpbusd(broadcast(u[4g..4g+3]), x[16 tokens][4g..4g+3])
//   acc[16 tokens]  = fma(float(isum), d_w * d_x[16 tokens], acc)     (+ m_w * s_x, Q4_1/Q5_1)
// so the float work is shared by 16 tokens and the integer products need no reduction.
// Activations are transposed once per call into 16-token tiles ("lane layout"); a tile of
// kLaneRows weight rows is unpacked to unsigned bytes once and reused for every token tile.
// Per (row, token) the result is one f32 accumulator updated once per block in block order:
// it does not depend on the lane, the tile or the thread (bitwise invariant to thread count
// and to the token's position), but it rounds differently from the pair kernels used for
// decode (n_tokens == 1), by a few f32 ulps of the accumulated terms. The AVX2 policy at the end
// of this file does the same arithmetic with two 8-lane registers per 16 tokens (same bits).
#pragma once

#include <cstring>

#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/kern_legacy.h"
#include "quant/lane_driver.h"
#include "quant/simd.h"

namespace snapkv::quant {

// Per (token tile, block): x quants transposed to 8 groups x 16 tokens x 4 bytes, then per
// token: corr (i32, -offset * sum of the block's quants), d (f32), s (f32, Q8_1).
inline constexpr size_t kLaneXq = 512;
inline constexpr size_t kLaneCorr = 512;
inline constexpr size_t kLaneD = 576;
inline constexpr size_t kLaneS = 640;
inline constexpr size_t kLaneBlock = 704;

/// Transposes token tile `tile` (tokens 16*tile .. +15, missing ones zero) from Q8 rows
/// (act_quant.h layout, stride a_stride) into the lane layout at `out`.
inline void build_lane_tile(const uint8_t* act, size_t a_stride, int64_t n_tokens, int64_t cols, int64_t tile,
                            uint8_t* out) {
  const int64_t nb = cols / 32;
  std::memset(out, 0, static_cast<size_t>(nb) * kLaneBlock);
  for (int l = 0; l < kLanes; ++l) {
    const int64_t t = tile * kLanes + l;
    if (t >= n_tokens) break;
    const uint8_t* row = act + static_cast<size_t>(t) * a_stride;
    const auto* s = reinterpret_cast<const float*>(row + q8_s_offset(cols));
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = row + q8_block_offset(b);
      uint8_t* dst = out + static_cast<size_t>(b) * kLaneBlock;
      for (int g = 0; g < 8; ++g) std::memcpy(dst + g * 64 + 4 * l, src + 4 * g, 4);
      int32_t corr[8], total = 0;
      std::memcpy(corr, src + kQ8Corr, sizeof(corr));
      for (const int32_t c : corr) total += c;
      std::memcpy(dst + kLaneCorr + 4 * l, &total, 4);
      std::memcpy(dst + kLaneD + 4 * l, src + kQ8Dv, 4);
      std::memcpy(dst + kLaneS + 4 * l, &s[b], 4);
    }
  }
}

/// What the lane_driver.h policies of the 32-element types share (VNNI and AVX2 below).
struct LaneLegacyCommon {
  static constexpr int64_t kBlock = 32;
  static constexpr size_t kTileBlockBytes = kLaneBlock;
  static void build_tile(const uint8_t* act, size_t a_stride, int64_t n_tokens, int64_t cols, int64_t tile,
                         uint8_t* out) {
    build_lane_tile(act, a_stride, n_tokens, cols, tile, out);
  }
  /// Bytes 32-39 of an unpacked entry: the block's d and m (0 without a minimum) as f32.
  template <class U>
  static void store_scales(const uint8_t* blk, uint8_t* e) {
    const float d = U::d(blk), m = U::m(blk);
    std::memcpy(e + 32, &d, 4);
    std::memcpy(e + 36, &m, 4);
  }
};

#if defined(SNAPKV_VNNI)

/// The lane_driver.h policy for reader U (kern_legacy.h). Unpacked entry (64 bytes):
/// u8 u[32] (unsigned quants) | f32 d | f32 m.
template <class U>
struct LaneLegacy : LaneLegacyCommon {
  static constexpr size_t kEntryBytes = 64;
  static constexpr bool kCorr = KLegacy<U>::act_offset() != 0;

  static void unpack(const uint8_t* blk, uint8_t* e) {
    __m256i u = U::u(blk);
    if constexpr (U::kSigned) u = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(e), u);
    store_scales<U>(blk, e);
  }
  static void zero(uint8_t* e) { std::memset(e, 0, kEntryBytes); }

  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    __m512 acc[kLaneRows];
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* xb = xt + static_cast<size_t>(b) * kLaneBlock;
      __m512i xv[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) xv[g] = _mm512_load_si512(xb + 64 * g);
      const __m512 xd = _mm512_load_ps(xb + kLaneD);
      const uint8_t* eb = entries + static_cast<size_t>(b) * kLaneRows * kEntryBytes;
#pragma GCC unroll 16
      for (int r = 0; r < kLaneRows; ++r) {
        const uint8_t* e = eb + r * kEntryBytes;
        __m512i is = kCorr ? _mm512_load_si512(xb + kLaneCorr) : _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          is = _mm512_dpbusd_epi32(is, _mm512_set1_epi32(static_cast<int>(load_u32(e + 4 * g))), xv[g]);
        }
        float d, m;
        std::memcpy(&d, e + 32, 4);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(_mm512_set1_ps(d), xd), acc[r]);
        if constexpr (U::kMin) {
          std::memcpy(&m, e + 36, 4);
          acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(m), _mm512_load_ps(xb + kLaneS), acc[r]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) _mm512_storeu_ps(out[r], acc[r]);
  }
};

#elif defined(SNAPKV_AVX2)

/// The lane_driver.h policy for reader U on AVX2 without VNNI: the lane layout, the loop over
/// blocks and the per-(row, token) arithmetic of the VNNI policy (isum exact in int32, then
/// acc = fma(float(isum), d_w * d_x, acc), + fma(m_w, s_x, acc)), so every output is bit for bit
/// what an AVX-512 VNNI host computes. The 16 tokens of a tile are two 8-lane halves; a weight
/// row's two accumulators stay in registers over all blocks. vpmaddubsw's int16 pair sums
/// (at most 2 x kMaxU x 127) are exact, and so are sums of kGroupSum of them (<= 32767) before
/// vpmaddwd widens them to int32. Unsigned readers keep the entry of the VNNI policy
/// (u[32] | f32 d | f32 m); Q8_0 (signed) stores |q| there and q at byte 64 (128-byte entries),
/// and multiplies |q| by x carrying q's sign (vpsignb), as the AVX2 pair kernel does.
template <class U>
struct LaneLegacy : LaneLegacyCommon {
  static constexpr size_t kEntryBytes = U::kSigned ? 128 : 64;
  static constexpr bool kCorr = KLegacy<U>::act_offset() != 0;
  static constexpr int kGroupSum = 8 * 2 * U::kMaxU * 127 <= 32767   ? 8
                                   : 4 * 2 * U::kMaxU * 127 <= 32767 ? 4
                                   : 2 * 2 * U::kMaxU * 127 <= 32767 ? 2
                                                                     : 1;
  static_assert(2 * U::kMaxU * 127 <= 32767 && 8 % kGroupSum == 0);

  static void unpack(const uint8_t* blk, uint8_t* e) {
    const __m256i u = U::u(blk);
    if constexpr (U::kSigned) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(e), _mm256_sign_epi8(u, u));
      _mm256_store_si256(reinterpret_cast<__m256i*>(e + 64), u);
    } else {
      _mm256_store_si256(reinterpret_cast<__m256i*>(e), u);
    }
    store_scales<U>(blk, e);
  }
  static void zero(uint8_t* e) { std::memset(e, 0, kEntryBytes); }

  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < kLaneRows; ++r) {
      __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* xb = xt + static_cast<size_t>(b) * kLaneBlock;
        const uint8_t* e = entries + (static_cast<size_t>(b) * kLaneRows + r) * kEntryBytes;
        __m256i is[2], s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < 2; ++h)
          is[h] = kCorr ? _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + kLaneCorr + 32 * h))
                        : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m256i w = _mm256_set1_epi32(static_cast<int>(load_u32(e + 4 * g)));
          __m256i ws = w;
          if constexpr (U::kSigned) ws = _mm256_set1_epi32(static_cast<int>(load_u32(e + 64 + 4 * g)));
          for (int h = 0; h < 2; ++h) {
            __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 64 * g + 32 * h));
            if constexpr (U::kSigned) x = _mm256_sign_epi8(x, ws);
            const __m256i p = _mm256_maddubs_epi16(w, x);
            s16[h] = g % kGroupSum == 0 ? p : _mm256_add_epi16(s16[h], p);
            if (g % kGroupSum == kGroupSum - 1) is[h] = _mm256_add_epi32(is[h], _mm256_madd_epi16(s16[h], ones));
          }
        }
        float d, m;
        std::memcpy(&d, e + 32, 4);
        std::memcpy(&m, e + 36, 4);
        for (int h = 0; h < 2; ++h) {
          const __m256 xd = _mm256_load_ps(reinterpret_cast<const float*>(xb + kLaneD + 32 * h));
          acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[h]), _mm256_mul_ps(_mm256_set1_ps(d), xd), acc[h]);
          if constexpr (U::kMin)
            acc[h] = _mm256_fmadd_ps(_mm256_set1_ps(m),
                                     _mm256_load_ps(reinterpret_cast<const float*>(xb + kLaneS + 32 * h)), acc[h]);
        }
      }
      _mm256_storeu_ps(out[r], acc[0]);
      _mm256_storeu_ps(out[r] + 8, acc[1]);
    }
  }
};

#endif  // SNAPKV_VNNI / SNAPKV_AVX2

}  // namespace snapkv::quant
