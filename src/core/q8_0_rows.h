// snapkv: rows of ggml's Q8_0 blocks, the codec of the KV cache's `q8_0` type (see
// snapkv/kv_type.h): per 32 elements one f16 scale d and 32 int8 q, x ~= d * q.
#pragma once

#include <cstdint>

namespace snapkv {

/// Quantizes x[n] (n a multiple of 32) into n / 32 Q8_0 blocks at dst (34 bytes each), as ggml's
/// quantize_row_q8_0_ref: per block d = max|x| / 127, q = roundf(x / d) (ties away from zero;
/// all zeros for an all-zero block), d stored as f16. Non-finite inputs give an undefined block.
void quantize_q8_0_row(const float* x, uint8_t* dst, int n);

/// Dequantizes n / 32 Q8_0 blocks at src into y[n] (n a multiple of 32): y = f16(d) * q, exact
/// in f32 (the same bits with and without SIMD).
void dequantize_q8_0_row(const uint8_t* src, float* y, int n);

/// `rows` consecutive rows of n elements each: src rows of n / 32 * 34 bytes, y rows of n floats.
void dequantize_q8_0_rows(const uint8_t* src, float* y, int64_t rows, int n);

}  // namespace snapkv
