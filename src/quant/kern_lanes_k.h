// snapkv: token-lane prefill kernels (AVX-512 VNNI; AVX2) for the K-quants (see lane_driver.h).
// Per super-block, row and 16 tokens:
//   Q4_K/Q5_K: isum = sum_j sc[j] * sum_g dpbusd(u[32j+4g..], x[..]);  msum = sum_j m[j] * bsum32[j]
//              acc = fma(float(isum), d*dx, acc); acc = fnmadd(float(msum), dmin*dx, acc)
//   Q6_K:      isum = sum_g sc[g] * dot16_g - 32 * sum_g sc[g] * bsum16[g];  acc = fma(float(isum), d*dx, acc)
// with the integer parts exact (as ggml_vec_dot_q*_K_q8_K). The AVX2 policies (end of this file)
// compute the same integers with vpmaddubsw / vpmaddwd and the same float operations in the same
// order on two 8-lane halves of each 16-token tile, so their outputs are bit for bit the VNNI
// ones (tests/quant/test_kern_lanes.cpp writes the arithmetic out in scalar code).
#pragma once

#include <cstring>

#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/kern_kquants.h"
#include "quant/lane_driver.h"
#include "quant/simd.h"

namespace snapkv::quant {

// Lane layout of one token tile for one super-block:
//   x quants: 64 groups x 16 tokens x 4 bytes | d[16] f32 | bsum16 pairs [8][16] i32
//   (lo = bsum16[2i], hi = bsum16[2i+1]) | bsum32 pairs [4][16] i32.
inline constexpr size_t kLaneKXq = 0;
inline constexpr size_t kLaneKD = 4096;
inline constexpr size_t kLaneKBs16 = 4160;
inline constexpr size_t kLaneKBs32 = 4672;
inline constexpr size_t kLaneKBlock = 4928;

/// Transposes token tile `tile` of Q8_K rows (act_quant.h) into the lane layout.
inline void build_lane_tile_k(const uint8_t* act, size_t a_stride, int64_t n_tokens, int64_t cols, int64_t tile,
                              uint8_t* out) {
  const int64_t nb = cols / 256;
  std::memset(out, 0, static_cast<size_t>(nb) * kLaneKBlock);
  auto pair = [](int16_t lo, int16_t hi) {
    return static_cast<uint32_t>(static_cast<uint16_t>(lo)) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
  };
  for (int l = 0; l < kLanes; ++l) {
    const int64_t t = tile * kLanes + l;
    if (t >= n_tokens) break;
    const uint8_t* row = act + static_cast<size_t>(t) * a_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = row + static_cast<size_t>(b) * kQ8KBlock;
      uint8_t* dst = out + static_cast<size_t>(b) * kLaneKBlock;
      for (int g = 0; g < 64; ++g) std::memcpy(dst + kLaneKXq + 64 * g + 4 * l, src + 4 * g, 4);
      std::memcpy(dst + kLaneKD + 4 * l, src + kQ8KD, 4);
      int16_t bs16[16], bs32[8];
      std::memcpy(bs16, src + kQ8KBsum16, sizeof(bs16));
      std::memcpy(bs32, src + kQ8KBsum32, sizeof(bs32));
      for (int i = 0; i < 8; ++i) {
        const uint32_t p = pair(bs16[2 * i], bs16[2 * i + 1]);
        std::memcpy(dst + kLaneKBs16 + 64 * i + 4 * l, &p, 4);
      }
      for (int i = 0; i < 4; ++i) {
        const uint32_t p = pair(bs32[2 * i], bs32[2 * i + 1]);
        std::memcpy(dst + kLaneKBs32 + 64 * i + 4 * l, &p, 4);
      }
    }
  }
}

#if defined(SNAPKV_AVX2)

// Unpacked (row, super-block) entry: u8 u[256] (unsigned quants in element order) |
// i32 sc[16] @256 | i32 pairs[8] @320 (int16 pairs: mins for Q4_K/Q5_K, scales for Q6_K) |
// f32 d @352 | f32 dmin @356.
inline constexpr size_t kEntSc = 256;
inline constexpr size_t kEntPairs = 320;
inline constexpr size_t kEntD = 352;
inline constexpr size_t kEntDmin = 356;

inline uint32_t i16_pair(int lo, int hi) {
  return static_cast<uint32_t>(static_cast<uint16_t>(lo)) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
}

/// What the VNNI and AVX2 policies of Q4_K / Q5_K share: the lane layout and the unpacked entry.
template <bool kFive>
struct LaneQ45KCommon {
  static constexpr int64_t kBlock = 256;
  static constexpr size_t kTileBlockBytes = kLaneKBlock;
  static constexpr size_t kEntryBytes = 384;
  static constexpr int kQs = kFive ? kQ5_KQs : kQ4_KQs;

  static void build_tile(const uint8_t* act, size_t a_stride, int64_t n_tokens, int64_t cols, int64_t tile,
                         uint8_t* out) {
    build_lane_tile_k(act, a_stride, n_tokens, cols, tile, out);
  }
  static void unpack(const uint8_t* blk, uint8_t* e) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQs + 32 * j));
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ5_KQh));
        const __m256i one = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(e + 64 * j), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(e + 64 * j + 32), hi);
    }
    uint8_t sc[8], mn[8];
    decode_k4_scales(blk + 4, sc, mn);
    for (int j = 0; j < 8; ++j) {
      const int32_t v = sc[j];
      std::memcpy(e + kEntSc + 4 * j, &v, 4);
    }
    for (int i = 0; i < 4; ++i) {
      const uint32_t p = i16_pair(mn[2 * i], mn[2 * i + 1]);
      std::memcpy(e + kEntPairs + 4 * i, &p, 4);
    }
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    std::memcpy(e + kEntD, &d, 4);
    std::memcpy(e + kEntDmin, &dmin, 4);
  }
  static void zero(uint8_t* e) { std::memset(e, 0, kEntryBytes); }
};

/// What the VNNI and AVX2 policies of Q6_K share.
struct LaneQ6KCommon {
  static constexpr int64_t kBlock = 256;
  static constexpr size_t kTileBlockBytes = kLaneKBlock;
  static constexpr size_t kEntryBytes = 384;

  static void build_tile(const uint8_t* act, size_t a_stride, int64_t n_tokens, int64_t cols, int64_t tile,
                         uint8_t* out) {
    build_lane_tile_k(act, a_stride, n_tokens, cols, tile, out);
  }
  static void unpack(const uint8_t* blk, uint8_t* e) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQl + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQl + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6_KQh + 32 * h));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
      };
      for (int k = 0; k < 4; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(e + 128 * h + 32 * k), q[k]);
    }
    const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6_KScales);
    for (int g = 0; g < 16; ++g) {
      const int32_t v = sc[g];
      std::memcpy(e + kEntSc + 4 * g, &v, 4);
    }
    for (int i = 0; i < 8; ++i) {
      const uint32_t p = i16_pair(sc[2 * i], sc[2 * i + 1]);
      std::memcpy(e + kEntPairs + 4 * i, &p, 4);
    }
    const float d = load_f16(blk + kQ6_KD);
    std::memcpy(e + kEntD, &d, 4);
  }
  static void zero(uint8_t* e) { std::memset(e, 0, kEntryBytes); }
};

#endif  // SNAPKV_AVX2

#if defined(SNAPKV_VNNI)

SNAPKV_INLINE __m512i bcast32(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(load_u32(p))); }
SNAPKV_INLINE __m512 bcastf(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return _mm512_set1_ps(f);
}

template <bool kFive>
struct LaneQ45K : LaneQ45KCommon<kFive> {
  using LaneQ45KCommon<kFive>::kEntryBytes;
  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    __m512 acc[kLaneRows];
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* xs = xt + static_cast<size_t>(b) * kLaneKBlock;
      const uint8_t* eb = entries + static_cast<size_t>(b) * kLaneRows * kEntryBytes;
      __m512i isum[kLaneRows];
#pragma GCC unroll 16
      for (int r = 0; r < kLaneRows; ++r) isum[r] = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {  // sub-blocks of 32
        __m512i xv[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) xv[g] = _mm512_load_si512(xs + kLaneKXq + 64 * (8 * j + g));
#pragma GCC unroll 16
        for (int r = 0; r < kLaneRows; ++r) {
          const uint8_t* e = eb + r * kEntryBytes;
          __m512i is = _mm512_setzero_si512();
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) is = _mm512_dpbusd_epi32(is, bcast32(e + 32 * j + 4 * g), xv[g]);
          isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(is, bcast32(e + kEntSc + 4 * j)));
        }
      }
      const __m512 xd = _mm512_load_ps(xs + kLaneKD);
#pragma GCC unroll 16
      for (int r = 0; r < kLaneRows; ++r) {
        const uint8_t* e = eb + r * kEntryBytes;
        __m512i ms = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          ms = _mm512_dpwssd_epi32(ms, _mm512_load_si512(xs + kLaneKBs32 + 64 * i), bcast32(e + kEntPairs + 4 * i));
        }
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(bcastf(e + kEntD), xd), acc[r]);
        acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(bcastf(e + kEntDmin), xd), acc[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) _mm512_storeu_ps(out[r], acc[r]);
  }
};

struct LaneQ6K : LaneQ6KCommon {
  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    __m512 acc[kLaneRows];
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* xs = xt + static_cast<size_t>(b) * kLaneKBlock;
      const uint8_t* eb = entries + static_cast<size_t>(b) * kLaneRows * kEntryBytes;
      __m512i isum[kLaneRows];
#pragma GCC unroll 16
      for (int r = 0; r < kLaneRows; ++r) isum[r] = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {  // chunks of 32 = scale groups 2c, 2c+1
        __m512i xv[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) xv[g] = _mm512_load_si512(xs + kLaneKXq + 64 * (8 * c + g));
#pragma GCC unroll 16
        for (int r = 0; r < kLaneRows; ++r) {
          const uint8_t* e = eb + r * kEntryBytes;
          __m512i i0 = _mm512_setzero_si512(), i1 = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int g = 0; g < 4; ++g) {
            i0 = _mm512_dpbusd_epi32(i0, bcast32(e + 32 * c + 4 * g), xv[g]);
            i1 = _mm512_dpbusd_epi32(i1, bcast32(e + 32 * c + 16 + 4 * g), xv[4 + g]);
          }
          isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(i0, bcast32(e + kEntSc + 8 * c)));
          isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(i1, bcast32(e + kEntSc + 8 * c + 4)));
        }
      }
      const __m512 xd = _mm512_load_ps(xs + kLaneKD);
#pragma GCC unroll 16
      for (int r = 0; r < kLaneRows; ++r) {
        const uint8_t* e = eb + r * kEntryBytes;
        __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          corr = _mm512_dpwssd_epi32(corr, _mm512_load_si512(xs + kLaneKBs16 + 64 * i), bcast32(e + kEntPairs + 4 * i));
        }
        const __m512i is = _mm512_sub_epi32(isum[r], _mm512_slli_epi32(corr, 5));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(bcastf(e + kEntD), xd), acc[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kLaneRows; ++r) _mm512_storeu_ps(out[r], acc[r]);
  }
};

#elif defined(SNAPKV_AVX2)

// AVX2 without VNNI: the integers of the VNNI policies from vpmaddubsw (unsigned quant times
// signed activation, byte pairs summed to int16) and vpmaddwd (int16 lanes times a scale or a
// minimum, pairs summed to int32), then the VNNI policies' float operations in their order, on
// the two 8-lane halves (tokens 0-7, 8-15) of each tile; kRows weight rows at a time share the
// activation loads. The int16 sums stay exact: kGroupSum vpmaddubsw results of at most
// 2 x kMaxU x 127 each (Q4_K 8 x 3810 = 30480, Q5_K 4 x 7874 = 31496, Q6_K 2 x 16002 = 32004).

/// The 32-bit word at p in all 8 lanes.
SNAPKV_INLINE __m256i bcast32(const uint8_t* p) { return _mm256_set1_epi32(static_cast<int>(load_u32(p))); }
/// The int32 at p (a scale in -128..127 or 0..63) as int16 in all 16 lanes.
SNAPKV_INLINE __m256i bcast_i16(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi16(static_cast<int16_t>(v));
}
SNAPKV_INLINE __m256 bcastf(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return _mm256_set1_ps(f);
}

/// The AVX2 tile of both K-quant policies P: per pass of P::kRows weight rows and per
/// super-block, the int32 sums isum[r][h] = sum over the 64 groups G of 4 elements of
/// sc(G) * (u . x), where the int16 sums of P::kGroupSum consecutive groups are multiplied by their
/// scale (the int32 at kEntSc + 4 * (G / P::kGroupsPerScale) of the entry) with vpmaddwd; then
/// acc = P::finish(entry, x block, half, x scales, isum, acc) adds the super-block (the policy's
/// corrections and float operations).
template <class P>
SNAPKV_INLINE void k_tile_avx2(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
  constexpr int R = P::kRows, kGroupSum = P::kGroupSum, kGroupsPerScale = P::kGroupsPerScale;
  static_assert(kLaneRows % R == 0 && kGroupsPerScale % kGroupSum == 0);
  for (int r0 = 0; r0 < kLaneRows; r0 += R) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* xs = xt + static_cast<size_t>(b) * kLaneKBlock;
      const uint8_t* e[R];
      for (int r = 0; r < R; ++r) e[r] = entries + (static_cast<size_t>(b) * kLaneRows + r0 + r) * P::kEntryBytes;
      __m256i isum[R][2], s16[R][2];
      for (int r = 0; r < R; ++r) isum[r][0] = isum[r][1] = s16[r][0] = s16[r][1] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {  // 32 elements (8 groups) at a time
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const int G = 8 * j + g;
          const uint8_t* xg = xs + kLaneKXq + 64 * G;
          const __m256i x[2] = {_mm256_load_si256(reinterpret_cast<const __m256i*>(xg)),
                                _mm256_load_si256(reinterpret_cast<const __m256i*>(xg + 32))};
          for (int r = 0; r < R; ++r) {
            const __m256i w = bcast32(e[r] + 4 * G);
            for (int h = 0; h < 2; ++h) {
              const __m256i p = _mm256_maddubs_epi16(w, x[h]);
              s16[r][h] = g % kGroupSum == 0 ? p : _mm256_add_epi16(s16[r][h], p);
              if (g % kGroupSum == kGroupSum - 1)
                isum[r][h] = _mm256_add_epi32(
                    isum[r][h], _mm256_madd_epi16(s16[r][h], bcast_i16(e[r] + kEntSc + 4 * (G / kGroupsPerScale))));
            }
          }
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256 xd = _mm256_load_ps(reinterpret_cast<const float*>(xs + kLaneKD + 32 * h));
        for (int r = 0; r < R; ++r) acc[r][h] = P::finish(e[r], xs, h, xd, isum[r][h], acc[r][h]);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(out[r0 + r], acc[r][0]);
      _mm256_storeu_ps(out[r0 + r] + 8, acc[r][1]);
    }
  }
}

/// sum_i int16 pairs of the x block at xs + off (half h) times the entry's int16 pairs at
/// e + kEntPairs, over n pairs (vpmaddwd; VNNI: vpdpwssd).
SNAPKV_INLINE __m256i pair_sums(const uint8_t* e, const uint8_t* xs, size_t off, int h, int n) {
  __m256i s = _mm256_setzero_si256();
  for (int i = 0; i < n; ++i)
    s = _mm256_add_epi32(
        s, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(xs + off + 64 * i + 32 * h)),
                             bcast32(e + kEntPairs + 4 * i)));
  return s;
}

template <bool kFive>
struct LaneQ45K : LaneQ45KCommon<kFive> {
  using LaneQ45KCommon<kFive>::kEntryBytes;
  static constexpr int kMaxU = kFive ? 31 : 15;
  static constexpr int kGroupSum = 8 * 2 * kMaxU * 127 <= 32767 ? 8 : 4;
  static_assert(kGroupSum * 2 * kMaxU * 127 <= 32767 && 8 % kGroupSum == 0);
  /// Weight rows per pass of the tile (Zen 3: 2 rows 0.85-0.95x of 1 on gemma.attn_output and
  /// the 2048 x 1024 FFN rows, Q4_K and Q5_K).
  static constexpr int kRows = 1;
  static constexpr int kGroupsPerScale = 8;  ///< one scale and one minimum per 32 elements

  /// acc + isum * (d dx) - (sum_j m[j] bsum32[j]) * (dmin dx), as the VNNI policy.
  static SNAPKV_INLINE __m256 finish(const uint8_t* e, const uint8_t* xs, int h, __m256 xd, __m256i isum, __m256 acc) {
    const __m256i ms = pair_sums(e, xs, kLaneKBs32, h, 4);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(bcastf(e + kEntD), xd), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(bcastf(e + kEntDmin), xd), acc);
  }
  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    k_tile_avx2<LaneQ45K>(entries, xt, nb, out);
  }
};

struct LaneQ6K : LaneQ6KCommon {
  static constexpr int kGroupSum = 2;  // quants 0..63
  static_assert(kGroupSum * 2 * 63 * 127 <= 32767 && 8 % kGroupSum == 0);
  /// Weight rows per pass of the tile, sharing the activation loads (Zen 3, gemma.ffn_down:
  /// 2 rows 1.15x over 1, 4 rows 0.94x).
  static constexpr int kRows = 2;
  static constexpr int kGroupsPerScale = 4;  ///< one int8 scale per 16 elements

  /// acc + (isum - 32 sum_g sc[g] bsum16[g]) * (d dx), as the VNNI policy.
  static SNAPKV_INLINE __m256 finish(const uint8_t* e, const uint8_t* xs, int h, __m256 xd, __m256i isum, __m256 acc) {
    const __m256i is = _mm256_sub_epi32(isum, _mm256_slli_epi32(pair_sums(e, xs, kLaneKBs16, h, 8), 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(bcastf(e + kEntD), xd), acc);
  }
  static void tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes]) {
    k_tile_avx2<LaneQ6K>(entries, xt, nb, out);
  }
};

#endif  // SNAPKV_VNNI / SNAPKV_AVX2

}  // namespace snapkv::quant
