// snapkv: matmul for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights (activations -> Q8_0 / Q8_1).
#include "quant/act_quant.h"
#include "quant/kern_lanes.h"
#include "quant/kern_legacy.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

#if defined(SNAPKV_VNNI)
inline constexpr int64_t kLaneMinTokens = 8;  ///< from this many tokens on: token-lane kernel
#endif

template <class U>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  using K = KLegacy<U>;
  const size_t stride = q8_row_stride(W.cols);
  uint8_t* act = tc.scratch(kSlotAct, 0, stride * static_cast<size_t>(n_tokens));
#pragma omp parallel for schedule(static) num_threads(tc.n_threads()) if (n_tokens >= 8)
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_q8_row(X + t * W.cols, W.cols, K::act_offset(), U::kMin, act + static_cast<size_t>(t) * stride);
  }
#if defined(SNAPKV_VNNI)
  if (n_tokens >= kLaneMinTokens && token_lanes_enabled()) {
    run_lanes<LaneLegacy<U>>(W, act, stride, n_tokens, Y, tc);
    return;
  }
#endif
  run_tiles<K>(tile_ctx(W, act, stride, Y, tc.n_threads()), W.rows, n_tokens);
}

}  // namespace

void matmul_q4_0(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<UQ4_0>(W, X, n, Y, tc);
}
void matmul_q4_1(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<UQ4_1>(W, X, n, Y, tc);
}
void matmul_q5_0(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<UQ5_0>(W, X, n, Y, tc);
}
void matmul_q5_1(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<UQ5_1>(W, X, n, Y, tc);
}
void matmul_q8_0(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<UQ8_0>(W, X, n, Y, tc);
}

}  // namespace snapkv::quant
