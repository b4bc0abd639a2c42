// snapkv: dequantization and the matrix kernels of the forward pass, working directly on
// quantized GGUF weights. Block layouts follow ggml (ggml-common.h; K-quants: QK_K = 256).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/ggml_type.h"
#include "core/thread_context.h"

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
/// Multi-threaded (OpenMP, tc.n_threads() threads; scratch from tc) and SIMD. For quantized W the
/// activations are quantized once per call (Q8_0 / Q8_K as in ggml) and integer dot products
/// are used, so results match ggml's to rounding. n_tokens == 1 is the decode (mat-vec) path.
/// Throws snapkv::Error for an unsupported type or cols not a multiple of its block size.
///
/// Numerics (ggml's vec_dot_type per weight type, ggml-cpu.c type_traits_cpu):
///   Q4_0, Q5_0, Q8_0 -> X as Q8_0 (per 32: d = amax/127 stored as f16, q = round(x*127/amax));
///   Q4_1, Q5_1 -> Q8_1 (Q8_0 plus s = f16(d * sum q)); Q4_K, Q5_K, Q6_K -> Q8_K (per 256:
///   d = max/-127 in f32); F16 -> X rounded to f16; BF16 -> X rounded to bf16; F32 -> X as is.
///   Per block the integer dot product is exact; scales are applied in f32 and accumulated in
///   f32. Hence |Y - exact| <= sum_c |W[r][c]| * (activation rounding error of c) + f32
///   accumulation error (tests/quant/test_matmul.cpp states the bound per type).
/// Determinism: each Y[t][r] is computed by one thread with an operation sequence that does
/// not depend on the thread count or on the token's position in X, so results are bitwise
/// identical across thread counts. Two kernel families serve a call: the decode family
/// (n_tokens < quant::lane_min_tokens(W.type), and every call of a scalar build) and the
/// token-lane prefill family for quantized W from that many tokens on (8; on AVX2 without VNNI 12
/// for the K-quants and 16 for Q8_0; the 32-element types and the K-quants, with AVX2 or AVX-512
/// VNNI, with the same bits on both from 16 tokens, where both hosts take the lanes); within a
/// family a token's result is
/// bitwise the same in any batch, across families it differs by f32 rounding only (both
/// satisfy the bound above). Builds (AVX-512 / AVX2 / scalar) differ in rounding too.
/// Cost: decode streams W once (memory-bound); prefill unpacks each tile of 8 weight rows once
/// and multiplies it with 16 tokens (one 16-lane register with VNNI, two 8-lane ones with AVX2).
/// Y must not alias X or W. Concurrent calls from different threads are fine when each has its
/// own ThreadContext (its scratch is not shared); called inside an OpenMP parallel region it
/// runs on the calling thread alone (no nested parallelism), with the same results.
void matmul(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);

/// One product of matmul_group: Y = X W^T, Y [n_tokens x W.rows] f32 row-major.
struct MatmulProduct {
  WeightView W;
  float* Y = nullptr;
};

/// Y_i = X W_i^T for every product: the products of one input (a layer's q / k / v, or its FFN
/// gate / up), any weight types, all with the same W.cols. Bitwise the results of one matmul call
/// per product. For n_tokens < 8 (decode) X is converted once per weight type and all products
/// run in one OpenMP parallel region, the threads passing from one product's rows to the next
/// without waiting: one barrier per group instead of one per product (decode of SmolLM2-135M
/// ~2 % faster in one set of runs, within noise; docs/benchmarks.md). All products are checked
/// first (errors as matmul, plus differing W.cols); no Y may alias X, a W, or another Y.
void matmul_group(std::span<const MatmulProduct> products, const float* X, int64_t n_tokens, ThreadContext& tc);

/// Dot product of a f32 vector `x` (length W.cols) with row `row` of `W`, dequantizing on the
/// fly; x is NOT quantized and the sum is accumulated in double, rounded to f32 once (a slow
/// reference path for tests and tiny tensors). Throws snapkv::Error for an unsupported type,
/// a partial block or a row out of range.
float dot_row_f32(const WeightView& W, int64_t row, const float* x);

/// Converts `n` floats to IEEE half / back (SIMD where available).
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);

/// The SIMD level the kernels were compiled for: "avx512-vnni", "avx2" or "scalar"
/// (compile-time dispatch from the -march flags; SNAPKV_NATIVE=OFF gives "scalar").
const char* kernel_isa();

}  // namespace snapkv
