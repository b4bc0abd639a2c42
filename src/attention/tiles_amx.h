// Internal: the AMX tile loops of the BF16 prefill attention kernel (attention/prefill_bf16.cpp),
// which also defines the operand layouts used here:
//   Qp [hd/2][R] words: bf16 pairs of the pre-scaled queries, row r in word column r (a B tile);
//   Kw [64][hd/2] words: bf16 key rows (an A tile, keys as rows);
//   S  [64][R] f32: scores, key j in row j (C tiles);
//   Wt [R][32] words: bf16 probability pairs (p_{2 j2}, p_{2 j2 + 1}) of row r (an A tile);
//   Vp [32][hd] words: bf16 value pairs (v_{2 j2}[d], v_{2 j2 + 1}[d]) (a B tile);
//   acc [R][hd] f32: the unnormalized outputs (C tiles).
// Every tile is 16 rows x 64 bytes; registers: C 0-3, A 4-5, B 6-7.
#pragma once

#include "attention/amx.h"

#if SNAPKV_ATTN_AMX

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace snapkv::attn::amx {

/// The 64-byte tile configuration (palette 1): 8 tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
inline constexpr TileConfig kTileConfig{};

/// Loads the configuration into this thread's tile registers (each thread that runs tiles).
inline void configure() { _tile_loadconfig(&kTileConfig); }

/// GCC 12's _tile_loadd / _tile_stored are asm statements without memory operands: this barrier
/// makes every store the compiler holds back (packing, zeroing, rescaling) land before the tile
/// loads, and keeps later plain loads of the stored tiles after the tile stores.
inline void memory_barrier() { asm volatile("" ::: "memory"); }

/// Tile operands of one product: element (row, byte) of operand X's tile x at X[x] + row * X_stride
/// + byte, advanced by X_step bytes per k step (32 bf16 of the reduction).
struct Operand {
  const char* tile[2];
  size_t stride, step;
};

/// C[a][b] (= (accumulate ? C : 0) + sum over `ksteps` steps of A[a] x B[b]) for a < NA, b < NB,
/// each C tile a 16 x 16 f32 block at c[a][b] with row stride c_stride bytes.
template <int NA, int NB>
inline void mm(const Operand& A, const Operand& B, int ksteps, char* const (&c)[2][2], size_t c_stride,
               bool accumulate) {
  memory_barrier();
  if (accumulate) {
    _tile_loadd(0, c[0][0], c_stride);
    if constexpr (NB > 1) _tile_loadd(1, c[0][1], c_stride);
    if constexpr (NA > 1) _tile_loadd(2, c[1][0], c_stride);
    if constexpr (NA > 1 && NB > 1) _tile_loadd(3, c[1][1], c_stride);
  } else {
    _tile_zero(0);
    if constexpr (NB > 1) _tile_zero(1);
    if constexpr (NA > 1) _tile_zero(2);
    if constexpr (NA > 1 && NB > 1) _tile_zero(3);
  }
  for (int k = 0; k < ksteps; ++k) {
    const size_t ao = static_cast<size_t>(k) * A.step, bo = static_cast<size_t>(k) * B.step;
    _tile_loadd(4, A.tile[0] + ao, A.stride);
    if constexpr (NA > 1) _tile_loadd(5, A.tile[1] + ao, A.stride);
    _tile_loadd(6, B.tile[0] + bo, B.stride);
    if constexpr (NB > 1) _tile_loadd(7, B.tile[1] + bo, B.stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NB > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (NA > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (NA > 1 && NB > 1) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c[0][0], c_stride);
  if constexpr (NB > 1) _tile_stored(1, c[0][1], c_stride);
  if constexpr (NA > 1) _tile_stored(2, c[1][0], c_stride);
  if constexpr (NA > 1 && NB > 1) _tile_stored(3, c[1][1], c_stride);
  memory_barrier();
}

/// C tiles [0, na) x [0, nb) in 2 x 2 groups; tile (a, b) of A / B / C at a_at(a) / b_at(b) / c_at(a, b).
template <typename AAt, typename BAt, typename CAt>
inline void mm_grid(int na, int nb, AAt a_at, size_t a_stride, size_t a_step, BAt b_at, size_t b_stride, size_t b_step,
                    CAt c_at, size_t c_stride, int ksteps, bool accumulate) {
  for (int a = 0; a < na; a += 2) {
    const bool two_a = a + 1 < na;
    for (int b = 0; b < nb; b += 2) {
      const bool two_b = b + 1 < nb;
      const Operand A{{a_at(a), two_a ? a_at(a + 1) : nullptr}, a_stride, a_step};
      const Operand B{{b_at(b), two_b ? b_at(b + 1) : nullptr}, b_stride, b_step};
      char* const c[2][2] = {{c_at(a, b), two_b ? c_at(a, b + 1) : nullptr},
                             {two_a ? c_at(a + 1, b) : nullptr, two_a && two_b ? c_at(a + 1, b + 1) : nullptr}};
      if (two_a && two_b) {
        mm<2, 2>(A, B, ksteps, c, c_stride, accumulate);
      } else if (two_a) {
        mm<2, 1>(A, B, ksteps, c, c_stride, accumulate);
      } else if (two_b) {
        mm<1, 2>(A, B, ksteps, c, c_stride, accumulate);
      } else {
        mm<1, 1>(A, B, ksteps, c, c_stride, accumulate);
      }
    }
  }
}

/// S[j][r] = sum_d2 Kw[j][d2] . Qp[d2][r] for keys j < 16 * ceil(nk / 16) (rows past nk hold stale
/// keys' scores, never read) and rows r < 16 * nch.
inline void qk_block(const uint32_t* Qp, size_t R, const uint32_t* Kw, int hd2, int nk, int nch, float* S) {
  const int nkt = (nk + 15) / 16;
  const auto* kw = reinterpret_cast<const char*>(Kw);
  const auto* qp = reinterpret_cast<const char*>(Qp);
  auto* s = reinterpret_cast<char*>(S);
  const size_t kw_row = static_cast<size_t>(hd2) * 4, r_row = R * 4;
  mm_grid(
      nkt, nch, [&](int a) { return kw + static_cast<size_t>(a) * 16 * kw_row; }, kw_row, 64,
      [&](int b) { return qp + static_cast<size_t>(b) * 64; }, r_row, 16 * r_row,
      [&](int a, int b) { return s + static_cast<size_t>(a) * 16 * r_row + static_cast<size_t>(b) * 64; }, r_row,
      hd2 / 16, false);
}

/// acc[r][d] += sum_j2 Wt[r][j2] . Vp[j2][d] over pair rows j2 < 16 * ceil(np / 16), rows r < 16 *
/// nch, all hd dims. Wt words and Vp rows in [np, 16 * ceil(np / 16)) must be zero.
inline void pv_block(const uint32_t* Wt, const uint32_t* Vp, int hd, int np, int nch, float* acc) {
  const auto* wt = reinterpret_cast<const char*>(Wt);
  const auto* vp = reinterpret_cast<const char*>(Vp);
  auto* c = reinterpret_cast<char*>(acc);
  const size_t hd_row = static_cast<size_t>(hd) * 4;
  mm_grid(
      nch, hd / 16, [&](int a) { return wt + static_cast<size_t>(a) * 16 * 128; }, 128, 64,
      [&](int b) { return vp + static_cast<size_t>(b) * 64; }, hd_row, 16 * hd_row,
      [&](int a, int b) { return c + static_cast<size_t>(a) * 16 * hd_row + static_cast<size_t>(b) * 64; }, hd_row,
      (np + 15) / 16, true);
}

/// Transposes 16 x 16 32-bit words in place (v[i] lane j <-> v[j] lane i). (Zero-masking forms
/// with full masks: the plain ones trip GCC 12's -Wmaybe-uninitialized.)
inline void transpose16(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(0xFFFF, v[i], v[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(0xFFFF, v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_maskz_unpacklo_epi64(0xFF, t[i], t[i + 2]);
    v[i + 1] = _mm512_maskz_unpackhi_epi64(0xFF, t[i], t[i + 2]);
    v[i + 2] = _mm512_maskz_unpacklo_epi64(0xFF, t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_maskz_unpackhi_epi64(0xFF, t[i + 1], t[i + 3]);
  }
  // Now v[4 q + e], 128-bit lane L, holds rows 4 q .. 4 q + 3 of column 4 L + e; column 4 L + e
  // wants lane q = v[4 q + e] lane L: a 4 x 4 transpose of 128-bit lanes over v[e], v[4 + e], v[8
  // + e], v[12 + e], in two rounds of lane shuffles.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_maskz_shuffle_i32x4(0xFFFF, v[i], v[i + 4], _MM_SHUFFLE(2, 0, 2, 0));
    t[i + 4] = _mm512_maskz_shuffle_i32x4(0xFFFF, v[i], v[i + 4], _MM_SHUFFLE(3, 1, 3, 1));
    t[i + 8] = _mm512_maskz_shuffle_i32x4(0xFFFF, v[i + 8], v[i + 12], _MM_SHUFFLE(2, 0, 2, 0));
    t[i + 12] = _mm512_maskz_shuffle_i32x4(0xFFFF, v[i + 8], v[i + 12], _MM_SHUFFLE(3, 1, 3, 1));
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm512_maskz_shuffle_i32x4(0xFFFF, t[i], t[i + 8], _MM_SHUFFLE(2, 0, 2, 0));
    v[i + 8] = _mm512_maskz_shuffle_i32x4(0xFFFF, t[i], t[i + 8], _MM_SHUFFLE(3, 1, 3, 1));
    v[i + 4] = _mm512_maskz_shuffle_i32x4(0xFFFF, t[i + 4], t[i + 12], _MM_SHUFFLE(2, 0, 2, 0));
    v[i + 12] = _mm512_maskz_shuffle_i32x4(0xFFFF, t[i + 4], t[i + 12], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

/// Wt[r][j2] = W[j2][r] for rows r < 16 * nch and j2 < 16 * ceil(np / 16), zero for j2 >= np.
inline void transpose_probabilities(const uint32_t* W, size_t R, int np, int nch, uint32_t* Wt) {
  for (int c = 0; c < nch; ++c)
    for (int j0 = 0; j0 < np; j0 += 16) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i)
        v[i] = j0 + i < np ? _mm512_loadu_si512(W + static_cast<size_t>(j0 + i) * R + static_cast<size_t>(c) * 16)
                           : _mm512_setzero_si512();
      transpose16(v);
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(Wt + static_cast<size_t>(c * 16 + i) * 32 + j0, v[i]);
    }
}

}  // namespace snapkv::attn::amx

#endif
