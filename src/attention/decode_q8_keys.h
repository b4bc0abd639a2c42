// Internal: decode scores over Q8_0 keys with integer dot products (AVX512-VNNI `vpdpwssd`), used
// by the split-K decode kernel (attention/decode.cpp) in place of scores_rows over attn::Q8Rows.
//
// Each query row is rounded once to int16 with one scale per 32-dim block, as the keys' Q8_0
// blocks (query_i16_set), each key row's int8 quants are sign-extended to int16 in registers, and
// `vpdpwssd` sums pairs of products in int32 (exact: |v| <= 32767, |q8| <= 128, four products per
// lane and 64-dim chunk). A 16-lane accumulator per (head, key) takes each 64-dim chunk as int32
// lanes 0-7 (the chunk's first 32-dim block) and 8-15 (its second), converted to f32 and
// multiplied by [d_k x d_q of block 0, x 8 | of block 1, x 8]; the 16 lanes are then summed by
// hsum16 and multiplied by the softmax scale. Against the f32 path (the dequantized keys times
// the f32 query) the only extra error is the query's rounding: at most d_q / 2 = max|q_block| /
// 65534 per element, so |score - score_f32| <= softmax_scale x sum_blocks max|q_b| / 65534 x
// sum_{d in b} |k_d| (plus f32 rounding of the sums), far below the Q8_0 keys' own rounding
// (d_k / 2 per element, d_k = max|k_block| / 127). ggml rounds the query to int8 per 32 elements
// (Q8_0) for the same product; 16 bits keep its error ~256x smaller. Scales per block, not per
// row, so that a query with a few channels hundreds of times larger than the rest keeps the rest
// precise (the fidelity task measured no difference on SmolLM2 / Gemma 3: docs/quality.md).
//
// Measured on Zen 4 (docs/benchmarks.md, "Q8_0 keys: decode scores on int16 dot products").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "attention/simd.h"
#include "core/hsum16.h"
#include "snapkv/kv_type.h"

#if SNAPKV_ATTN_AVX512 && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define SNAPKV_DECODE_Q8_KEYS_I16 1
#endif

namespace snapkv::attn {

/// Whether this build has the int16 path (AVX512-VNNI and AVX512BW).
inline constexpr bool kDecodeQ8KeysI16 =
#if defined(SNAPKV_DECODE_Q8_KEYS_I16)
    true;
#else
    false;
#endif

/// Whether decode takes the int16 path: kDecodeQ8KeysI16, unless the environment sets
/// SNAPKV_DECODE_Q8_KEYS_I16=0 (then the f32 tiles over attn::Q8Rows run, bit for bit the F32
/// cache's; for tests and old-against-new measurements on one host). Read once.
inline bool decode_q8_keys_i16() {
  static const bool on = [] {
    const char* e = std::getenv("SNAPKV_DECODE_Q8_KEYS_I16");
    return kDecodeQ8KeysI16 && !(e != nullptr && std::strcmp(e, "0") == 0);
  }();
  return on;
}

/// Largest head_dim the int16 path takes (longer rows keep the f32 path).
inline constexpr int kQueryI16MaxDim = 512;

/// Scalar statement of query_i16_set's rounding of one row, for references and tests (any build):
/// per 32-dim block b, out[d] = v_d x s_b with s_b = max_{d in b} |q[d]| / 32767 and v_d =
/// round_half_even(q[d] x (32767 / max_b)) clamped to [-32768, 32767] (f32 arithmetic, as
/// query_i16_set; a block whose max is below 1e-30 gives zeros), and returns true; returns false,
/// leaving out alone, for a row query_i16_set refuses (hd % 32 != 0, hd > kQueryI16MaxDim, an
/// element NaN, inf or above 3e38 in magnitude).
inline bool query_i16_round(const float* q, int hd, float* out) {
  if (hd % kKVQ8Block != 0 || hd > kQueryI16MaxDim) return false;
  for (int d = 0; d < hd; ++d)
    if (!(std::fabs(q[d]) <= 3.0e38f)) return false;
  for (int b = 0; b < hd; b += kKVQ8Block) {
    float amax = 0.0f;
    for (int d = b; d < b + kKVQ8Block; ++d) amax = std::max(amax, std::fabs(q[d]));
    if (!(amax >= 1e-30f)) {
      std::fill(out + b, out + b + kKVQ8Block, 0.0f);
      continue;
    }
    const float inv = 32767.0f / amax, s = amax / 32767.0f;
    for (int d = b; d < b + kKVQ8Block; ++d) out[d] = std::clamp(std::nearbyint(q[d] * inv), -32768.0f, 32767.0f) * s;
  }
  return true;
}

/// The query row as decode over Q8_0 keys multiplies it: query_i16_round's values (true) where
/// decode takes the int16 path for it (decode_q8_keys_i16() and query_i16_round accepts the row);
/// else false, out left alone (the row is scored in f32 as given).
inline bool query_i16_values(const float* q, int hd, float* out) {
  return decode_q8_keys_i16() && query_i16_round(q, hd, out);
}

#if defined(SNAPKV_DECODE_Q8_KEYS_I16)
/// Most query heads of one score tile (decode_simd.h's kHeadTile).
inline constexpr int kQueryI16Heads = 4;

/// Up to kQueryI16Heads query rows rounded to int16 with one scale per 32-dim block: element d of
/// row h ~= scale(h, d / 32) x v. Element order within a row: per 64-dim chunk c, the 32 elements
/// of register A (dims [64c, 64c + 16) then [64c + 32, 64c + 48)), then the 32 of register B (dims
/// [64c + 16, 64c + 32) then [64c + 48, 64c + 64)); a last 32-dim block (head_dim % 64 == 32) in
/// order. The scales as the tiles multiply them: bscale[h][c] = [scale of block 2c x 8 | of block
/// 2c + 1 x 8] (a last lone block: its scale x 16).
struct QueryI16 {
  alignas(64) int16_t v[kQueryI16Heads][kQueryI16MaxDim];
  alignas(64) float bscale[kQueryI16Heads][kQueryI16MaxDim / 64 + 1][16];
};

/// Rounds the nh <= kQueryI16Heads rows q[h][0..hd) into out, as query_i16_round. Returns the
/// rows it took as a bit mask (bit h: row h); a row holding NaN, inf or a magnitude above 3e38 is
/// left out (its slot unspecified: the f32 path's), and so is every row when hd % 32 != 0 or
/// hd > kQueryI16MaxDim.
inline unsigned query_i16_set(const float* const* q, int nh, int hd, QueryI16& out) {
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

namespace q8i16_detail {

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

}  // namespace q8i16_detail

/// S[h * s_stride + j] = scale x sum_d (row h0 + h's rounded element d) x k_j[d] (dequantized) for
/// h < NH, j < NJ; K: NJ Q8_0 rows of rb bytes from K (hd % 32 == 0).
template <int NH, int NJ>
[[gnu::always_inline]] inline void scores_tile_q8_i16(const QueryI16& q, int h0, const uint8_t* K, size_t rb, int hd,
                                                      float scale, float* S, int s_stride) {
  static_assert(NH * NJ <= 16);
  using namespace q8i16_detail;
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
template <int NH, typename Prefetch>
inline void scores_heads_q8_i16(const QueryI16& q, int h0, const uint8_t* K, size_t rb, int nk, int hd, float scale,
                                float* S, int s_stride, const Prefetch* pf) {
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

/// scores_heads_q8_i16 for rows [h0, h0 + nh) of q, nh in [1, kQueryI16Heads - h0].
template <typename Prefetch>
inline void scores_rows_q8_i16(const QueryI16& q, int h0, int nh, const uint8_t* K, size_t rb, int nk, int hd,
                               float scale, float* S, int s_stride, const Prefetch* pf) {
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

#endif  // SNAPKV_DECODE_Q8_KEYS_I16

}  // namespace snapkv::attn
