// snapkv: matmul for Q4_K, Q5_K, Q6_K weights (activations -> Q8_K).
#include "quant/act_quant.h"
#include "quant/kern_kquants.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

template <class K>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y) {
  const size_t stride = q8k_row_stride(W.cols);
  uint8_t* act = act_scratch(stride * static_cast<size_t>(n_tokens));
#pragma omp parallel for schedule(static) if (n_tokens >= 8)
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_q8k_row(X + t * W.cols, W.cols, act + static_cast<size_t>(t) * stride);
  }
  TileCtx c;
  c.w = W.data;
  c.w_stride = W.row_bytes();
  c.act = act;
  c.a_stride = stride;
  c.cols = W.cols;
  c.y = Y;
  c.y_stride = W.rows;
  run_tiles<K>(c, W.rows, n_tokens);
}

}  // namespace

void matmul_q4_k(const WeightView& W, const float* X, int64_t n, float* Y) { run<KQ45K<false>>(W, X, n, Y); }
void matmul_q5_k(const WeightView& W, const float* X, int64_t n, float* Y) { run<KQ45K<true>>(W, X, n, Y); }
void matmul_q6_k(const WeightView& W, const float* X, int64_t n, float* Y) { run<KQ6K>(W, X, n, Y); }

}  // namespace snapkv::quant
