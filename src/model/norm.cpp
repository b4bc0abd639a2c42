// RMSNorm (see model/norm.h), arithmetic ordered like ggml's CPU op.
#include "model/norm.h"

#include <cmath>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace snapkv {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  // ggml accumulates the f32 squares in ggml_float (double); 4 double lanes here (the order
  // hardly matters in double).
  double sum = 0.0;
  int64_t i0 = 0;
#if defined(__AVX2__)
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  for (; i0 + 8 <= n; i0 += 8) {
    const __m256 v = _mm256_loadu_ps(x + i0);
    const __m256 sq = _mm256_mul_ps(v, v);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
  sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (int64_t i = i0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rms_norm_rows(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride, int64_t n,
                   int64_t rows, float eps, int n_threads) {
  if (rows * n >= 16384 && n_threads > 1) {
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (int64_t r = 0; r < rows; ++r) rms_norm(x + r * x_stride, w, y + r * y_stride, n, eps);
  } else {
    for (int64_t r = 0; r < rows; ++r) rms_norm(x + r * x_stride, w, y + r * y_stride, n, eps);
  }
}

}  // namespace snapkv
