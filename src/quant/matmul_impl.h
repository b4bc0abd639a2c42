// snapkv: internal entry points of the matmul, one per weight type (validated arguments).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_context.h"
#include "quant/quant.h"
#include "quant/tiling.h"

namespace snapkv::quant {

/// Scratch slots of ThreadContext used by the kernels.
inline constexpr int kSlotAct = 0;      ///< quantized / rounded activations (calling thread)
inline constexpr int kSlotLanes = 1;    ///< their token-lane copy (calling thread)
inline constexpr int kSlotEntries = 2;  ///< unpacked weight rows (one per team thread)

/// False when the environment sets SNAPKV_TOKEN_LANES=0 (read once): quantized calls of
/// lane_min_tokens() tokens or more then use the decode kernels too, so that a token's result is bitwise the same in
/// any batch (quant.h, "Determinism"); prefill is slower. For tests and deterministic serving.
bool token_lanes_enabled();

/// Fewest tokens of a call of weight type t that takes the token-lane kernels (when
/// token_lanes_enabled()): 8; on AVX2 without AVX-512 VNNI 12 for Q4_K / Q5_K / Q6_K and 16 for
/// Q8_0. A 16-token tile costs the same for 8 tokens as for 16, and there the decode tiles of
/// those types stay faster up to the crossing measured on Zen 3 (~12 tokens for the K-quants,
/// 13-16 for Q8_0; the other 32-element types gain from 8 on; docs/benchmarks.md, "AVX2 token
/// lanes for the K-quants").
int64_t lane_min_tokens(GGMLType t);

/// A product prepared for the decode-family kernels (tiling.h): what `loop` needs to compute its
/// rows inside a parallel region (several jobs may share one region: matmul_group).
struct TileJob {
  TileCtx ctx;
  int64_t rows = 0;
  int64_t n_tokens = 0;
  void (*loop)(const TileCtx&, int64_t rows, int64_t n_tokens) = nullptr;
  double macs() const {
    return static_cast<double>(rows) * static_cast<double>(ctx.cols) * static_cast<double>(n_tokens);
  }
};

/// The kernels of one weight type (arguments validated by the caller).
struct MatmulOps {
  /// The whole Y = X W^T (quant.h, matmul).
  void (*matmul)(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc);
  /// Bytes of converted activations for n_tokens rows of W.cols elements (0: X is read as is).
  size_t (*act_bytes)(int64_t cols, int64_t n_tokens);
  /// Converts X into act (act_bytes long, 64-byte aligned; serially, on the calling thread) and
  /// returns the decode-family job for Y = X W^T: the same per-(row, token) operations as
  /// matmul's path for n_tokens < 8 (< lane_min_tokens(W.type)), so the same bits.
  TileJob (*prepare)(const WeightView& W, const float* X, int64_t n_tokens, float* Y, uint8_t* act, int n_threads);
};

extern const MatmulOps kOpsQ4_0, kOpsQ4_1, kOpsQ5_0, kOpsQ5_1, kOpsQ8_0;  // matmul_legacy.cpp
extern const MatmulOps kOpsQ4_K, kOpsQ5_K, kOpsQ6_K;                      // matmul_kquants.cpp
extern const MatmulOps kOpsF32, kOpsF16, kOpsBF16;                        // matmul_float.cpp

}  // namespace snapkv::quant
