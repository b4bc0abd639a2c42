// Rotary position embedding (see model/rope.h), following ggml's rope_f32 arithmetic.
#include "model/rope.h"

#include <cmath>
#include <vector>

namespace snapkv {

void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs) {
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
    const float t = p.freq_scale * (theta / ff);
    cs[i0] = std::cos(t);
    cs[i0 + 1] = std::sin(t);
    theta *= theta_scale;
  }
}

// The rotation is written with explicit fma: left to -ffp-contract, the compiler fused the two products
// differently in its vectorised and scalar (alias-check fallback) copies of these loops, so a row's result
// depended on where its buffer lay in memory (1 ulp), and so did "batched equals alone".
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * p.head_dim;
    if (p.type == RopeType::Normal) {
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const float x0 = v[i0], x1 = v[i0 + 1];
        v[i0] = std::fma(x0, c, -(x1 * s));
        v[i0 + 1] = std::fma(x0, s, x1 * c);
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[i], x1 = v[i + half];
        v[i] = std::fma(x0, c, -(x1 * s));
        v[i + half] = std::fma(x0, s, x1 * c);
      }
    }
  }
}

void rope_rows(const RopeParams& p, const int32_t* pos, int64_t n_tokens, float* x, int64_t row_stride, int n_heads,
               int n_threads) {
  auto body = [&](int64_t t, float* cs) {
    rope_cos_sin(p, pos[t], cs);
    rope_apply(p, cs, x + t * row_stride, n_heads);
  };
  if (n_tokens >= 8 && n_threads > 1) {
#pragma omp parallel num_threads(n_threads)
    {
      std::vector<float> cs(static_cast<size_t>(p.n_rot));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < n_tokens; ++t) body(t, cs.data());
    }
  } else {
    float cs[1024];
    std::vector<float> big;
    float* c = cs;
    if (p.n_rot > 1024) {
      big.resize(static_cast<size_t>(p.n_rot));
      c = big.data();
    }
    for (int64_t t = 0; t < n_tokens; ++t) body(t, c);
  }
}

}  // namespace snapkv
