// snapkv: internal entry points of the matmul, one per weight type (validated arguments).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/quant.h"

namespace snapkv::quant {

inline constexpr int kScratchSlots = 3;
/// 64-byte aligned per-thread scratch of at least `bytes` (reused across calls); slots
/// 0..kScratchSlots-1 are independent buffers (0: activations, 1: their token-lane copy,
/// 2: unpacked weights, one per worker thread).
uint8_t* act_scratch(size_t bytes, int slot = 0);

void matmul_q4_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q4_1(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q5_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q5_1(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q8_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q4_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q5_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_q6_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_f32(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_f16(const WeightView& W, const float* X, int64_t n_tokens, float* Y);
void matmul_bf16(const WeightView& W, const float* X, int64_t n_tokens, float* Y);

}  // namespace snapkv::quant
