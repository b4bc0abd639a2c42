// snapkv: a decode (one token) matmul for Q8_0 weights stored row-interleaved ("row lanes"):
// 16 weight rows per group, one row per 32-bit lane of an AVX-512 register (issue 13).
//
// Used by the engine for the output projection of Q8_0 models (Model::logits, calls of 1-7 rows;
// 8 or more rows take the token-lane kernels, whose bits these are). The engine's decode kernel
// (kern_legacy.h, 16-row tile) walks each row's blocks in GGUF order and sums 16 lanes per row at
// the end; per pair of blocks and row it spends ~9 cycles on Zen 4 (unpack, two f16 scale lookups,
// convert, scale, accumulate), so it is compute-bound below ~30 GB/s per core even when the
// weights are in cache. Here a group's block b is 16 f16 scales (one `vcvtph2ps`) and 8 x 64
// bytes of quants, lane l holding row l's 4 bytes 4k..4k+3 in register k: eight `vpdpbusd` with
// the token's 4-byte group broadcast give the 16 rows' integer block sums with no reduction.
// bench_kernels `DecodeRowLane/Q8_0/...` against `Decode/Q8_0/...` measures it (docs/benchmarks.md,
// "Row-interleaved Q8_0 for decode"). The matrix is repacked at load and its GGUF pages dropped
// (model.cpp; a tied matrix's embedding lookups read the repacked rows); the layer matrices
// still use the GGUF rows.
//
// Bits: per (row, block) the exact int32 sum corr + sum_k dpbusd(u, x) (u = q + 128, corr = -128 x
// sum of the block's x quants), then acc = fma(float(isum), d_w * d_x, acc) in block order: the
// token-lane prefill kernels' arithmetic (kern_lanes.h), so a row's value equals theirs bit for bit
// (tests/quant/test_kern_rowlane.cpp), not the 16-row decode tile's (which sums lanes in another
// order).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/thread_context.h"
#include "quant/act_quant.h"
#include "quant/blocks.h"
#include "quant/prefetch.h"
#include "quant/simd.h"

namespace snapkv::quant {

inline constexpr int kRowLaneRows = 16;      ///< rows per group (register lanes)
inline constexpr int kRowLaneMaxTokens = 7;  ///< 8 or more tokens: the token-lane kernels (same bits)
#if defined(SNAPKV_VNNI)
inline constexpr bool kRowLaneSupported = true;  ///< the kernel exists in this build (AVX-512 VNNI)
#else
inline constexpr bool kRowLaneSupported = false;
#endif
inline constexpr size_t kRowLaneBlockBytes = 32 + 8 * 64;  ///< one group's block: 16 f16 scales + 16 x 32 quants

/// Bytes of a Q8_0 matrix of rows x cols (cols % 32 == 0) in row-lane layout: ceil(rows / 16)
/// groups of cols / 32 blocks of kRowLaneBlockBytes (rows past the end: zero scales and quants).
inline size_t rowlane_q8_0_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + kRowLaneRows - 1) / kRowLaneRows) * static_cast<size_t>(cols / 32) *
         kRowLaneBlockBytes;
}

/// Repacks GGUF Q8_0 rows (w, w_stride bytes apart) of groups [g0, g1) into `out`
/// (rowlane_q8_0_bytes for the whole matrix): group g, block b at (g * nb + b) *
/// kRowLaneBlockBytes holds the 16 rows' f16 scales, then for k = 0..7 64 bytes: lane l = row
/// 16 g + l's quants 4k..4k+3 of block b, each + 128 (unsigned). Rows past `rows`: zeros.
inline void pack_rowlane_q8_0_groups(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, uint8_t* out,
                                     int64_t g0, int64_t g1) {
  const int64_t nb = cols / 32;
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + static_cast<size_t>(g * nb + b) * kRowLaneBlockBytes;
      if ((g + 1) * kRowLaneRows > rows) std::memset(dst, 0, kRowLaneBlockBytes);  // the last group's missing rows
      for (int l = 0; l < kRowLaneRows; ++l) {
        const int64_t r = g * kRowLaneRows + l;
        if (r >= rows) break;
        const uint8_t* blk = w + static_cast<size_t>(r) * w_stride + static_cast<size_t>(b) * kQ8_0Bytes;
        std::memcpy(dst + 2 * l, blk, 2);
        for (int k = 0; k < 8; ++k) {  // 4 quants at a time, each + 128
          uint32_t q4;
          std::memcpy(&q4, blk + 2 + 4 * k, 4);
          q4 ^= 0x80808080u;
          std::memcpy(dst + 32 + 64 * k + 4 * l, &q4, 4);
        }
      }
    }
}

/// pack_rowlane_q8_0_groups over the whole matrix.
inline void pack_rowlane_q8_0(const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, uint8_t* out) {
  pack_rowlane_q8_0_groups(w, w_stride, rows, cols, out, 0, (rows + kRowLaneRows - 1) / kRowLaneRows);
}

/// Row r of a row-lane Q8_0 matrix as floats (out[cols]): d * q per element, the values
/// dequantize_row gives for the GGUF row (the embedding lookup of a tied, repacked matrix).
inline void dequantize_rowlane_q8_0_row(const uint8_t* packed, int64_t cols, int64_t r, float* out) {
  const int64_t nb = cols / 32, g = r / kRowLaneRows;
  const int l = static_cast<int>(r % kRowLaneRows);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = packed + static_cast<size_t>(g * nb + b) * kRowLaneBlockBytes;
    uint16_t h;
    std::memcpy(&h, blk + 2 * l, 2);
    const float d = fp16_to_fp32(h);
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 4; ++i)
        out[b * 32 + 4 * k + i] = d * static_cast<float>(static_cast<int8_t>(blk[32 + 64 * k + 4 * l + i] ^ 0x80));
  }
}

/// One token's activations for the row-lane kernel (build_rowlane_act): per block b the 8
/// four-byte groups of quants xq[8b..8b+7], the sum of the 8 corr terms and the scale d[b].
struct RowLaneAct {
  const uint32_t* xq = nullptr;
  const int32_t* corr = nullptr;
  const float* d = nullptr;
};

/// Bytes build_rowlane_act writes for `cols` (a multiple of 32): 40 per block, rounded up to 64.
inline size_t rowlane_act_bytes(int64_t cols) { return round_up64(static_cast<size_t>(cols / 32) * 40); }

/// The row-lane view of a token's Q8 row (act_quant.h, quantized with offset 128), written into
/// `buf` (rowlane_act_bytes(cols), 4-byte aligned); the view points into buf.
inline RowLaneAct build_rowlane_act(const uint8_t* act, int64_t cols, uint8_t* buf) {
  const int64_t nb = cols / 32;
  auto* xq = reinterpret_cast<uint32_t*>(buf);
  auto* corr = reinterpret_cast<int32_t*>(buf + static_cast<size_t>(nb) * 32);
  auto* d = reinterpret_cast<float*>(buf + static_cast<size_t>(nb) * 36);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* src = act + q8_block_offset(b);
    std::memcpy(xq + b * 8, src, 32);
    int32_t c[8], total = 0;
    std::memcpy(c, src + kQ8Corr, sizeof(c));
    for (const int32_t v : c) total += v;
    corr[b] = total;
    std::memcpy(d + b, src + kQ8Dv, 4);
  }
  return {xq, corr, d};
}

#if defined(SNAPKV_VNNI)
/// Y[t][r] = W.row(r) . x[t] (at y + t * y_stride + r) for T tokens and the rows of groups
/// [g0, g1) (rows < `rows`), W in row-lane layout: each block's quants and scales are loaded once
/// for the T tokens. Asks for the block kPrefetchAheadBytes ahead into L2 as it goes.
template <int T>
inline void rowlane_q8_0_tokens(const uint8_t* packed, int64_t rows, int64_t cols, const RowLaneAct* x, float* y,
                                size_t y_stride, int64_t g0, int64_t g1) {
  static_assert(T >= 1 && T <= kRowLaneMaxTokens, "8 or more tokens: the token-lane kernels");
  const int64_t nb = cols / 32;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* wg = packed + static_cast<size_t>(g * nb) * kRowLaneBlockBytes;
    __m512 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = wg + static_cast<size_t>(b) * kRowLaneBlockBytes;
      prefetch_l2(blk + kPrefetchAheadBytes, kRowLaneBlockBytes);
      __m512i wv[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) wv[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
      const __m512 dw = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      const auto bi = static_cast<size_t>(b);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint32_t* xq = &x[t].xq[bi * 8];
        __m512i is = _mm512_set1_epi32(x[t].corr[bi]);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) is = _mm512_dpbusd_epi32(is, wv[k], _mm512_set1_epi32(static_cast<int>(xq[k])));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dw, _mm512_set1_ps(x[t].d[bi])), acc[t]);
      }
    }
    const int64_t left = rows - g * kRowLaneRows;
    const __mmask16 m =
        left >= kRowLaneRows ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride + g * kRowLaneRows, m, acc[t]);
  }
}

/// rowlane_q8_0_tokens for n = 1..7 tokens (a run-time count; other n: nothing).
inline void rowlane_q8_0(const uint8_t* packed, int64_t rows, int64_t cols, const RowLaneAct* x, int n, float* y,
                         size_t y_stride, int64_t g0, int64_t g1) {
  switch (n) {
    case 1:
      return rowlane_q8_0_tokens<1>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 2:
      return rowlane_q8_0_tokens<2>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 3:
      return rowlane_q8_0_tokens<3>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 4:
      return rowlane_q8_0_tokens<4>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 5:
      return rowlane_q8_0_tokens<5>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 6:
      return rowlane_q8_0_tokens<6>(packed, rows, cols, x, y, y_stride, g0, g1);
    case 7:
      return rowlane_q8_0_tokens<7>(packed, rows, cols, x, y, y_stride, g0, g1);
    default:
      return;
  }
}
#endif

/// Y[t][r] = W.row(r) . X[t] for n = 1..kRowLaneMaxTokens tokens (X [n x cols] f32, Y [n x rows]),
/// W (rows x cols Q8_0) in row-lane layout: each token quantized to Q8_0 as ggml does, the groups
/// of 16 rows split evenly over tc's threads (one parallel region); scratch from tc. Throws
/// snapkv::Error for another n, cols not a multiple of 32, or a build without kRowLaneSupported.
void matmul_rowlane_q8_0(const uint8_t* packed, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                         ThreadContext& tc);

}  // namespace snapkv::quant
