// snapkv: quantization of the activations (the X of matmul) into the kernels' layouts.
// ggml quantizes activations once per matmul to the weight type's `vec_dot_type`:
// Q8_0 (for Q4_0, Q5_0, Q8_0), Q8_1 (Q4_1, Q5_1), Q8_K (K-quants), F16 (F16), BF16 (BF16).
// snapkv keeps the same numbers but lays them out for its SIMD kernels:
//
// Q8 row (one token, nb = cols / 32 blocks), stored by pairs of blocks (2p, 2p+1) so that an
// AVX-512 register holds two blocks; each pair takes kQ8Pair = 192 bytes:
//   i8  qs[2][32]   @0     the quants of block 2p, then block 2p+1
//   i32 corr[2][8]  @64    corr[i] = -offset * (qs[4i] + .. + qs[4i+3])
//   f32 dv[2][8]    @128   the block scale (rounded through f16, as ggml stores it), 8 times
// then f32 s[nb]: f16(d * sum(qs)) per block (the Q8_1 `s`; 0 unless requested). When nb is
// odd the second half of the last pair is all zeros.
// `offset` is the constant the weight kernel adds to make its quants unsigned (128 for Q8_0
// with VNNI, 16 for Q5_0, 8 for Q4_0, 0 otherwise) so that dpbusd(corr, u, qs) is the exact
// signed dot product.
//
// Q8_K row (nb = cols / 256 super-blocks), kQ8KBlock bytes each:
//   i8 qs[256] @0 | i16 bsum16[16] @256 (sums of 16) | i16 bsum32[8] @288 (sums of 32) |
//   f32 d @304 | pad to 320
#pragma once

#include <cstddef>
#include <cstdint>

namespace snapkv::quant {

inline constexpr size_t kQ8Pair = 192;
inline constexpr size_t kQ8Corr = 64;
inline constexpr size_t kQ8Dv = 128;
inline constexpr size_t kQ8KBlock = 320;
inline constexpr size_t kQ8KBsum16 = 256;
inline constexpr size_t kQ8KBsum32 = 288;
inline constexpr size_t kQ8KD = 304;

inline size_t round_up64(size_t n) { return (n + 63) / 64 * 64; }

inline size_t q8_pairs(int64_t cols) { return static_cast<size_t>((cols / 32 + 1) / 2); }
/// Bytes of one token's Q8 row for `cols` (a multiple of 32).
inline size_t q8_row_stride(int64_t cols) {
  return round_up64(q8_pairs(cols) * kQ8Pair + static_cast<size_t>(cols / 32) * sizeof(float));
}
/// Offset of the s array inside a Q8 row.
inline size_t q8_s_offset(int64_t cols) { return q8_pairs(cols) * kQ8Pair; }
/// Offset of block b's quants inside a Q8 row (its corr and dv are kQ8Corr / kQ8Dv further).
inline size_t q8_block_offset(int64_t b) {
  return static_cast<size_t>(b >> 1) * kQ8Pair + static_cast<size_t>(b & 1) * 32;
}

/// Bytes of one token's Q8_K row for `cols` (a multiple of 256).
inline size_t q8k_row_stride(int64_t cols) { return static_cast<size_t>(cols / 256) * kQ8KBlock; }

/// Quantizes x[cols] to a Q8 row (see above). `with_sum` fills s (Q8_1).
/// Scale per block: d = amax/127, q = round-half-even(x * 127/amax) (ggml's x86 path).
void quantize_q8_row(const float* x, int64_t cols, int offset, bool with_sum, uint8_t* out);

/// Quantizes x[cols] to a Q8_K row (ggml quantize_row_q8_K_ref: iscale = -127/max where
/// max is the element of largest magnitude, q = min(127, round-half-even(iscale*x)), d = 1/iscale).
void quantize_q8k_row(const float* x, int64_t cols, uint8_t* out);

/// Rounds x[cols] through f16 (F16 weights) or bf16 (BF16 weights), as ggml converts the
/// activations to the weight's type; writes f32.
void round_row_f16(const float* x, int64_t cols, float* out);
void round_row_bf16(const float* x, int64_t cols, float* out);

/// f32 -> bf16 with round-to-nearest-even (ggml_compute_fp32_to_bf16; NaN stays NaN).
inline uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace snapkv::quant
