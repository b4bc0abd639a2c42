// RoPE, RMSNorm and the FFN activations vs straightforward double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "model/activation.h"
#include "model/norm.h"
#include "model/rope.h"
#include "test_util.h"

namespace snapkv {
namespace {

using test::randn;

// RoFormer eq. 34 in double: theta_i = pos * freq_scale * base^(-2i/n_rot) / ff_i.
std::vector<double> rope_ref(const RopeParams& p, int32_t pos, const std::vector<float>& x, int n_heads) {
  std::vector<double> y(x.begin(), x.end());
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    const size_t o = static_cast<size_t>(h) * p.head_dim;
    for (int i = 0; i < half; ++i) {
      double th = pos * static_cast<double>(p.freq_scale) * std::pow(static_cast<double>(p.base), -2.0 * i / p.n_rot);
      if (p.freq_factors) th /= p.freq_factors[i];
      const size_t a = o + (p.type == RopeType::Normal ? 2 * i : i);
      const size_t b = o + (p.type == RopeType::Normal ? 2 * i + 1 : i + half);
      y[a] = x[a] * std::cos(th) - x[b] * std::sin(th);
      y[b] = x[a] * std::sin(th) + x[b] * std::cos(th);
    }
  }
  return y;
}

TEST(Rope, MatchesFormulaNormalAndNeoX) {
  const std::vector<float> factors{1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 1.0f, 3.0f, 1.25f};
  for (const RopeType type : {RopeType::Normal, RopeType::NeoX}) {
    for (const int n_rot : {16, 12}) {  // 12 < head_dim: the last 4 dims pass through
      RopeParams p;
      p.type = type;
      p.n_rot = n_rot;
      p.head_dim = 16;
      p.base = 10000.0f;
      for (const bool ff : {false, true}) {
        p.freq_factors = ff ? factors.data() : nullptr;
        p.freq_scale = ff ? 0.25f : 1.0f;
        for (const int32_t pos : {0, 1, 7, 513, 4095}) {
          const auto x = randn(3 * 16, static_cast<uint64_t>(pos) + 3);
          auto y = x;
          std::vector<float> cs(static_cast<size_t>(n_rot));
          rope_cos_sin(p, pos, cs.data());
          rope_apply(p, cs.data(), y.data(), 3);
          const auto ref = rope_ref(p, pos, x, 3);
          // ggml accumulates theta in float (theta *= theta_scale): ~1e-4 rad at position 4095.
          for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 2e-3) << "pos " << pos << " i " << i;
          for (int h = 0; h < 3; ++h)
            for (int d = n_rot; d < 16; ++d)
              EXPECT_EQ(y[static_cast<size_t>(h * 16 + d)], x[static_cast<size_t>(h * 16 + d)]);
        }
      }
    }
  }
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  RopeParams p;
  p.type = RopeType::NeoX;
  p.n_rot = 64;
  p.head_dim = 64;
  p.base = 1e6f;
  const auto q = randn(64, 1), k = randn(64, 2);
  std::vector<int32_t> pos{3, 10, 200, 300};
  std::vector<float> cs(64);
  auto rot = [&](std::vector<float> v, int32_t at) {
    rope_cos_sin(p, at, cs.data());
    rope_apply(p, cs.data(), v.data(), 1);
    return v;
  };
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
  };
  const double d0 = dot(rot(q, 10), rot(k, 3));
  EXPECT_NEAR(dot(rot(q, 207), rot(k, 200)), d0, 1e-3);
  EXPECT_NEAR(dot(rot(q, 1007), rot(k, 1000)), d0, 1e-3);
  // Rotation preserves the norm.
  EXPECT_NEAR(dot(rot(q, 12345), rot(q, 12345)), dot(q, q), 1e-3);
}

TEST(Rope, RowsHelperEqualsPerToken) {
  RopeParams p;
  p.type = RopeType::Normal;
  p.n_rot = 8;
  p.head_dim = 8;
  const int n = 20, heads = 2, stride = 24;  // rows padded beyond heads*head_dim
  auto x = randn(static_cast<size_t>(n * stride), 9);
  auto y = x;
  std::vector<int32_t> pos(n);
  for (int t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = 100 + 3 * t;
  rope_rows(p, pos.data(), n, y.data(), stride, heads, 2);
  std::vector<float> cs(8);
  for (int t = 0; t < n; ++t) {
    std::vector<float> r(x.begin() + t * stride, x.begin() + t * stride + stride);
    rope_cos_sin(p, pos[static_cast<size_t>(t)], cs.data());
    rope_apply(p, cs.data(), r.data(), heads);
    for (int i = 0; i < stride; ++i) EXPECT_EQ(y[static_cast<size_t>(t * stride + i)], r[static_cast<size_t>(i)]);
  }
}

TEST(RmsNorm, MatchesFormula) {
  for (const int64_t n : {1, 7, 64, 640, 4099}) {
    const auto x = randn(static_cast<size_t>(n), static_cast<uint64_t>(n), 3.0f);
    const auto w = randn(static_cast<size_t>(n), static_cast<uint64_t>(n) + 1);
    std::vector<float> y(static_cast<size_t>(n));
    rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    double ss = 0;
    for (const float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      const double want = x[static_cast<size_t>(i)] * scale * w[static_cast<size_t>(i)];
      EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-5 * (1.0 + std::fabs(want)));
    }
  }
  // In place, without weight, and the eps term.
  std::vector<float> z{0.0f, 0.0f, 0.0f};
  rms_norm(z.data(), nullptr, z.data(), 3, 1e-5f);
  for (const float v : z) EXPECT_EQ(v, 0.0f);
  std::vector<float> c{2.0f, 2.0f};
  rms_norm(c.data(), nullptr, c.data(), 2, 0.0f);
  EXPECT_FLOAT_EQ(c[0], 1.0f);
}

TEST(RmsNorm, RowsHelperEqualsPerRow) {
  const int64_t n = 64, rows = 300;  // large enough for the parallel path
  const auto x = randn(static_cast<size_t>(n * rows), 5);
  const auto w = randn(static_cast<size_t>(n), 6);
  std::vector<float> y(x.size()), r(static_cast<size_t>(n));
  rms_norm_rows(x.data(), n, w.data(), y.data(), n, n, rows, 1e-5f, 2);
  for (int64_t i = 0; i < rows; ++i) {
    rms_norm(x.data() + i * n, w.data(), r.data(), n, 1e-5f);
    for (int64_t d = 0; d < n; ++d) EXPECT_EQ(y[static_cast<size_t>(i * n + d)], r[static_cast<size_t>(d)]);
  }
}

TEST(Activations, SwiGLUMatchesFormula) {
  auto a = randn(1000, 11, 4.0f);
  const auto a0 = a;
  const auto b = randn(1000, 12);
  swiglu_inplace(a.data(), b.data(), 1000, 2);
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a0[i];
    EXPECT_NEAR(a[i], x / (1.0 + std::exp(-x)) * b[i], 1e-5 * (1.0 + std::fabs(x * b[i])));
  }
}

// The vector exp (AVX-512 / AVX2) over the whole float range: within ~3 ulp of the exact SwiGLU, the
// saturated ends exact, NaN kept, and a value independent of its position and of n.
TEST(Activations, SwiGLUAccurateOverTheRangeAndPositionIndependent) {
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.0f, -89.0f, 104.0f, -104.0f}) x.push_back(v);
  const std::vector<float> one(x.size(), 1.0f);
  auto a = x;
  swiglu_inplace(a.data(), one.data(), static_cast<int64_t>(a.size()), 2);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double want = v / (1.0 + std::exp(-v));
    ASSERT_NEAR(a[i], want, 4e-7 * std::fabs(want) + 1e-35) << "x = " << v;  // below -88.7 exp(-x) overflows: -0
  }
  // Saturation: silu(x) = x for large x, -0 / tiny for very negative x.
  std::vector<float> e = {200.0f, -200.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  e.resize(32, 3.0f);
  const std::vector<float> ones(e.size(), 1.0f);
  swiglu_inplace(e.data(), ones.data(), static_cast<int64_t>(e.size()), 1);
  EXPECT_EQ(e[0], 200.0f);
  EXPECT_NEAR(e[1], 0.0f, 1e-35f);
  EXPECT_EQ(e[2], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(!std::isfinite(e[3]) || e[3] == 0.0f);  // -inf in, nothing finite and wrong out
  EXPECT_TRUE(std::isnan(e[4]));
  // Shifted by one element (other lanes, other tail): the same values.
  auto s = std::vector<float>(x.begin() + 1, x.begin() + 1001);
  swiglu_inplace(s.data(), one.data(), 1000, 1);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], a[i + 1]) << i;
  // A long row takes the threaded path (4096-element chunks): the same values as one thread.
  auto big = randn(70001, 14, 6.0f);
  const auto bb = randn(70001, 15);
  auto big1 = big;
  swiglu_inplace(big.data(), bb.data(), 70001, 2);
  swiglu_inplace(big1.data(), bb.data(), 70001, 1);
  EXPECT_EQ(big, big1);
}

TEST(Activations, GeGLUMatchesTanhGelu) {
  auto a = randn(5000, 13, 5.0f);
  a.push_back(-12.0f);  // saturated regions: exactly 0 and exactly x
  a.push_back(11.0f);
  a.push_back(0.0f);
  const auto a0 = a;
  const std::vector<float> b(a.size(), 1.5f);
  geglu_inplace(a.data(), b.data(), static_cast<int64_t>(a.size()), 2);
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a0[i];
    const double g = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    // F16 table: input and output rounded to F16 (relative 2^-11 each).
    EXPECT_NEAR(a[i], g * 1.5, 2e-3 * (std::fabs(x) + std::fabs(g)) * 1.5 + 1e-7) << "x = " << x;
    EXPECT_NEAR(gelu_tanh_ref(static_cast<float>(x)), g, 1e-6 * (1.0 + std::fabs(g)));
  }
  EXPECT_EQ(a[a.size() - 3], 0.0f);
  EXPECT_EQ(a[a.size() - 2], 11.0f * 1.5f);
  EXPECT_EQ(a[a.size() - 1], 0.0f);
}

}  // namespace
}  // namespace snapkv
