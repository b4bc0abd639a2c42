// snapkv: matmul for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights (activations -> Q8_0 / Q8_1).
#include "quant/act_quant.h"
#include "quant/kern_lanes.h"
#include "quant/kern_legacy.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

size_t act_bytes(int64_t cols, int64_t n_tokens) { return q8_row_stride(cols) * static_cast<size_t>(n_tokens); }

/// X as Q8 rows for KLegacy<U> (threaded for >= 8 tokens).
template <class U>
void quantize(const WeightView& W, const float* X, int64_t n_tokens, uint8_t* act, int n_threads) {
  using K = KLegacy<U>;
  const size_t stride = q8_row_stride(W.cols);
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n_tokens >= 8)
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_q8_row(X + t * W.cols, W.cols, K::act_offset(), U::kMin, act + static_cast<size_t>(t) * stride);
  }
}

template <class U>
TileJob prepare(const WeightView& W, const float* X, int64_t n_tokens, float* Y, uint8_t* act, int n_threads) {
  quantize<U>(W, X, n_tokens, act, 1);
  return {tile_ctx(W, act, q8_row_stride(W.cols), Y, n_threads), W.rows, n_tokens, &tiles_loop<KLegacy<U>>};
}

template <class U>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  const size_t stride = q8_row_stride(W.cols);
  uint8_t* act = tc.scratch(kSlotAct, 0, act_bytes(W.cols, n_tokens));
  quantize<U>(W, X, n_tokens, act, tc.n_threads());
#if defined(SNAPKV_AVX2)
  if (n_tokens >= lane_min_tokens(W.type) && token_lanes_enabled()) {
    run_lanes<LaneLegacy<U>>(W, act, stride, n_tokens, Y, tc);
    return;
  }
#endif
  run_tiles<KLegacy<U>>(tile_ctx(W, act, stride, Y, tc.n_threads()), W.rows, n_tokens);
}

template <class U>
constexpr MatmulOps ops() {
  return {&run<U>, &act_bytes, &prepare<U>};
}

}  // namespace

const MatmulOps kOpsQ4_0 = ops<UQ4_0>();
const MatmulOps kOpsQ4_1 = ops<UQ4_1>();
const MatmulOps kOpsQ5_0 = ops<UQ5_0>();
const MatmulOps kOpsQ5_1 = ops<UQ5_1>();
const MatmulOps kOpsQ8_0 = ops<UQ8_0>();

}  // namespace snapkv::quant
