// snapkv: internal entry points of the matmul, one per weight type (validated arguments).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_context.h"
#include "quant/quant.h"

namespace snapkv::quant {

/// Scratch slots of ThreadContext used by the kernels.
inline constexpr int kSlotAct = 0;      ///< quantized / rounded activations (calling thread)
inline constexpr int kSlotLanes = 1;    ///< their token-lane copy (calling thread)
inline constexpr int kSlotEntries = 2;  ///< unpacked weight rows (one per team thread)

/// False when the environment sets SNAPKV_TOKEN_LANES=0 (read once): quantized calls of >= 8
/// tokens then use the decode kernels too, so that a token's result is bitwise the same in any
/// batch (quant.h, "Determinism"); prefill is slower. For tests and deterministic serving.
bool token_lanes_enabled();

void matmul_q4_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q4_1(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q5_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q5_1(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q8_0(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q4_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q5_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_q6_k(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_f32(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_f16(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
void matmul_bf16(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);

}  // namespace snapkv::quant
