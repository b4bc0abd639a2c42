// Register-tiled inner loops of the split-K decode attention kernel (attention/decode.cpp): the
// scores of a few query heads against a block of keys, and the probability-weighted sum of the
// block's value rows. AVX-512 or AVX2 register tiles when available; otherwise the row helpers of
// simd.h (scalar), one (head, key) pair at a time.
//
// Scores are bit-identical to the simd.h dot helpers whatever the path (the AVX2 tiles: see their
// section below): with AVX-512 each
// (head, key) pair accumulates in one 16-lane register whose lanes 0-7 / 8-15 receive exactly the
// products that dot_f32 / dot_f32_f16 put in their two 8-lane accumulators, the 8-element tail goes
// to lanes 0-7 as it goes to their first accumulator, and the final reduction is the same hsum().
// Weighted V sums are accumulated per output element in ascending key order with one FMA per key,
// as axpy_f32 / axpy_f16 do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "core/fp16.h"
#include "core/hsum16.h"
#include "snapkv/kv_type.h"

namespace snapkv::attn {

/// Software prefetch of a split's K and V rows, spread over the block's work: the score tile of
/// keys [j, j + nj) asks for the K rows [j, j + nj) counted from `k`, and each column pass of the
/// weighted sum asks, at key j, for the bytes of V row j (counted from `v`) that hold the pass's
/// columns (rows of k_rb / v_rb bytes; only rows below n_k / n_v, the rows the split still has);
/// AVX2 builds with long rows ask for the V rows [j, j + nj) in the score tile instead
/// (values_with_keys).
/// run_split points k and v a fixed number of rows ahead of the block (kPrefetchKeys /
/// kPrefetchValues in decode.cpp), so the rows are in L2 when the tiles reach them (the AVX2 tiles
/// too); scalar builds ask for a whole block at once. Measured on the Intel host: one burst per block
/// gained 1.0-1.5x, this spread form 1.02-1.29x more (docs/benchmarks.md, "Decode attention:
/// prefetch spread over the block").
struct KVPrefetch {
  const char* k = nullptr;
  const char* v = nullptr;
  size_t k_rb = 0;
  size_t v_rb = 0;
  int n_k = 0;
  int n_v = 0;
  [[gnu::always_inline]] void keys(int j, int nj) const {
    const int e = std::min(j + nj, n_k);
    if (j < e) prefetch_l2(k + static_cast<size_t>(j) * k_rb, static_cast<size_t>(e - j) * k_rb);
  }
  void values(int j) const { values(j, 0, v_rb); }
  /// Bytes [b0, b1) of V row j (b1 <= v_rb; nothing when b0 >= b1).
  [[gnu::always_inline]] void values(int j, size_t b0, size_t b1) const {
    if (j < n_v && b0 < b1) prefetch_l2(v + static_cast<size_t>(j) * v_rb + b0, b1 - b0);
  }
};

/// Element type of a cache row: uint16_t (IEEE half) or float.
template <typename T>
inline float dot_row(const float* q, const T* k, int hd, bool exact) {
  if constexpr (sizeof(T) == 2) {
    return exact ? dot_f32_f16_acc64(q, k, hd) : dot_f32_f16(q, k, hd);
  } else {
    return exact ? dot_f32_acc64(q, k, hd) : dot_f32(q, k, hd);
  }
}

template <typename T>
inline void axpy_row(float* y, float a, const T* x, int hd) {
  if constexpr (sizeof(T) == 2) {
    axpy_f16(y, a, x, hd);
  } else {
    axpy_f32(y, a, x, hd);
  }
}

#if SNAPKV_ATTN_AVX2
// Row accessors of the register tiles: element d.. of row j as f32 lanes. load8 (8 lanes) serves
// the AVX2 tiles; the 16-lane members (load16, load8z, load2x16) the AVX-512 ones.
/// 8 lanes of a cache row as f32.
inline __m256 load8(const float* x) { return _mm256_loadu_ps(x); }
inline __m256 load8(const uint16_t* x) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
#endif

#if SNAPKV_ATTN_AVX512
// The zero-masking forms with a full mask compile to the plain instructions; the plain intrinsics
// trip GCC 12's -Wmaybe-uninitialized on their internal _mm512_undefined_ps().
/// 16 lanes of a cache row as f32.
inline __m512 load16(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 load16(const uint16_t* x) {
  return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

/// Elements [0, 8) of a row zero-extended to 16 lanes.
inline __m512 load8z(const float* x) { return _mm512_maskz_loadu_ps(0x00FF, x); }
inline __m512 load8z(const uint16_t* x) {
  return _mm512_maskz_cvtph_ps(0x00FF, _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
}
#endif

#if SNAPKV_ATTN_AVX2
/// DenseRows: rows of hd elements of T (float or IEEE half), contiguous.
template <typename T>
struct DenseRows {
  const T* p;
  int hd;
  static constexpr bool kBlocks = false;  ///< load2x16 saves nothing over two load16
  const T* at(int j, int d) const { return p + static_cast<size_t>(j) * static_cast<size_t>(hd) + d; }
  __m256 load8(int j, int d) const { return attn::load8(at(j, d)); }
#if SNAPKV_ATTN_AVX512
  __m512 load16(int j, int d) const { return attn::load16(at(j, d)); }
  __m512 load8z(int j, int d) const { return attn::load8z(at(j, d)); }
  /// Elements [d, d + 16) and [d + 16, d + 32) of row j.
  void load2x16(int j, int d, __m512& lo, __m512& hi) const {
    lo = load16(j, d);
    hi = load16(j, d + 16);
  }
#endif
  DenseRows from(int j) const { return {at(j, 0), hd}; }
};

/// Q8Rows: ggml Q8_0 rows of rb bytes (per 32 elements an f16 scale s and 32 int8 q). Element
/// offsets d: load8 / load8z need d % 8 == 0, load16 d % 16 == 0, load2x16 d % 32 == 0 (a load
/// never crosses its block, so it never reads past the row).
/// Each element is s * q in f32, the value dequantize_q8_0_row() gives, bit for bit, so a tile over
/// Q8Rows equals the same tile over the dequantized rows without storing them.
struct Q8Rows {
  const uint8_t* p;
  size_t rb;
  static constexpr bool kBlocks = true;  ///< load2x16 decodes a 32-element block at once
  const uint8_t* block(int j, int d) const {
    return p + static_cast<size_t>(j) * rb + static_cast<size_t>(d / kKVQ8Block) * kKVQ8BlockBytes;
  }
  static float scale_of(const uint8_t* blk) {
    uint16_t h;
    std::memcpy(&h, blk, sizeof(h));
    return fp16_to_fp32(h);
  }
  static const __m128i* quants(const uint8_t* blk, int d) {
    return reinterpret_cast<const __m128i*>(blk + 2 + d % kKVQ8Block);
  }
  __m256 load8(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m256i qi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(quants(b, d)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(qi), _mm256_set1_ps(scale_of(b)));
  }
#if SNAPKV_ATTN_AVX512
  __m512 load16(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m512i qi = _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(quants(b, d)));
    return _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, qi), _mm512_set1_ps(scale_of(b)));
  }
  __m512 load8z(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m512i qi = _mm512_maskz_cvtepi8_epi32(0x00FF, _mm_loadl_epi64(quants(b, d)));
    return _mm512_maskz_mul_ps(0x00FF, _mm512_maskz_cvtepi32_ps(0x00FF, qi), _mm512_set1_ps(scale_of(b)));
  }
  /// The whole block of elements [d, d + 32) (d % 32 == 0): the scale is read once.
  void load2x16(int j, int d, __m512& lo, __m512& hi) const {
    const uint8_t* b = block(j, d);
    const __m512 s = _mm512_set1_ps(scale_of(b));
    lo = _mm512_mul_ps(
        _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(quants(b, 0)))), s);
    hi = _mm512_mul_ps(
        _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(quants(b, 16)))), s);
  }
#endif
  Q8Rows from(int j) const { return {p + static_cast<size_t>(j) * rb, rb}; }
};

/// Q4Rows: ggml Q4_0 rows of rb bytes (per 32 elements an f16 scale s and 16 bytes, byte i holding
/// element i in its low nibble and element i + 16 in its high one; offsets d as for Q8Rows: a
/// load16 at d % 16 == 8 would mix the two halves). Each element is
/// s * (q - 8) in f32, the value dequantize_q4_0_row() gives, bit for bit (as Q8Rows).
struct Q4Rows {
  const uint8_t* p;
  size_t rb;
  static constexpr bool kBlocks = true;
  const uint8_t* block(int j, int d) const {
    return p + static_cast<size_t>(j) * rb + static_cast<size_t>(d / kKVQ4Block) * kKVQ4BlockBytes;
  }
  static const uint8_t* bytes_at(const uint8_t* blk, int d) { return blk + 2 + d % (kKVQ4Block / 2); }
  __m256 load8(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m256i by = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes_at(b, d))));
    const __m256i nib =
        (d % kKVQ4Block) >= kKVQ4Block / 2 ? _mm256_srli_epi32(by, 4) : _mm256_and_si256(by, _mm256_set1_epi32(0xF));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(nib, _mm256_set1_epi32(8))),
                         _mm256_set1_ps(Q8Rows::scale_of(b)));
  }
#if SNAPKV_ATTN_AVX512
  /// q - 8 of elements d.. from their bytes (zero-extended to int32 lanes): the high nibbles for
  /// d % 32 >= 16, else the low ones.
  static __m512i codes(__m512i bytes, int d) {
    const __m512i nib = (d % kKVQ4Block) >= kKVQ4Block / 2 ? _mm512_maskz_srli_epi32(0xFFFF, bytes, 4)
                                                           : _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
    return _mm512_sub_epi32(nib, _mm512_set1_epi32(8));
  }
  __m512 load16(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m512i by =
        _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes_at(b, d))));
    return _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, codes(by, d)), _mm512_set1_ps(Q8Rows::scale_of(b)));
  }
  __m512 load8z(int j, int d) const {
    const uint8_t* b = block(j, d);
    const __m512i by =
        _mm512_maskz_cvtepu8_epi32(0x00FF, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes_at(b, d))));
    return _mm512_maskz_mul_ps(0x00FF, _mm512_maskz_cvtepi32_ps(0x00FF, codes(by, d)),
                               _mm512_set1_ps(Q8Rows::scale_of(b)));
  }
  /// The whole block of elements [d, d + 32) (d % 32 == 0): its 16 bytes and its scale are read once.
  void load2x16(int j, int d, __m512& lo, __m512& hi) const {
    const uint8_t* b = block(j, d);
    const __m512 s = _mm512_set1_ps(Q8Rows::scale_of(b));
    const __m512i by =
        _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes_at(b, 0))));
    lo = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, codes(by, 0)), s);
    hi = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, codes(by, kKVQ4Block / 2)), s);
  }
#endif
  Q4Rows from(int j) const { return {p + static_cast<size_t>(j) * rb, rb}; }
};
#endif  // SNAPKV_ATTN_AVX2

#if SNAPKV_ATTN_AVX512
/// S[h * s_stride + j] = scale * dot(q[h], K[j]) for h < NH, j < NJ, NH * NJ <= 16 (hd % 8 == 0):
/// the accumulation of dot_f32 / dot_f32_f16 (see the file comment; the 8-element tail goes to
/// lanes 0-7 only), one register per (head, key); tiles of 8 or more pairs reduce with hsum16 (core/hsum16.h).
template <int NH, int NJ, typename Rows>
[[gnu::always_inline]] inline void scores_tile(const float* const* q, const Rows& K, int hd, float scale, float* S,
                                               int s_stride) {
  static_assert(NH * NJ <= 16);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  const int hd16 = hd / 16 * 16;
  int d = 0;
  // Quantized rows: 32 elements per step where the registers allow (lo / hi rows of NJ keys + NH x
  // NJ sums), so a block is decoded once. Each sum gets the same products in the same order. (F16
  // rows stay at 16 per step: measured 7-15 % slower this way on the SmolLM2 shape.)
  if constexpr (Rows::kBlocks && 2 * NJ + NH * NJ <= 24) {
    for (; d + 32 <= hd16; d += 32) {
      __m512 lo[NJ], hi[NJ];
      for (int j = 0; j < NJ; ++j) K.load2x16(j, d, lo[j], hi[j]);
      for (int h = 0; h < NH; ++h) {
        const __m512 qv = load16_in_register(q[h] + d);
        for (int j = 0; j < NJ; ++j) acc[h * NJ + j] = _mm512_fmadd_ps(qv, lo[j], acc[h * NJ + j]);
      }
      for (int h = 0; h < NH; ++h) {
        const __m512 qv = load16_in_register(q[h] + d + 16);
        for (int j = 0; j < NJ; ++j) acc[h * NJ + j] = _mm512_fmadd_ps(qv, hi[j], acc[h * NJ + j]);
      }
    }
  }
  for (; d < hd16; d += 16) {
    __m512 kv[NJ];
    for (int j = 0; j < NJ; ++j) kv[j] = K.load16(j, d);
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = load16_in_register(q[h] + d);
      for (int j = 0; j < NJ; ++j) acc[h * NJ + j] = _mm512_fmadd_ps(qv, kv[j], acc[h * NJ + j]);
    }
  }
  if (hd16 < hd) {
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = load8z(q[h] + hd16);
      for (int j = 0; j < NJ; ++j)
        acc[h * NJ + j] = _mm512_mask3_fmadd_ps(qv, K.load8z(j, hd16), acc[h * NJ + j], 0x00FF);
    }
  }
  if constexpr (NH * NJ >= 8) {
    // Lanes [h * NJ, (h + 1) * NJ) go to S[h * s_stride + (0 .. NJ)] (s_stride >= NJ).
    const __m512 r = _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale));
    for (int h = 0; h < NH; ++h)
      _mm512_mask_storeu_ps(S + h * (s_stride - NJ), static_cast<__mmask16>(((1u << NJ) - 1) << (h * NJ)), r);
  } else {
    for (int i = 0; i < NH * NJ; ++i)
      S[i / NJ * s_stride + i % NJ] = scale * hsum(_mm256_add_ps(low8(acc[i]), high8(acc[i])));
  }
}

/// acc[h][d0 .. d0 + 16 * NV) += sum_j P[h * p_stride + j] * V[j][d0 .. d0 + 16 * NV) for h < NH,
/// j ascending: NH x NV accumulators stay in registers over the block.
/// pf (may be null): asks for bytes [pb0, pb1) of the value rows ahead, one row per key (KVPrefetch).
template <int NH, int NV, typename Rows>
[[gnu::always_inline]] inline void pv_tile(const float* P, int p_stride, const Rows& V, int nk, int d0,
                                           float* const* acc, const KVPrefetch* pf, size_t pb0, size_t pb1) {
  __m512 a[NH][NV];
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) a[h][v] = _mm512_loadu_ps(acc[h] + d0 + 16 * v);
  for (int j = 0; j < nk; ++j) {
    if (pf) pf->values(j, pb0, pb1);
    __m512 x[NV];
    if constexpr (Rows::kBlocks && NV % 2 == 0) {  // whole 32-element blocks (d0 % 32 == 0)
      for (int v = 0; v < NV; v += 2) V.load2x16(j, d0 + 16 * v, x[v], x[v + 1]);
    } else {
      for (int v = 0; v < NV; ++v) x[v] = V.load16(j, d0 + 16 * v);
    }
    for (int h = 0; h < NH; ++h) {
      const __m512 w = _mm512_set1_ps(P[h * p_stride + j]);
      for (int v = 0; v < NV; ++v) a[h][v] = _mm512_fmadd_ps(w, x[v], a[h][v]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc[h] + d0 + 16 * v, a[h][v]);
}

/// Same over [d0, d0 + 8) with 8-lane registers (the tail of an hd % 16 == 8 row).
template <int NH, typename Rows>
inline void pv_tile8(const float* P, int p_stride, const Rows& V, int nk, int d0, float* const* acc) {
  __m256 a[NH];
  for (int h = 0; h < NH; ++h) a[h] = _mm256_loadu_ps(acc[h] + d0);
  for (int j = 0; j < nk; ++j) {
    const __m256 x = V.load8(j, d0);
    for (int h = 0; h < NH; ++h) a[h] = _mm256_fmadd_ps(_mm256_set1_ps(P[h * p_stride + j]), x, a[h]);
  }
  for (int h = 0; h < NH; ++h) _mm256_storeu_ps(acc[h] + d0, a[h]);
}

/// Whether the score tiles of nh heads ask for the value rows ahead too: never here, each column
/// pass of the weighted sum asks for its own bytes (pv_heads below).
constexpr bool values_with_keys(int /*nh*/, int /*hd*/) { return false; }

/// Keys per score tile of NH heads: 16 / NH (4 for NH = 3), one 16-lane register per pair.
template <int NH>
constexpr int score_tile_keys() {
  return NH == 3 ? 4 : 16 / NH;
}

/// The block's columns in passes of 64, then 16, then 8. Each 64- or 16-column pass asks pf for
/// the byte range of the value rows ahead that holds its columns (the 8-column tail's with the
/// pass before it; an hd 8 row never prefetches; whole 64-byte lines, so neighbouring passes may
/// ask for a shared line, e.g. a quantized block's scale, twice), so the requests are spread over
/// the whole weighted sum. Asking for whole rows in the first pass only left Gemma 3's shape
/// (head_dim 256: four passes) waiting on memory: 1.23-1.42x slower from DRAM (docs/benchmarks.md,
/// "Decode attention: value prefetch per column pass").
template <int NH, typename Rows>
inline void pv_heads(const float* P, int p_stride, const Rows& V, int nk, int hd, float* const* acc,
                     const KVPrefetch* pf) {
  const size_t rb = pf ? pf->v_rb : 0;
  // Where column d1 starts in a row, in bytes (rows of every type store their columns in order);
  // the row's end once only the 8-column tail is left.
  auto bytes_to = [&](int d1) { return d1 >= hd - 8 ? rb : static_cast<size_t>(d1) * rb / static_cast<size_t>(hd); };
  int d = 0;
  for (; d + 64 <= hd; d += 64) pv_tile<NH, 4>(P, p_stride, V, nk, d, acc, pf, bytes_to(d), bytes_to(d + 64));
  for (; d + 16 <= hd; d += 16) pv_tile<NH, 1>(P, p_stride, V, nk, d, acc, pf, bytes_to(d), bytes_to(d + 16));
  if (d < hd) pv_tile8<NH>(P, p_stride, V, nk, d, acc);
}

#elif SNAPKV_ATTN_AVX2
/// Columns per pass of the weighted sum of nh heads (pv_heads below).
constexpr int pv_pass_columns(int nh) { return nh <= 3 ? 32 : 16; }

/// Whether the score tiles of nh heads ask for the value rows ahead along with the key rows
/// (whole rows, one per key) and the weighted sum asks for none: when the weighted sum makes
/// more than two column passes per key block. Each pass asking for its bytes of every row ahead
/// (the AVX-512 way, see pv_heads there) cost Gemma 3's shape (head_dim 256, 4 heads: 16 passes)
/// 19-22 % of its compute: measured on Zen 3 with an F16 cache 1.17-1.30x faster this way
/// cache-resident (Q8_0 1.07x), 1.0-1.16x from memory at 16K keys (Q8_0 1.11x); SmolLM2's shape
/// (two passes) stays with the passes, where its Q8_0 cache measured 3-6 % slower this way
/// (docs/benchmarks.md, "AVX2 decode attention: value prefetch with the keys").
constexpr bool values_with_keys(int nh, int hd) { return hd > 2 * pv_pass_columns(nh); }

// AVX2 tiles (16 registers of 8 lanes): each (head, key) pair keeps the two 8-lane accumulators
// of dot_f32 / dot_f32_f16 (dims [16 i, 16 i + 8) and [16 i + 8, 16 i + 16); an 8-element tail goes
// to the first) and ends with their hsum(acc0 + acc1), so every score is bit for bit the row
// helper's; the weighted sums add one FMA per key and element in key order, as axpy_f32 /
// axpy_f16. Before these tiles the AVX2 build ran the row helpers one (head, key) pair at a time:
// Gemma 3's decode attention at 725 tokens read its KV cache at 3.4 GB/s on Zen 3
// (docs/benchmarks.md, "AVX2 hosts").

/// S[h * s_stride + j] = scale * dot(q[h], K[j]) for h < NH, j < NJ (hd % 8 == 0); 2 NH NJ + NJ + 1
/// registers live, plus the row accessor's temporaries (a quantized row's scale and constants).
template <int NH, int NJ, typename Rows>
[[gnu::always_inline]] inline void scores_tile(const float* const* q, const Rows& K, int hd, float scale, float* S,
                                               int s_stride) {
  static_assert(2 * NH * NJ + NJ + 1 <= 16);
  __m256 a0[NH][NJ], a1[NH][NJ];
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NJ; ++j) a0[h][j] = a1[h][j] = _mm256_setzero_ps();
  int d = 0;
  for (; d + 16 <= hd; d += 16) {
    __m256 kv[NJ];
    for (int j = 0; j < NJ; ++j) kv[j] = K.load8(j, d);
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = _mm256_loadu_ps(q[h] + d);
      for (int j = 0; j < NJ; ++j) a0[h][j] = _mm256_fmadd_ps(qv, kv[j], a0[h][j]);
    }
    for (int j = 0; j < NJ; ++j) kv[j] = K.load8(j, d + 8);
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = _mm256_loadu_ps(q[h] + d + 8);
      for (int j = 0; j < NJ; ++j) a1[h][j] = _mm256_fmadd_ps(qv, kv[j], a1[h][j]);
    }
  }
  if (d < hd) {  // hd % 16 == 8: the tail goes to the first accumulator
    for (int j = 0; j < NJ; ++j) {
      const __m256 kv = K.load8(j, d);
      for (int h = 0; h < NH; ++h) a0[h][j] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + d), kv, a0[h][j]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NJ; ++j) S[h * s_stride + j] = scale * hsum(_mm256_add_ps(a0[h][j], a1[h][j]));
}

/// acc[h][d0 .. d0 + 8 NV) += sum_j P[h * p_stride + j] * V[j][d0 .. d0 + 8 NV) for h < NH, j
/// ascending: NH x NV accumulators stay in registers over the block.
/// pf (may be null): asks for bytes [pb0, pb1) of the value rows ahead, one row per key (KVPrefetch).
template <int NH, int NV, typename Rows>
[[gnu::always_inline]] inline void pv_tile(const float* P, int p_stride, const Rows& V, int nk, int d0,
                                           float* const* acc, const KVPrefetch* pf, size_t pb0, size_t pb1) {
  static_assert(NH * NV + NH + 1 <= 16);
  __m256 a[NH][NV];
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) a[h][v] = _mm256_loadu_ps(acc[h] + d0 + 8 * v);
  for (int j = 0; j < nk; ++j) {
    if (pf) pf->values(j, pb0, pb1);
    __m256 w[NH];
    for (int h = 0; h < NH; ++h) w[h] = _mm256_broadcast_ss(P + h * p_stride + j);
    for (int v = 0; v < NV; ++v) {
      const __m256 x = V.load8(j, d0 + 8 * v);
      for (int h = 0; h < NH; ++h) a[h][v] = _mm256_fmadd_ps(w[h], x, a[h][v]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc[h] + d0 + 8 * v, a[h][v]);
}

/// Keys per score tile of NH heads: 4 / 2 / 2 / 1 for 1 / 2 / 3 / 4 heads (two 8-lane
/// registers per pair).
template <int NH>
constexpr int score_tile_keys() {
  return NH == 1 ? 4 : NH == 4 ? 1 : 2;
}

/// The block's columns in passes of pv_pass_columns(NH), then 8; each pass asks pf for the
/// bytes of the value rows ahead that hold its columns, as the AVX-512 pv_heads, unless the score
/// tiles asked for them (values_with_keys).
template <int NH, typename Rows>
inline void pv_heads(const float* P, int p_stride, const Rows& V, int nk, int hd, float* const* acc,
                     const KVPrefetch* pf) {
  constexpr int NV = pv_pass_columns(NH) / 8;
  if (values_with_keys(NH, hd)) pf = nullptr;
  const size_t rb = pf ? pf->v_rb : 0;
  auto bytes_to = [&](int d1) { return d1 >= hd ? rb : static_cast<size_t>(d1) * rb / static_cast<size_t>(hd); };
  int d = 0;
  for (; d + 8 * NV <= hd; d += 8 * NV)
    pv_tile<NH, NV>(P, p_stride, V, nk, d, acc, pf, bytes_to(d), bytes_to(d + 8 * NV));
  for (; d < hd; d += 8) pv_tile<NH, 1>(P, p_stride, V, nk, d, acc, pf, bytes_to(d), bytes_to(d + 8));
}
#endif

#if SNAPKV_ATTN_AVX2
/// Scores of NH heads over nk keys: tiles of score_tile_keys<NH>() keys, then single keys; each
/// tile first asks pf (may be null) for its key rows ahead, and for its value rows too when
/// values_with_keys(NH, hd).
template <int NH, typename Rows>
inline void scores_heads(const float* const* q, const Rows& K, int nk, int hd, float scale, float* S, int s_stride,
                         const KVPrefetch* pf) {
  constexpr int NJ = score_tile_keys<NH>();
  const bool values = pf && values_with_keys(NH, hd);
  int j = 0;
  for (; j + NJ <= nk; j += NJ) {
    if (pf) pf->keys(j, NJ);
    if (values)
      for (int i = 0; i < NJ; ++i) pf->values(j + i);
    scores_tile<NH, NJ>(q, K.from(j), hd, scale, S + j, s_stride);
  }
  for (; j < nk; ++j) {
    if (pf) pf->keys(j, 1);
    if (values) pf->values(j);
    scores_tile<NH, 1>(q, K.from(j), hd, scale, S + j, s_stride);
  }
}

/// scores_block / pv_block over any row accessor (hd % 8 == 0, nh <= kHeadTile).
template <typename Rows>
inline void scores_rows(const float* const* q, int nh, const Rows& K, int nk, int hd, float scale, float* S,
                        int s_stride, const KVPrefetch* pf = nullptr) {
  switch (nh) {
    case 1:
      return scores_heads<1>(q, K, nk, hd, scale, S, s_stride, pf);
    case 2:
      return scores_heads<2>(q, K, nk, hd, scale, S, s_stride, pf);
    case 3:
      return scores_heads<3>(q, K, nk, hd, scale, S, s_stride, pf);
    default:
      return scores_heads<4>(q, K, nk, hd, scale, S, s_stride, pf);
  }
}

template <typename Rows>
inline void pv_rows(const float* P, int p_stride, int nh, const Rows& V, int nk, int hd, float* const* acc,
                    const KVPrefetch* pf = nullptr) {
  switch (nh) {
    case 1:
      return pv_heads<1>(P, p_stride, V, nk, hd, acc, pf);
    case 2:
      return pv_heads<2>(P, p_stride, V, nk, hd, acc, pf);
    case 3:
      return pv_heads<3>(P, p_stride, V, nk, hd, acc, pf);
    default:
      return pv_heads<4>(P, p_stride, V, nk, hd, acc, pf);
  }
}
#endif

/// Most query heads one tile handles (a task with more heads per KV head runs several tiles).
constexpr int kHeadTile = 4;

/// S[h * s_stride + j] = scale * dot(q[h], K[j]) for h < nh <= kHeadTile, j < nk; K rows
/// contiguous [nk][hd]. `exact`: products summed in double (dot_f32_f16_acc64 / dot_f32_acc64).
/// pf (may be null): software prefetch of the rows ahead (KVPrefetch).
template <typename T>
inline void scores_block(const float* const* q, int nh, const T* K, int nk, int hd, float scale, bool exact, float* S,
                         int s_stride, const KVPrefetch* pf = nullptr) {
#if SNAPKV_ATTN_AVX2
  if (!exact && hd % 8 == 0) return scores_rows(q, nh, DenseRows<T>{K, hd}, nk, hd, scale, S, s_stride, pf);
#endif
  if (pf) pf->keys(0, nk);
#if SNAPKV_ATTN_AVX2
  // The double-summed (exact) scores of an F16 cache with head_dim < 64 run here, but pv_block
  // still takes the tiles, which leave the value rows to the scores when values_with_keys.
  if (pf && hd % 8 == 0 && values_with_keys(nh, hd))
    for (int j = 0; j < nk; ++j) pf->values(j);
#endif
  for (int h = 0; h < nh; ++h)
    for (int j = 0; j < nk; ++j)
      S[h * s_stride + j] = scale * dot_row(q[h], K + static_cast<size_t>(j) * hd, hd, exact);
}

/// acc[h][:] += sum_j P[h * p_stride + j] * V[j][:] for h < nh <= kHeadTile, j ascending for
/// every element; V rows contiguous [nk][hd]. Zero probabilities are multiplied like any other.
/// pf (may be null): software prefetch of the rows ahead (KVPrefetch).
template <typename T>
inline void pv_block(const float* P, int p_stride, int nh, const T* V, int nk, int hd, float* const* acc,
                     const KVPrefetch* pf = nullptr) {
#if SNAPKV_ATTN_AVX2
  if (hd % 8 == 0) return pv_rows(P, p_stride, nh, DenseRows<T>{V, hd}, nk, hd, acc, pf);
#endif
  if (pf)
    for (int j = 0; j < nk; ++j) pf->values(j);
  for (int j = 0; j < nk; ++j)
    for (int h = 0; h < nh; ++h) axpy_row(acc[h], P[h * p_stride + j], V + static_cast<size_t>(j) * hd, hd);
}

/// Writes s[j] = e^(s[j] - m) for j < n and returns their sum (in double); m not NaN and >= every
/// s[j] that is not NaN (the running maximum of the online softmax). The exponentials are exp8()'s bits
/// (exp_or_zero() without AVX2): with AVX-512 through exp16_nonpos, whose 19 instructions give
/// exp16's result for every argument below 88.37, so for every s[j] - m <= 0 (AVX2: exp8_nonpos
/// in exp_sum_row, the same argument); the summation order is this function's.
inline double exp_sum_block(float* s, int n, float m) {
#if SNAPKV_ATTN_AVX512
  const __m512 vm = _mm512_set1_ps(m);
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  auto add = [&](__m512 e) {
    a0 = _mm512_add_pd(a0, _mm512_maskz_cvtps_pd(0xFF, low8(e)));
    a1 = _mm512_add_pd(a1, _mm512_maskz_cvtps_pd(0xFF, high8(e)));
  };
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp16_nonpos(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    add(e);
  }
  if (j < n) {
    const auto k = static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 e = exp16_nonpos(_mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), k, s + j), vm));
    _mm512_mask_storeu_ps(s + j, k, e);
    add(e);
  }
  const __m512d a = _mm512_add_pd(a0, a1);
  return hsum_pd(_mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, a, 0), _mm512_maskz_extractf64x4_pd(0xF, a, 1)));
#else
  return exp_sum_row(s, n, m, s);
#endif
}

}  // namespace snapkv::attn
