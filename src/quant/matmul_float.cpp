// snapkv: matmul for F32, F16, BF16 weights. F32 uses X as is; for F16 / BF16 the
// activations are first rounded to the weight type (ggml's vec_dot_type), kept as f32.
#include "quant/act_quant.h"
#include "quant/kern_float.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

template <FKind kKind>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  const uint8_t* act = reinterpret_cast<const uint8_t*>(X);
  size_t stride = static_cast<size_t>(W.cols) * sizeof(float);
  if constexpr (kKind != FKind::F32) {
    stride = round_up64(stride);
    uint8_t* rounded = tc.scratch(kSlotAct, 0, stride * static_cast<size_t>(n_tokens));
#pragma omp parallel for schedule(static) num_threads(tc.n_threads()) if (n_tokens >= 8)
    for (int64_t t = 0; t < n_tokens; ++t) {
      auto* out = reinterpret_cast<float*>(rounded + static_cast<size_t>(t) * stride);
      if constexpr (kKind == FKind::F16) {
        round_row_f16(X + t * W.cols, W.cols, out);
      } else {
        round_row_bf16(X + t * W.cols, W.cols, out);
      }
    }
    act = rounded;
  }
  run_tiles<KFloat<kKind>>(tile_ctx(W, act, stride, Y, tc.n_threads()), W.rows, n_tokens);
}

}  // namespace

void matmul_f32(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<FKind::F32>(W, X, n, Y, tc);
}
void matmul_f16(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  run<FKind::F16>(W, X, n, Y, tc);
}
void matmul_bf16(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
#if defined(SNAPKV_AVX512F) && defined(__AVX512BF16__)
  // Activations as bf16 (round-to-nearest-even, as ggml converts them) for vdpbf16ps.
  const size_t stride = round_up64(static_cast<size_t>(W.cols) * sizeof(uint16_t));
  uint8_t* act = tc.scratch(kSlotAct, 0, stride * static_cast<size_t>(n));
#pragma omp parallel for schedule(static) num_threads(tc.n_threads()) if (n >= 8)
  for (int64_t t = 0; t < n; ++t) {
    auto* out = reinterpret_cast<uint16_t*>(act + static_cast<size_t>(t) * stride);
    for (int64_t i = 0; i < W.cols; ++i) out[i] = fp32_to_bf16(X[t * W.cols + i]);
  }
  run_tiles<KBF16Dot>(tile_ctx(W, act, stride, Y, tc.n_threads()), W.rows, n);
#else
  run<FKind::BF16>(W, X, n, Y, tc);
#endif
}

}  // namespace snapkv::quant
