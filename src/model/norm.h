// snapkv: RMSNorm (Zhang & Sennrich 2019), computed like ggml's CPU op.
#pragma once

#include <cstdint>

#include "model/activation.h"  // the FFN activations (kept reachable through this header)

namespace snapkv {

/// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] for i < n (w may be nullptr: no weight).
/// The sum of squares is accumulated in double (as ggml does). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

/// rms_norm on `rows` rows of `n` floats with strides (in floats); parallel over rows on
/// `n_threads` OpenMP threads when large.
void rms_norm_rows(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride, int64_t n,
                   int64_t rows, float eps, int n_threads);

}  // namespace snapkv
