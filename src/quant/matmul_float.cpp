// snapkv: matmul for F32, F16, BF16 weights. F32 uses X as is; for F16 / BF16 the
// activations are first rounded to the weight type (ggml's vec_dot_type), kept as f32.
#include "quant/act_quant.h"
#include "quant/kern_float.h"
#include "quant/matmul_impl.h"
#include "quant/tiling.h"

namespace snapkv::quant {
namespace {

/// Bytes per converted activation row (0 for F32: X is read as is).
template <FKind kKind>
size_t row_stride(int64_t cols) {
  return kKind == FKind::F32 ? 0 : round_up64(static_cast<size_t>(cols) * sizeof(float));
}

template <FKind kKind>
size_t act_bytes(int64_t cols, int64_t n_tokens) {
  return row_stride<kKind>(cols) * static_cast<size_t>(n_tokens);
}

/// The activations KFloat<kKind> reads: X itself (F32) or X rounded into `rounded`.
template <FKind kKind>
const uint8_t* convert(const WeightView& W, const float* X, int64_t n_tokens, uint8_t* rounded, int n_threads) {
  if constexpr (kKind == FKind::F32) {
    return reinterpret_cast<const uint8_t*>(X);
  } else {
    const size_t stride = row_stride<kKind>(W.cols);
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n_tokens >= 8)
    for (int64_t t = 0; t < n_tokens; ++t) {
      auto* out = reinterpret_cast<float*>(rounded + static_cast<size_t>(t) * stride);
      if constexpr (kKind == FKind::F16) {
        round_row_f16(X + t * W.cols, W.cols, out);
      } else {
        round_row_bf16(X + t * W.cols, W.cols, out);
      }
    }
    return rounded;
  }
}

template <FKind kKind>
size_t a_stride(int64_t cols) {
  return kKind == FKind::F32 ? static_cast<size_t>(cols) * sizeof(float) : row_stride<kKind>(cols);
}

template <FKind kKind>
TileJob prepare(const WeightView& W, const float* X, int64_t n_tokens, float* Y, uint8_t* act, int n_threads) {
  const uint8_t* a = convert<kKind>(W, X, n_tokens, act, 1);
  return {tile_ctx(W, a, a_stride<kKind>(W.cols), Y, n_threads), W.rows, n_tokens, &tiles_loop<KFloat<kKind>>};
}

template <FKind kKind>
void run(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  uint8_t* rounded = kKind == FKind::F32 ? nullptr : tc.scratch(kSlotAct, 0, act_bytes<kKind>(W.cols, n_tokens));
  const uint8_t* act = convert<kKind>(W, X, n_tokens, rounded, tc.n_threads());
  run_tiles<KFloat<kKind>>(tile_ctx(W, act, a_stride<kKind>(W.cols), Y, tc.n_threads()), W.rows, n_tokens);
}

#if defined(SNAPKV_AVX512F) && defined(__AVX512BF16__)
// BF16 weights: activations as bf16 (round-to-nearest-even, as ggml converts them) for vdpbf16ps.
size_t bf16_stride(int64_t cols) { return round_up64(static_cast<size_t>(cols) * sizeof(uint16_t)); }

size_t bf16_act_bytes(int64_t cols, int64_t n_tokens) { return bf16_stride(cols) * static_cast<size_t>(n_tokens); }

void bf16_convert(const WeightView& W, const float* X, int64_t n, uint8_t* act, int n_threads) {
  const size_t stride = bf16_stride(W.cols);
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n >= 8)
  for (int64_t t = 0; t < n; ++t) {
    auto* out = reinterpret_cast<uint16_t*>(act + static_cast<size_t>(t) * stride);
    for (int64_t i = 0; i < W.cols; ++i) out[i] = fp32_to_bf16(X[t * W.cols + i]);
  }
}

TileJob bf16_prepare(const WeightView& W, const float* X, int64_t n, float* Y, uint8_t* act, int n_threads) {
  bf16_convert(W, X, n, act, 1);
  return {tile_ctx(W, act, bf16_stride(W.cols), Y, n_threads), W.rows, n, &tiles_loop<KBF16Dot>};
}

void bf16_run(const WeightView& W, const float* X, int64_t n, float* Y, ThreadContext& tc) {
  uint8_t* act = tc.scratch(kSlotAct, 0, bf16_act_bytes(W.cols, n));
  bf16_convert(W, X, n, act, tc.n_threads());
  run_tiles<KBF16Dot>(tile_ctx(W, act, bf16_stride(W.cols), Y, tc.n_threads()), W.rows, n);
}
#endif

template <FKind kKind>
constexpr MatmulOps ops() {
  return {&run<kKind>, &act_bytes<kKind>, &prepare<kKind>};
}

}  // namespace

const MatmulOps kOpsF32 = ops<FKind::F32>();
const MatmulOps kOpsF16 = ops<FKind::F16>();
#if defined(SNAPKV_AVX512F) && defined(__AVX512BF16__)
const MatmulOps kOpsBF16 = {&bf16_run, &bf16_act_bytes, &bf16_prepare};
#else
const MatmulOps kOpsBF16 = ops<FKind::BF16>();
#endif

}  // namespace snapkv::quant
