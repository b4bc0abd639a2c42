// snapkv: dequantization and the matrix kernels of the forward pass, working directly on
// quantized GGUF weights. Block layouts follow ggml (ggml-common.h; K-quants: QK_K = 256).
#pragma once

#include <cstddef>
#include <cstdint>

#include "snapkv/ggml_type.h"

namespace snapkv {

/// A row-major weight matrix as stored in GGUF: `rows` rows of `cols` elements, each row
/// `ggml_row_bytes(type, cols)` bytes, rows consecutive. (GGUF dims = {cols, rows}.)
struct WeightView {
  GGMLType type = GGMLType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes() const { return ggml_row_bytes(type, cols); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
};

/// Dequantizes `n` elements (a multiple of the type's block size) from `src` into `dst` (f32).
/// Throws snapkv::Error for a type without kernels (names it).
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n);

/// Y = X * W^T. X: [n_tokens x W.cols] f32 row-major; Y: [n_tokens x W.rows] f32 row-major.
/// Multi-threaded (OpenMP, the current omp thread count) and SIMD. For quantized W the
/// activations are quantized once per call (Q8_0 / Q8_K as in ggml) and integer dot products
/// are used, so results match ggml's to rounding. n_tokens == 1 is the decode (mat-vec) path.
/// Throws snapkv::Error for an unsupported type or cols not a multiple of its block size.
void matmul(const WeightView& W, const float* X, int64_t n_tokens, float* Y);

/// Dot product of a f32 vector `x` (length n) with row `row` of `W`, dequantizing on the fly
/// (exact f32 accumulate; a slow reference path for tests and tiny tensors).
float dot_row_f32(const WeightView& W, int64_t row, const float* x);

/// Converts `n` floats to IEEE half / back (SIMD where available).
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);

/// Sets the number of threads the kernels use (>= 1).
void set_num_threads(int n);
int num_threads();

}  // namespace snapkv
