// Register-tiled Q K^T and P V kernels of the blocked prefill attention (AVX2 when available, with
// wider tiles when AVX-512's 32 vector registers are there; scalar otherwise). Every output element
// is accumulated in the same order whatever tile or row group it falls in, so results do not depend
// on block shapes (nor on the prefill chunk size), nor on which of these paths computed them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/simd.h"

namespace snapkv::attn {

#if SNAPKV_ATTN_AVX2
/// dot(a, b) for n % 8 == 0 with one 8-lane accumulator: the same operation sequence as each
/// entry of qk_tile's register tile, so a score does not depend on where it falls in a tile.
inline float dot8(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
  return hsum(acc);
}

/// hsum() of eight accumulators at once, in key order: lane k = ((a_k[0] + a_k[4]) + (a_k[1] +
/// a_k[5])) + ((a_k[2] + a_k[6]) + (a_k[3] + a_k[7])), hsum's pairing, so each sum is bit for bit
/// dot8's; 15 instructions instead of 8 x 7.
inline __m256 hsum8(const __m256* a) {
  __m256 t[4];
  for (int k = 0; k < 4; ++k)
    t[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[k], a[k + 4], 0x20), _mm256_permute2f128_ps(a[k], a[k + 4], 0x31));
  return _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
}

/// hsum() of four accumulators: lane k (k < 4) = hsum8's sum of a[k], the same pairing (lane halves
/// added first, then two horizontal pair adds), so each is bit for bit dot8's; 10 instructions.
inline __m128 hsum4(const __m256* a) {
  const __m256 u0 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
  const __m256 u1 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
  const __m256 h = _mm256_hadd_ps(u0, u1);  // [a0 a0 a2 a2 | a1 a1 a3 a3], half sums
  const __m256 s = _mm256_hadd_ps(h, h);    // [a0 a2 a0 a2 | a1 a3 a1 a3]
  return _mm_unpacklo_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/// qk_tile's AVX2 scores for R rows (R <= 3) x 4 keys per register tile, keys [0, nk4) with
/// nk4 % 4 == 0: 4 R accumulators (R = 3: 12 independent FMA chains, 7 loads per 12 FMAs), each a
/// dot8 8-lane partial sum; row pairs reduced by hsum8, an odd last row by hsum4.
template <int R>
inline void qk_rows_4keys(const float* const* q, const float* K, int nk4, int hd, float* S, int s_stride) {
  static_assert(R >= 1 && R <= 3);
  for (int j = 0; j < nk4; j += 4) {
    const float* k0 = K + static_cast<size_t>(j) * hd;
    __m256 a[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) a[r][k] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      __m256 x[R];
      for (int r = 0; r < R; ++r) x[r] = load8_in_register(q[r] + d);
      for (int k = 0; k < 4; ++k) {
        const __m256 y = load8_in_register(k0 + static_cast<size_t>(k) * hd + d);
        for (int r = 0; r < R; ++r) a[r][k] = _mm256_fmadd_ps(x[r], y, a[r][k]);
      }
    }
    float* Sj = S + j;
    if constexpr (R >= 2) {
      const __m256 a01[8] = {a[0][0], a[0][1], a[0][2], a[0][3], a[1][0], a[1][1], a[1][2], a[1][3]};
      const __m256 h = hsum8(a01);
      _mm_storeu_ps(Sj, _mm256_castps256_ps128(h));
      _mm_storeu_ps(Sj + static_cast<size_t>(s_stride), _mm256_extractf128_ps(h, 1));
    }
    if constexpr (R != 2) _mm_storeu_ps(Sj + (R - 1) * static_cast<size_t>(s_stride), hsum4(a[R - 1]));
  }
}
#endif

#if SNAPKV_ATTN_AVX512

/// qk_tile's scores for R rows (R <= 2: 8 R accumulators) x 8 keys per register tile, keys
/// [0, nk8) with nk8 % 8 == 0: dot8's 8-lane partial sums, reduced together by hsum8.
template <int R>
inline void qk_rows_8keys(const float* const* q, const float* K, int nk8, int hd, float* S, int s_stride) {
  for (int j = 0; j < nk8; j += 8) {
    const float* k0 = K + static_cast<size_t>(j) * hd;
    __m256 a[R][8];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k) a[r][k] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      __m256 x[R];
      for (int r = 0; r < R; ++r) x[r] = _mm256_loadu_ps(q[r] + d);
      for (int k = 0; k < 8; ++k) {
        const __m256 y = _mm256_loadu_ps(k0 + static_cast<size_t>(k) * hd + d);
        for (int r = 0; r < R; ++r) a[r][k] = _mm256_fmadd_ps(x[r], y, a[r][k]);
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(S + static_cast<size_t>(r) * s_stride + j, hsum8(a[r]));
  }
}

/// hsum8() of two rows at once. a[k] holds key k's 8-lane partial sums of row 0 in lanes 0-7 and
/// of row 1 in lanes 8-15; returns row 0's eight key sums in lanes 0-7 and row 1's in lanes 8-15,
/// each paired as hsum8 pairs it (lane halves added first, then two horizontal pair adds), so
/// every sum is bit for bit dot8's. 22 instructions for 16 sums.
inline __m512 hsum8_x2(const __m512* a) {
  __m512 t[4];
  for (int k = 0; k < 4; ++k) {
    // 128-bit lanes of a[k]: [row 0 partials 0-3, row 0 4-7, row 1 0-3, row 1 4-7].
    const __m512 lo = _mm512_maskz_shuffle_f32x4(0xFFFF, a[k], a[k + 4], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 hi = _mm512_maskz_shuffle_f32x4(0xFFFF, a[k], a[k + 4], _MM_SHUFFLE(3, 1, 3, 1));
    t[k] = _mm512_add_ps(lo, hi);  // [row 0 key k, row 1 key k, row 0 key k + 4, row 1 key k + 4]
  }
  // _mm256_hadd_ps per 128-bit lane: [x0 + x1, x2 + x3, y0 + y1, y2 + y3].
  auto hadd = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD));
  };
  const __m512 h = hadd(hadd(t[0], t[1]), hadd(t[2], t[3]));
  // h: [row 0 keys 0-3, row 1 keys 0-3, row 0 keys 4-7, row 1 keys 4-7].
  return _mm512_maskz_shuffle_f32x4(0xFFFF, h, h, _MM_SHUFFLE(3, 1, 2, 0));
}

/// Packs the query rows of qk_tile's 4-row groups for qk_rows4_8keys: group g (rows 4g .. 4g + 3,
/// g < nr / 4), pair p (rows 4g + 2p and 4g + 2p + 1) occupies dst[(2g + p) * 2 hd ..) as
/// [hd / 8][16]: the pair's 8-dim pieces side by side, as one 16-lane register holds them
/// (nr / 4 * 4 * hd floats; hd % 8 == 0).
inline void pack_q_pairs(const float* const* q, int nr, int hd, float* dst) {
  for (int g = 0; g < nr / 4; ++g)
    for (int p = 0; p < 2; ++p) {
      const float* q0 = q[4 * g + 2 * p];
      const float* q1 = q[4 * g + 2 * p + 1];
      float* o = dst + static_cast<size_t>(2 * g + p) * 2 * static_cast<size_t>(hd);
      for (int d = 0; d < hd; d += 8, o += 16)
        for (int i = 0; i < 8; ++i) {
          o[i] = q0[d + i];
          o[8 + i] = q1[d + i];
        }
    }
}

/// qk_rows_8keys for 4 rows packed by pack_q_pairs (qp: the group's 4 hd floats): rows (0, 1) and
/// (2, 3) share a 16-lane register (lanes 0-7 / 8-15) and each 8-dim piece of a key row is
/// broadcast to both halves, so per 8 dims 2 query loads and 8 key loads feed 16 FMAs of 16 lanes
/// (the 2-row ymm tile: 10 loads for 16 FMAs of 8 lanes). Each lane accumulates what dot8's lane
/// does; hsum8_x2 reduces as hsum8. (Masked forms of the shuffles, as low8/high8: GCC 12 warns
/// about the unmasked ones' undefined source.)
inline void qk_rows4_8keys(const float* qp, const float* K, int nk8, int hd, float* S, int s_stride) {
  for (int j = 0; j < nk8; j += 8) {
    const float* k0 = K + static_cast<size_t>(j) * hd;
    __m512 a[2][8];
    for (int p = 0; p < 2; ++p)
      for (int k = 0; k < 8; ++k) a[p][k] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      __m512 x[2];
      for (int p = 0; p < 2; ++p)
        x[p] = _mm512_loadu_ps(qp + static_cast<size_t>(p) * 2 * static_cast<size_t>(hd) + 2 * d);
      for (int k = 0; k < 8; ++k) {
        const __m512 y = _mm512_castpd_ps(_mm512_maskz_broadcast_f64x4(
            0xFF, _mm256_castps_pd(_mm256_loadu_ps(k0 + static_cast<size_t>(k) * hd + d))));
        a[0][k] = _mm512_fmadd_ps(x[0], y, a[0][k]);
        a[1][k] = _mm512_fmadd_ps(x[1], y, a[1][k]);
      }
    }
    for (int p = 0; p < 2; ++p) {
      const __m512 s = hsum8_x2(a[p]);
      _mm256_storeu_ps(S + static_cast<size_t>(2 * p) * s_stride + j, low8(s));
      _mm256_storeu_ps(S + static_cast<size_t>(2 * p + 1) * s_stride + j, high8(s));
    }
  }
}

/// acc[r][d0 .. d0 + 64) += sum_j P[r * p_stride + j] * V[j][d0 .. d0 + 64) for R rows, j
/// ascending (per element the FMAs of pv_rows2): 4 R accumulators, each loaded V vector feeding R
/// FMAs.
template <int R>
inline void pv_rows_512(const float* P, int p_stride, const float* V, int nk, int hd, float* acc) {
  for (int d = 0; d < hd; d += 64) {
    __m512 a[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) a[r][k] = _mm512_loadu_ps(acc + static_cast<size_t>(r) * hd + d + 16 * k);
    const float* v = V + d;
    for (int j = 0; j < nk; ++j, v += hd) {
      // The four value vectors in registers: folded into every row's FMA they would be 4 R loads
      // per key instead of 4 (load-bound on Zen 4).
      const __m512 v0 = load16_in_register(v), v1 = load16_in_register(v + 16);
      const __m512 v2 = load16_in_register(v + 32), v3 = load16_in_register(v + 48);
      for (int r = 0; r < R; ++r) {
        const __m512 w = _mm512_set1_ps(P[static_cast<size_t>(r) * p_stride + j]);
        a[r][0] = _mm512_fmadd_ps(w, v0, a[r][0]);
        a[r][1] = _mm512_fmadd_ps(w, v1, a[r][1]);
        a[r][2] = _mm512_fmadd_ps(w, v2, a[r][2]);
        a[r][3] = _mm512_fmadd_ps(w, v3, a[r][3]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) _mm512_storeu_ps(acc + static_cast<size_t>(r) * hd + d + 16 * k, a[r][k]);
  }
}
#endif

/// S[r * s_stride + j] = dot(q[r], K[j]) for r < nr, j < nk; q[r] = qrows[r] (hd floats each),
/// K rows contiguous [nk][hd]. Register-blocked when hd % 8 == 0: with AVX-512's 32 registers 4
/// rows x 8 keys when qpack = pack_q_pairs(qrows, nr, hd, ...) is given (qk_rows4_8keys), 2 and 1
/// rows x 8 keys for the rest or without it (qk_rows_8keys); else 3 rows x 4 keys, then 2 or 1, qk_rows_4keys (AVX2).
/// Each loaded vector feeds several FMAs; f32 accumulation, every score bit for bit dot8's.
inline void qk_tile(const float* const* qrows, int nr, const float* K, int nk, int hd, float* S, int s_stride,
                    const float* qpack = nullptr) {
#if SNAPKV_ATTN_AVX512
  if (hd % 8 == 0) {
    const int nk8 = nk / 8 * 8;
    int r = 0;
    if (qpack != nullptr)
      for (; r + 4 <= nr; r += 4)
        qk_rows4_8keys(qpack + static_cast<size_t>(r) * hd, K, nk8, hd, S + static_cast<size_t>(r) * s_stride,
                       s_stride);
    for (; r + 2 <= nr; r += 2)
      qk_rows_8keys<2>(qrows + r, K, nk8, hd, S + static_cast<size_t>(r) * s_stride, s_stride);
    if (r < nr) qk_rows_8keys<1>(qrows + r, K, nk8, hd, S + static_cast<size_t>(r) * s_stride, s_stride);
    for (r = 0; r < nr; ++r)
      for (int j = nk8; j < nk; ++j)
        S[static_cast<size_t>(r) * s_stride + j] = dot8(qrows[r], K + static_cast<size_t>(j) * hd, hd);
    return;
  }
#endif
#if SNAPKV_ATTN_AVX2
  if (hd % 8 == 0) {
    // 3-row tiles, then the 2 or 1 rows left; the keys past a multiple of 4 one dot8 each.
    const int nk4 = nk / 4 * 4;
    int r = 0;
    for (; r + 3 <= nr; r += 3)
      qk_rows_4keys<3>(qrows + r, K, nk4, hd, S + static_cast<size_t>(r) * s_stride, s_stride);
    if (nr - r == 2) qk_rows_4keys<2>(qrows + r, K, nk4, hd, S + static_cast<size_t>(r) * s_stride, s_stride);
    if (nr - r == 1) qk_rows_4keys<1>(qrows + r, K, nk4, hd, S + static_cast<size_t>(r) * s_stride, s_stride);
    for (r = 0; r < nr; ++r)
      for (int j = nk4; j < nk; ++j)
        S[static_cast<size_t>(r) * s_stride + j] = dot8(qrows[r], K + static_cast<size_t>(j) * hd, hd);
    return;
  }
#endif
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < nk; ++j)
      S[static_cast<size_t>(r) * s_stride + j] = dot_f32(qrows[r], K + static_cast<size_t>(j) * hd, hd);
}

#if SNAPKV_ATTN_AVX2
/// acc[r][d0 .. d0 + 32) += sum_j P[r * p_stride + j] * V[j][d0 .. d0 + 32) for rows r = 0, 1 (or
/// row 0 only when two_rows is false), j ascending. Named accumulators keep the tile in registers.
inline void pv_rows2(const float* P, int p_stride, bool two_rows, const float* V, int nk, int hd, float* acc) {
  const float* p0 = P;
  const float* p1 = two_rows ? P + p_stride : P;
  float* c0 = acc;
  float* c1 = two_rows ? acc + hd : acc;
  for (int d = 0; d < hd; d += 32) {
    __m256 a0 = _mm256_loadu_ps(c0 + d), a1 = _mm256_loadu_ps(c0 + d + 8);
    __m256 a2 = _mm256_loadu_ps(c0 + d + 16), a3 = _mm256_loadu_ps(c0 + d + 24);
    __m256 b0 = _mm256_loadu_ps(c1 + d), b1 = _mm256_loadu_ps(c1 + d + 8);
    __m256 b2 = _mm256_loadu_ps(c1 + d + 16), b3 = _mm256_loadu_ps(c1 + d + 24);
    const float* v = V + d;
    for (int j = 0; j < nk; ++j, v += hd) {
      const __m256 w0 = _mm256_broadcast_ss(p0 + j), w1 = _mm256_broadcast_ss(p1 + j);
      const __m256 v0 = load8_in_register(v), v1 = load8_in_register(v + 8);
      const __m256 v2 = load8_in_register(v + 16), v3 = load8_in_register(v + 24);
      a0 = _mm256_fmadd_ps(w0, v0, a0);
      a1 = _mm256_fmadd_ps(w0, v1, a1);
      a2 = _mm256_fmadd_ps(w0, v2, a2);
      a3 = _mm256_fmadd_ps(w0, v3, a3);
      b0 = _mm256_fmadd_ps(w1, v0, b0);
      b1 = _mm256_fmadd_ps(w1, v1, b1);
      b2 = _mm256_fmadd_ps(w1, v2, b2);
      b3 = _mm256_fmadd_ps(w1, v3, b3);
    }
    // Row 1 first: with one row, c1 == c0 and row 0's values must win.
    _mm256_storeu_ps(c1 + d, b0);
    _mm256_storeu_ps(c1 + d + 8, b1);
    _mm256_storeu_ps(c1 + d + 16, b2);
    _mm256_storeu_ps(c1 + d + 24, b3);
    _mm256_storeu_ps(c0 + d, a0);
    _mm256_storeu_ps(c0 + d + 8, a1);
    _mm256_storeu_ps(c0 + d + 16, a2);
    _mm256_storeu_ps(c0 + d + 24, a3);
  }
}
#endif

#if SNAPKV_ATTN_AVX2
/// acc[r][d0 .. d0 + 16) += sum_j P[r * p_stride + j] * V[j][d0 .. d0 + 16) for rows r < 6, j
/// ascending (per element the FMAs of pv_rows2): 12 accumulators (12 independent FMA chains;
/// pv_rows2's 8 are just as many as two 4-cycle FMA pipes need) and two value loads per 12 FMAs,
/// so a value block larger than L1 (Gemma 3: 64 keys x 256 floats) is re-read from L2 a third as
/// often.
inline void pv_rows6(const float* P, int p_stride, const float* V, int nk, int hd, float* acc) {
  for (int d = 0; d < hd; d += 16) {
    __m256 a[6][2];
    for (int r = 0; r < 6; ++r)
      for (int k = 0; k < 2; ++k) a[r][k] = _mm256_loadu_ps(acc + static_cast<size_t>(r) * hd + d + 8 * k);
    const float* v = V + d;
    for (int j = 0; j < nk; ++j, v += hd) {
      const __m256 v0 = load8_in_register(v), v1 = load8_in_register(v + 8);
      for (int r = 0; r < 6; ++r) {
        const __m256 w = _mm256_broadcast_ss(P + static_cast<size_t>(r) * p_stride + j);
        a[r][0] = _mm256_fmadd_ps(w, v0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(w, v1, a[r][1]);
      }
    }
    for (int r = 0; r < 6; ++r)
      for (int k = 0; k < 2; ++k) _mm256_storeu_ps(acc + static_cast<size_t>(r) * hd + d + 8 * k, a[r][k]);
  }
}
#endif

/// acc[r][:] += sum_j P[r * p_stride + j] * V[j][:] for r < nr (acc rows contiguous [nr][hd]),
/// j ascending for every element. Register-tiled 4 rows x 64 dims when hd % 64 == 0 (AVX-512,
/// pv_rows_512), else 6 rows x 16 dims (pv_rows6) and 2 rows x 32 dims for the rest when hd % 32 == 0
/// (AVX2): acc stays in registers over the keys. Zero probabilities are multiplied like any other (V is finite).
inline void pv_tile(const float* P, int p_stride, int nr, const float* V, int nk, int hd, float* acc) {
#if SNAPKV_ATTN_AVX512
  if (hd % 64 == 0) {
    int r = 0;
    for (; r + 4 <= nr; r += 4)
      pv_rows_512<4>(P + static_cast<size_t>(r) * p_stride, p_stride, V, nk, hd, acc + static_cast<size_t>(r) * hd);
    const float* Pr = P + static_cast<size_t>(r) * p_stride;
    float* ar = acc + static_cast<size_t>(r) * hd;
    if (nr - r == 3) pv_rows_512<3>(Pr, p_stride, V, nk, hd, ar);
    if (nr - r == 2) pv_rows_512<2>(Pr, p_stride, V, nk, hd, ar);
    if (nr - r == 1) pv_rows_512<1>(Pr, p_stride, V, nk, hd, ar);
    return;
  }
#endif
#if SNAPKV_ATTN_AVX2
  if (hd % 32 == 0) {
    int r = 0;
    for (; r + 6 <= nr; r += 6)
      pv_rows6(P + static_cast<size_t>(r) * p_stride, p_stride, V, nk, hd, acc + static_cast<size_t>(r) * hd);
    for (; r < nr; r += 2)
      pv_rows2(P + static_cast<size_t>(r) * p_stride, p_stride, r + 1 < nr, V, nk, hd,
               acc + static_cast<size_t>(r) * hd);
    return;
  }
#endif
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < nk; ++j)
      axpy_f32(acc + static_cast<size_t>(r) * hd, P[static_cast<size_t>(r) * p_stride + j],
               V + static_cast<size_t>(j) * hd, hd);
}

}  // namespace snapkv::attn
