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
unsigned query_i16_set(const float* const* q, int nh, int hd, QueryI16& out);

struct KVPrefetch;  // decode_simd.h

/// S[h * s_stride + j] = scale x dot(row h0 + h of q, K[j]) for h < nh, j < nk: nk Q8_0 key rows of
/// rb bytes from K (hd % 32 == 0, hd <= kQueryI16MaxDim), the queries rows [h0, h0 + nh) of q
/// (query_i16_set), 1 <= nh <= kQueryI16Heads - h0. Tiles of 16 / nh keys (4 for nh = 3), then
/// single keys; each tile first asks pf (may be null) for its key rows. Compiled in its own
/// translation unit (decode_q8_keys.cpp), one call per head tile and 64-key block, so that its
/// code cannot move GCC's inlining decisions in decode.cpp: while it was inlined there, GCC once
/// left hsum16 out of line and the F16 decode tiles ran 1.3-1.7x slower (hsum16 is now always
/// inlined too). Inlined, it measured ~3 % faster on the SmolLM2 shape.
void scores_rows_q8_i16(const QueryI16& q, int h0, int nh, const uint8_t* K, size_t rb, int nk, int hd, float scale,
                        float* S, int s_stride, const KVPrefetch* pf);

#endif  // SNAPKV_DECODE_Q8_KEYS_I16

}  // namespace snapkv::attn
