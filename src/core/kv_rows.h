// snapkv: one entry point to the block-quantized KV row codecs (Q8_0 and Q4_0, see
// snapkv/kv_type.h), for the code that handles every quantized type the same way (the cache's
// append, the prefill kernels, RowsView).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/q4_0_rows.h"
#include "core/q8_0_rows.h"
#include "snapkv/kv_type.h"

namespace snapkv {

/// Quantizes one row x[n] into kv_row_bytes(t, n) bytes at dst. `t` is Q8_0 or Q4_0 (n a
/// multiple of 32); any other type is a programming error (nothing is written).
inline void quantize_kv_row(KVType t, const float* x, uint8_t* dst, int n) {
  if (t == KVType::Q8_0) quantize_q8_0_row(x, dst, n);
  if (t == KVType::Q4_0) quantize_q4_0_row(x, dst, n);
}

/// Dequantizes `rows` consecutive rows of type `t` (Q8_0 or Q4_0; kv_row_bytes(t, n) bytes each)
/// into y[rows][n], exact in f32.
inline void dequantize_kv_rows(KVType t, const uint8_t* src, float* y, int64_t rows, int n) {
  const size_t rb = kv_row_bytes(t, n);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + static_cast<size_t>(r) * rb;
    float* out = y + r * n;
    if (t == KVType::Q8_0) dequantize_q8_0_row(s, out, n);
    if (t == KVType::Q4_0) dequantize_q4_0_row(s, out, n);
  }
}

}  // namespace snapkv
