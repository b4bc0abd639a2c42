// Decode scores over Q8_0 keys with an int16 query and `vpdpwssd` (attention/decode_q8_keys.h has
// the arithmetic, the layouts and the measurements). Its own translation unit, called once per
// head tile and 64-key block: see scores_rows_q8_i16's comment in the header for why.
#include "attention/decode_q8_keys.h"

#if defined(SNAPKV_DECODE_Q8_KEYS_I16)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "attention/decode_simd.h"
#include "core/hsum16.h"

namespace snapkv::attn {

// Row h's 32-dim blocks: largest magnitude, scale, the two rounded halves; then the stores in the
// tiles' order (QueryI16's comment) and the scale vectors.
unsigned query_i16_set(const float* const* q, int nh, int hd, QueryI16& out) {
  if (hd % kKVQ8Block != 0 || hd > kQueryI16MaxDim || nh > kQueryI16Heads) return 0;
  unsigned taken = 0;
  for (int h = 0; h < nh; ++h) {
    const float* x = q[h];
    int16_t* v = out.v[h];
    float scale[kQueryI16MaxDim / kKVQ8Block];
    __mmask16 bad = 0;
    // Block b: its two 16-element halves' magnitudes, the largest, then the rounded halves.
    // Rounded to nearest (even) and saturated to [-32768, 32767] (a product a hair above 32767
    // after the division's rounding stays 32767).
    __m256i half[kQueryI16MaxDim / 16];
    for (int b = 0; b < hd / kKVQ8Block; ++b) {
      const __m512 lo = _mm512_loadu_ps(x + 32 * b), hi = _mm512_loadu_ps(x + 32 * b + 16);
      const __m512 alo = _mm512_abs_ps(lo), ahi = _mm512_abs_ps(hi);
      bad |= _mm512_cmp_ps_mask(alo, _mm512_set1_ps(3.0e38f), _CMP_NLE_UQ);  // NaN or beyond f32's range
      bad |= _mm512_cmp_ps_mask(ahi, _mm512_set1_ps(3.0e38f), _CMP_NLE_UQ);
      const __m512 vmax = _mm512_maskz_max_ps(0xFFFF, alo, ahi);
      const __m256 m8 = _mm256_max_ps(low8(vmax), high8(vmax));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
      const bool zero = !(amax >= 1e-30f);
      const __m512 inv = _mm512_set1_ps(zero ? 0.0f : 32767.0f / amax);
      scale[b] = zero ? 0.0f : amax / 32767.0f;
      half[2 * b] =
          _mm512_maskz_cvtsepi32_epi16(0xFFFF, _mm512_maskz_cvtps_epi32(0xFFFF, _mm512_maskz_mul_ps(0xFFFF, lo, inv)));
      half[2 * b + 1] =
          _mm512_maskz_cvtsepi32_epi16(0xFFFF, _mm512_maskz_cvtps_epi32(0xFFFF, _mm512_maskz_mul_ps(0xFFFF, hi, inv)));
    }
    if (bad != 0) continue;
    taken |= 1u << h;
    auto store = [&](int at, __m256i h16) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + at), h16); };
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
      const int b = d / kKVQ8Block;
      store(d, half[2 * b]);           // dims d .. d + 16
      store(d + 16, half[2 * b + 2]);  // dims d + 32 .. d + 48
      store(d + 32, half[2 * b + 1]);  // dims d + 16 .. d + 32
      store(d + 48, half[2 * b + 3]);  // dims d + 48 .. d + 64
      for (int l = 0; l < 8; ++l) {
        out.bscale[h][d / 64][l] = scale[b];
        out.bscale[h][d / 64][l + 8] = scale[b + 1];
      }
    }
    if (d < hd) {
      const int b = d / kKVQ8Block;
      store(d, half[2 * b]);
      store(d + 16, half[2 * b + 1]);
      for (int l = 0; l < 16; ++l) out.bscale[h][d / 64][l] = scale[b];
    }
  }
  return taken;
}

namespace {

/// int8 quants [o, o + 16) of the Q8_0 blocks at b0 and b1 (block pointers, scale first), as 32
/// int16: b0's then b1's.
inline __m512i keys16(const uint8_t* b0, const uint8_t* b1, int o) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2 + o));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + 2 + o));
  return _mm512_maskz_cvtepi8_epi16(0xFFFFFFFF, _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/// [d of block b0 x 8 | d of block b1 x 8] in f32 (the blocks' F16 scales).
inline __m512 scales16(const uint8_t* b0, const uint8_t* b1) {
  uint16_t s0, s1;
  std::memcpy(&s0, b0, sizeof(s0));
  std::memcpy(&s1, b1, sizeof(s1));
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(s0))),
                                            _mm_set1_epi16(static_cast<short>(s1)), 1);
  return _mm512_maskz_cvtph_ps(0xFFFF, h);
}

/// S[h * s_stride + j] = scale x sum_d (row h0 + h's rounded element d) x k_j[d] (dequantized) for
/// h < NH, j < NJ; K: NJ Q8_0 rows of rb bytes from K (hd % 32 == 0).
template <int NH, int NJ>
[[gnu::always_inline]] inline void scores_tile_q8_i16(const QueryI16& q, int h0, const uint8_t* K, size_t rb, int hd,
                                                      float scale, float* S, int s_stride) {
  static_assert(NH * NJ <= 16);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  int d = 0;
  for (; d + 64 <= hd; d += 64) {
    const size_t b = static_cast<size_t>(d / kKVQ8Block) * kKVQ8BlockBytes;
    for (int j = 0; j < NJ; ++j) {
      const uint8_t* b0 = K + static_cast<size_t>(j) * rb + b;
      const uint8_t* b1 = b0 + kKVQ8BlockBytes;
      const __m512i ka = keys16(b0, b1, 0);
      const __m512i kb = keys16(b0, b1, 16);
      const __m512 dk = scales16(b0, b1);
      for (int h = 0; h < NH; ++h) {
        __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), ka, _mm512_load_si512(q.v[h0 + h] + d));
        s = _mm512_dpwssd_epi32(s, kb, _mm512_load_si512(q.v[h0 + h] + d + 32));
        const __m512 w = _mm512_mul_ps(dk, _mm512_load_ps(q.bscale[h0 + h][d / 64]));
        acc[h * NJ + j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s), w, acc[h * NJ + j]);
      }
    }
  }
  if (d < hd) {  // a last 32-dim block: one register of 32 int16 per key
    const size_t b = static_cast<size_t>(d / kKVQ8Block) * kKVQ8BlockBytes;
    for (int j = 0; j < NJ; ++j) {
      const uint8_t* b0 = K + static_cast<size_t>(j) * rb + b;
      const __m512i k =
          _mm512_maskz_cvtepi8_epi16(0xFFFFFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2)));
      const __m512 dk = scales16(b0, b0);
      for (int h = 0; h < NH; ++h) {
        const __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), k, _mm512_load_si512(q.v[h0 + h] + d));
        const __m512 w = _mm512_mul_ps(dk, _mm512_load_ps(q.bscale[h0 + h][d / 64]));
        acc[h * NJ + j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s), w, acc[h * NJ + j]);
      }
    }
  }
  if constexpr (NH * NJ >= 8) {
    const __m512 r = _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale));
    for (int h = 0; h < NH; ++h)
      _mm512_mask_storeu_ps(S + h * (s_stride - NJ), static_cast<__mmask16>(((1u << NJ) - 1) << (h * NJ)), r);
  } else {
    for (int i = 0; i < NH * NJ; ++i) S[i / NJ * s_stride + i % NJ] = scale * hsum16_one(acc[i]);
  }
}

/// S[h * s_stride + j] = scale x dot(row h0 + h of q, K[j]) for h < NH, j < nk over nk Q8_0 key
/// rows of rb bytes from K, the queries given as QueryI16 (query_i16_set). Tiles of 16 / NH keys (4
/// for NH = 3), then single keys; each tile first asks pf (may be null) for its key rows.
template <int NH>
void scores_heads_q8_i16(const QueryI16& q, int h0, const uint8_t* K, size_t rb, int nk, int hd, float scale, float* S,
                         int s_stride, const KVPrefetch* pf) {
  constexpr int NJ = NH == 3 ? 4 : 16 / NH;
  int j = 0;
  for (; j + NJ <= nk; j += NJ) {
    if (pf) pf->keys(j, NJ);
    scores_tile_q8_i16<NH, NJ>(q, h0, K + static_cast<size_t>(j) * rb, rb, hd, scale, S + j, s_stride);
  }
  for (; j < nk; ++j) {
    if (pf) pf->keys(j, 1);
    scores_tile_q8_i16<NH, 1>(q, h0, K + static_cast<size_t>(j) * rb, rb, hd, scale, S + j, s_stride);
  }
}

}  // namespace

/// scores_heads_q8_i16 for rows [h0, h0 + nh) of q, nh in [1, kQueryI16Heads - h0].
void scores_rows_q8_i16(const QueryI16& q, int h0, int nh, const uint8_t* K, size_t rb, int nk, int hd, float scale,
                        float* S, int s_stride, const KVPrefetch* pf) {
  switch (nh) {
    case 1:
      return scores_heads_q8_i16<1>(q, h0, K, rb, nk, hd, scale, S, s_stride, pf);
    case 2:
      return scores_heads_q8_i16<2>(q, h0, K, rb, nk, hd, scale, S, s_stride, pf);
    case 3:
      return scores_heads_q8_i16<3>(q, h0, K, rb, nk, hd, scale, S, s_stride, pf);
    default:
      return scores_heads_q8_i16<4>(q, h0, K, rb, nk, hd, scale, S, s_stride, pf);
  }
}

}  // namespace snapkv::attn

#endif  // SNAPKV_DECODE_Q8_KEYS_I16
