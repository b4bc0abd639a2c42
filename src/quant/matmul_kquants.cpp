// snapkv: matmul for Q4_K, Q5_K, Q6_K weights (activations -> Q8_K).
#include "quant/act_quant.h"
#include "quant/kern_kquants.h"
#include "quant/kern_lanes_k.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

size_t act_bytes(int64_t cols, int64_t n_tokens) { return q8k_row_stride(cols) * static_cast<size_t>(n_tokens); }

/// X as Q8_K rows (threaded for >= 8 tokens).
void quantize(const WeightView& W, const float* X, int64_t n_tokens, uint8_t* act, int n_threads) {
  const size_t stride = q8k_row_stride(W.cols);
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n_tokens >= 8)
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_q8k_row(X + t * W.cols, W.cols, act + static_cast<size_t>(t) * stride);
  }
}

template <class K>
TileJob prepare(const WeightView& W, const float* X, int64_t n_tokens, float* Y, uint8_t* act, int n_threads) {
  quantize(W, X, n_tokens, act, 1);
  return {tile_ctx(W, act, q8k_row_stride(W.cols), Y, n_threads), W.rows, n_tokens, &tiles_loop<K>};
}

/// K: the pair kernel (kern_kquants.h); L: the token-lane policy (kern_lanes_k.h).
template <class K, class L>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  const size_t stride = q8k_row_stride(W.cols);
  uint8_t* act = tc.scratch(kSlotAct, 0, act_bytes(W.cols, n_tokens));
  quantize(W, X, n_tokens, act, tc.n_threads());
#if defined(SNAPKV_AVX2)
  if (n_tokens >= lane_min_tokens(W.type) && token_lanes_enabled()) {
    run_lanes<L>(W, act, stride, n_tokens, Y, tc);
    return;
  }
#endif
  run_tiles<K>(tile_ctx(W, act, stride, Y, tc.n_threads()), W.rows, n_tokens);
}

#if defined(SNAPKV_AVX2)
using L4 = LaneQ45K<false>;
using L5 = LaneQ45K<true>;
using L6 = LaneQ6K;
#else
using L4 = void;
using L5 = void;
using L6 = void;
#endif

template <class K, class L>
constexpr MatmulOps ops() {
  return {&run<K, L>, &act_bytes, &prepare<K>};
}

}  // namespace

const MatmulOps kOpsQ4_K = ops<KQ45K<false>, L4>();
const MatmulOps kOpsQ5_K = ops<KQ45K<true>, L5>();
const MatmulOps kOpsQ6_K = ops<KQ6K, L6>();

}  // namespace snapkv::quant
