// snapkv: decode scores over keys stored transposed in 16-key tiles ("K^T tiles"), a layout
// that removes the horizontal sums from the decode attention kernel (issue 13).
//
// Status: a measured prototype, not used by the engine. The KV cache stores key rows and
// attention/decode.cpp reads them with the row tiles of decode_simd.h; this header, its test (the
// scores are the row tiles' bits) and bench/bench_ktiles.cpp (their speed) let the cache layout
// change be judged per CPU before it is made (docs/attention.md, "Decode attention: K^T tiles").
// On the Zen 4 VM (2026-12-04, five runs) the tiles gave no gain at the SmolLM2 shape (median
// 0.99x, scores and whole block) and 1.16-1.30x on the scores, 1.11-1.27x on the whole block, at
// Gemma 3's: with every shuffle gone and no gain, the SmolLM2-shaped row kernel is bound by its
// FMAs and conversions (consistent with Zen 4 issuing one 512-bit FMA per cycle, shuffles beside
// it); a CPU with two 512-bit FMA units (Intel Xeon) is where the shuffles may bind instead.
// The AVX2 form (Zen 3, 2026-12-06): scores 1.26-1.30x (SmolLM2 shape) and 1.05-1.12x (Gemma 3),
// the whole block 1.03-1.09x and 0.99-1.01x (docs/benchmarks.md, "K^T tiles: a prototype"); in
// session 50, 10 runs: scores 1.36-1.38x and 1.47-1.51x, the block 1.08-1.11x and 1.11-1.16x.
// scores_ktile64 (AVX-512, session 58) drops the row tiles' bits for the natural order and keeps a
// whole 64-key block's accumulators in registers: on Zen 4 the SmolLM2-shaped scores 1.34x (at the
// FMA rate), the whole block 1.13x; Gemma 3's 1.11x / 1.03x ("K^T tiles in their natural order").
//
// Why: with key rows, a score q . k_j ends in a 16-lane register that has to be summed
// across its lanes (core/hsum16.h), ~10 512-bit shuffles and adds per key at the SmolLM2 shape
// (3 query heads per KV head, head_dim 64). With the keys of a tile in the 16 lanes, every sum is
// a vertical add: the scores of 16 keys come out of NH x 16 partial sums and 15 adds per head.
//
// Bits: the tile sums exactly as the row tiles do. A row tile accumulates q . k_j in one 16-lane
// register whose lane l holds the products of the elements d = l (mod 16) in ascending d, then
// reduces it as x_k = lane k + lane k + 8 (k < 8) and ((x0 + x4) + (x1 + x5)) + ((x2 + x6) +
// (x3 + x7)), then multiplies by the scale. Here P_l, a register over the tile's 16 keys, sums the
// same products in the same order, and the reduction is the same tree on whole registers.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attention/simd.h"

namespace snapkv::attn {

/// Keys per K^T tile. Tile t holds keys [16t, 16t + 16) as [head_dim][16] IEEE halves: element d
/// of key 16t + i at offset d * 16 + i.
constexpr int kKTileKeys = 16;

/// Calls f(std::integral_constant<int, NH>{}) for a head tile of nh query heads, nh in [1, 4]
/// (4 for more): the run-time head count as the score kernels' template argument.
template <class F>
inline void with_head_count(int nh, F&& f) {
  switch (nh) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

/// Writes keys [0, n) of `rows` (row-major F16, [n][hd], n <= kKTileKeys) into one K^T tile
/// ([hd][16] halves); lanes n.. are zero.
inline void pack_ktile(const uint16_t* rows, int n, int hd, uint16_t* tile) {
  std::memset(tile, 0, sizeof(uint16_t) * static_cast<size_t>(hd) * kKTileKeys);
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < hd; ++d) tile[static_cast<size_t>(d) * kKTileKeys + i] = rows[static_cast<size_t>(i) * hd + d];
}

#if SNAPKV_ATTN_AVX512
/// Row d of a K^T tile (the 16 keys' element d) as f32 lanes.
inline __m512 ktile_row(const uint16_t* tile, int d) {
  return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + d * kKTileKeys)));
}

/// y[h] = x_k + x_(k+4) for h < NH, k < 4, where x_j = P_j + P_(j+8) and P_l sums q[h][d] *
/// key[d] over d = l (mod 16), ascending d (hd % 16 == 0): the first level of the row tiles' tree.
/// The four partial sums of each head run as separate chains (4 x NH accumulators in flight).
template <int NH>
[[gnu::always_inline]] inline void ktile_quad(const float* const* q, const uint16_t* tile, int hd, int k, __m512* y) {
  __m512 p0[NH], p8[NH], p4[NH], p12[NH];  // P_k, P_(k+8), P_(k+4), P_(k+12)
  for (int h = 0; h < NH; ++h) p0[h] = p8[h] = p4[h] = p12[h] = _mm512_setzero_ps();
  for (int d = k; d < hd; d += 16) {
    const __m512 r0 = ktile_row(tile, d);
    const __m512 r8 = ktile_row(tile, d + 8);
    const __m512 r4 = ktile_row(tile, d + 4);
    const __m512 r12 = ktile_row(tile, d + 12);
    for (int h = 0; h < NH; ++h) {
      p0[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d]), r0, p0[h]);
      p8[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d + 8]), r8, p8[h]);
      p4[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d + 4]), r4, p4[h]);
      p12[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d + 12]), r12, p12[h]);
    }
  }
  for (int h = 0; h < NH; ++h) y[h] = _mm512_add_ps(_mm512_add_ps(p0[h], p8[h]), _mm512_add_ps(p4[h], p12[h]));
}

/// S[h * s_stride + i] = scale * q[h] . key i of the tile, for h < NH <= 4 and all 16 keys, with
/// the bits of scores_tile() on the same keys as rows (file comment). hd % 16 == 0; q[h] holds hd
/// floats.
template <int NH>
[[gnu::always_inline]] inline void scores_ktile(const float* const* q, const uint16_t* tile, int hd, float scale,
                                                float* S, int s_stride) {
  static_assert(NH >= 1 && NH <= 4);
  __m512 y0[NH], y1[NH], c[NH];
  ktile_quad<NH>(q, tile, hd, 0, y0);  // x0 + x4
  ktile_quad<NH>(q, tile, hd, 1, y1);  // x1 + x5
  for (int h = 0; h < NH; ++h) c[h] = _mm512_add_ps(y0[h], y1[h]);
  ktile_quad<NH>(q, tile, hd, 2, y0);  // x2 + x6
  ktile_quad<NH>(q, tile, hd, 3, y1);  // x3 + x7
  const __m512 vs = _mm512_set1_ps(scale);
  for (int h = 0; h < NH; ++h)
    _mm512_storeu_ps(S + h * s_stride, _mm512_mul_ps(_mm512_add_ps(c[h], _mm512_add_ps(y0[h], y1[h])), vs));
}

/// Tiles per block of scores_ktile64: 4 x 16 = 64 keys, the decode kernel's key block.
constexpr int kKTilesPerBlock = 4;

/// S[h * s_stride + i] = scale * q[h] . key i for h < NH <= 4 and the 64 keys of four consecutive
/// K^T tiles (`tiles`: [4][hd][16] halves, as pack_ktile writes them one after the other), in the
/// natural order: score i is fma(q[h][d], key_i[d], .) over d = 0, 1, ..., hd - 1 from 0 in one lane,
/// then times scale (tests: exactly std::fma in that order). NOT the row tiles' bits (their
/// 16-lane partial sums and tree). The NH x 4 accumulators stay in registers over the whole head
/// (no horizontal sum, no partial store); each query element is broadcast once for 64 keys. The
/// question it answers (bench_ktiles, KTiles/.../ktiles64): what the scores cost once the layout
/// and the order are both free. hd >= 1.
template <int NH>
[[gnu::always_inline]] inline void scores_ktile64(const float* const* q, const uint16_t* tiles, int hd, float scale,
                                                  float* S, int s_stride) {
  static_assert(NH >= 1 && NH <= 4);
  __m512 acc[NH][kKTilesPerBlock];
  for (int h = 0; h < NH; ++h)
    for (int t = 0; t < kKTilesPerBlock; ++t) acc[h][t] = _mm512_setzero_ps();
  const size_t ts = static_cast<size_t>(hd) * kKTileKeys;
  for (int d = 0; d < hd; ++d) {
    __m512 r[kKTilesPerBlock];
    for (int t = 0; t < kKTilesPerBlock; ++t) r[t] = ktile_row(tiles + t * ts, d);
    for (int h = 0; h < NH; ++h) {
      const __m512 qb = _mm512_set1_ps(q[h][d]);
      for (int t = 0; t < kKTilesPerBlock; ++t) acc[h][t] = _mm512_fmadd_ps(qb, r[t], acc[h][t]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int h = 0; h < NH; ++h)
    for (int t = 0; t < kKTilesPerBlock; ++t)
      _mm512_storeu_ps(S + h * s_stride + kKTileKeys * t, _mm512_mul_ps(acc[h][t], vs));
}

/// scores_ktile64 over nh <= 4 heads (the run-time count of a head tile).
inline void scores_ktile64_heads(const float* const* q, int nh, const uint16_t* tiles, int hd, float scale, float* S,
                                 int s_stride) {
  with_head_count(nh, [&](auto NH) { scores_ktile64<NH()>(q, tiles, hd, scale, S, s_stride); });
}

#elif SNAPKV_ATTN_AVX2
// AVX2 (8 lanes): a 16-key tile in two halves of 8 keys. The row tiles' two 8-lane accumulators
// put the products of element d in lane d mod 8 of the first (d mod 16 < 8) or the second, then
// reduce x_l = a0[l] + a1[l] = P_l + P_(l+8) with hsum's tree ((x0 + x4) + (x1 + x5)) + ((x2 + x6)
// + (x3 + x7)). Here P_l of the 16 keys is computed one class l at a time (2 x NH registers: the
// FMA chains of 16 keys x NH heads in flight, each broadcast query element serving 16 keys),
// stored, and reduced by the same tree on whole registers.

/// Keys [8 half, 8 half + 8) of row d of a K^T tile as f32 lanes.
inline __m256 ktile_row8(const uint16_t* tile, int d, int half) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + d * kKTileKeys + 8 * half)));
}

/// S[h * s_stride + i] = scale * q[h] . key i of the tile, for h < NH <= 4 and all 16 keys, with
/// the bits of the AVX2 scores_tile() on the same keys as rows. hd % 16 == 0.
template <int NH>
[[gnu::always_inline]] inline void scores_ktile(const float* const* q, const uint16_t* tile, int hd, float scale,
                                                float* S, int s_stride) {
  static_assert(NH >= 1 && NH <= 4);
  __m256 P[16][NH][2];  // P[l][h][half]: products of the elements d = l (mod 16), ascending d
  for (int l = 0; l < 16; ++l) {
    __m256 p0[NH], p1[NH];
    for (int h = 0; h < NH; ++h) p0[h] = p1[h] = _mm256_setzero_ps();
    for (int d = l; d < hd; d += 16) {
      const __m256 r0 = ktile_row8(tile, d, 0);
      const __m256 r1 = ktile_row8(tile, d, 1);
      for (int h = 0; h < NH; ++h) {
        const __m256 qv = _mm256_broadcast_ss(q[h] + d);
        p0[h] = _mm256_fmadd_ps(qv, r0, p0[h]);
        p1[h] = _mm256_fmadd_ps(qv, r1, p1[h]);
      }
    }
    for (int h = 0; h < NH; ++h) {
      P[l][h][0] = p0[h];
      P[l][h][1] = p1[h];
    }
  }
  const __m256 vs = _mm256_set1_ps(scale);
  for (int h = 0; h < NH; ++h)
    for (int half = 0; half < 2; ++half) {
      __m256 x[8];
      for (int l = 0; l < 8; ++l) x[l] = _mm256_add_ps(P[l][h][half], P[l + 8][h][half]);
      const __m256 y0 = _mm256_add_ps(x[0], x[4]), y1 = _mm256_add_ps(x[1], x[5]);
      const __m256 y2 = _mm256_add_ps(x[2], x[6]), y3 = _mm256_add_ps(x[3], x[7]);
      const __m256 r = _mm256_add_ps(_mm256_add_ps(y0, y1), _mm256_add_ps(y2, y3));
      _mm256_storeu_ps(S + h * s_stride + 8 * half, _mm256_mul_ps(r, vs));
    }
}
#endif

#if SNAPKV_ATTN_AVX2
/// scores_ktile over nh <= 4 heads (the run-time count of a head tile).
inline void scores_ktile_heads(const float* const* q, int nh, const uint16_t* tile, int hd, float scale, float* S,
                               int s_stride) {
  with_head_count(nh, [&](auto NH) { scores_ktile<NH()>(q, tile, hd, scale, S, s_stride); });
}
#endif

}  // namespace snapkv::attn
