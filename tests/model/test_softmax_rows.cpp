// Row helpers of the prefill softmax (src/attention/softmax_simd.h): the vectorised exp against
// std::exp in double, independence from a value's place in a row (vector body or padded tail),
// the mask fast path against the plain formula, and F16-rounded probabilities.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/softmax_simd.h"
#include "core/fp16.h"

namespace snapkv::attn {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SoftmaxRows, ExpMatchesStdExpToTwoUlp) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 80.0f; v += 0.0371f) x.push_back(v);
  for (const float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 0.6931472f, -0.6931472f, -87.3f, 88.0f})
    x.push_back(v);
  std::vector<float> e(x.size());
  const double sum = exp_sum_row(x.data(), static_cast<int>(x.size()), 0.0f, e.data());
  double ref_sum = 0.0, worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    ref_sum += static_cast<double>(e[i]);
    worst = std::max(worst, std::fabs(e[i] - ref) / ref);
  }
  EXPECT_LT(worst, 2.4e-7);  // 2 ulp of f32
  EXPECT_NEAR(sum, ref_sum, 1e-12 * ref_sum);
}

// Arguments below kExpMinArg (results that would be subnormal) and -inf give exactly 0.
TEST(SoftmaxRows, ExpOfMaskedAndTinyIsZero) {
  const std::vector<float> x = {-kInf, -200.0f, -88.0f, -kInf, -1000.0f, -87.5f, -kInf, -kInf, -kInf};
  std::vector<float> e(x.size(), 1.0f);
  EXPECT_EQ(exp_sum_row(x.data(), static_cast<int>(x.size()), 0.0f, e.data()), 0.0);
  for (const float v : e) EXPECT_EQ(v, 0.0f);
}

// A NaN score (from a bad Q or K) stays NaN instead of turning into a probability.
TEST(SoftmaxRows, ExpPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.0f, nan, -1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f, nan, -1.0f};
  std::vector<float> e(x.size());
  EXPECT_TRUE(std::isnan(exp_sum_row(x.data(), static_cast<int>(x.size()), 0.0f, e.data())));
  EXPECT_TRUE(std::isnan(e[1]));
  EXPECT_TRUE(std::isnan(e[8]));
  EXPECT_EQ(e[0], 1.0f);
}

TEST(SoftmaxRows, ValueDoesNotDependOnPlaceInRow) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-30.0f, 0.0f);
  std::vector<float> x(67);
  for (auto& v : x) v = d(rng);
  std::vector<float> full(x.size());
  exp_sum_row(x.data(), static_cast<int>(x.size()), 0.0f, full.data());
  // Every prefix length puts the last elements in the padded tail: the values must not change.
  for (int n = 1; n <= static_cast<int>(x.size()); ++n) {
    std::vector<float> part(static_cast<size_t>(n));
    exp_sum_row(x.data(), n, 0.0f, part.data());
    for (int j = 0; j < n; ++j) ASSERT_EQ(part[static_cast<size_t>(j)], full[static_cast<size_t>(j)]) << n << " " << j;
    std::vector<float> p16(static_cast<size_t>(n)), f16(x.size());
    softmax_f16_row(x.data(), n, -1.0f, 0.25f, p16.data());
    softmax_f16_row(x.data(), static_cast<int>(x.size()), -1.0f, 0.25f, f16.data());
    for (int j = 0; j < n; ++j) ASSERT_EQ(p16[static_cast<size_t>(j)], f16[static_cast<size_t>(j)]) << n << " " << j;
  }
}

TEST(SoftmaxRows, F16ProbabilitiesAreRoundedNormalizedExp) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-12.0f, 0.0f);
  std::vector<float> s(45);
  for (auto& v : s) v = d(rng);
  s[7] = -kInf;
  const float m = -0.5f, inv = 0.37f;
  std::vector<float> p(s.size());
  softmax_f16_row(s.data(), static_cast<int>(s.size()), m, inv, p.data());
  for (size_t j = 0; j < s.size(); ++j) {
    if (j == 7) {
      EXPECT_EQ(p[j], 0.0f);
      continue;
    }
    const double ref = std::exp(static_cast<double>(s[j]) - m) * inv;
    EXPECT_EQ(p[j], fp16_to_fp32(fp32_to_fp16(p[j]))) << "not an F16 value";
    EXPECT_NEAR(p[j], ref, ref * 1.0 / 1024.0 + 1e-7) << j;  // within F16 rounding (2^-11 relative, x2)
  }
}

TEST(SoftmaxRows, MaskFastPathEqualsFormula) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  const float scale = 0.125f;
  std::vector<int32_t> pos(64);
  for (int j = 0; j < 64; ++j) pos[static_cast<size_t>(j)] = 100 + 2 * j;  // 100 .. 226, ascending
  for (const int window : {0, 20, 200}) {
    for (const int64_t qp : {int64_t{90}, int64_t{150}, int64_t{226}, int64_t{400}}) {
      std::vector<float> s(64);
      for (auto& v : s) v = d(rng);
      const std::vector<float> raw = s;
      mask_scale_row(s.data(), 64, pos.data(), qp, window, scale);
      for (size_t j = 0; j < 64; ++j) {
        const int64_t kp = pos[j];
        const bool masked = kp > qp || (window > 0 && qp - kp >= window);
        if (masked)
          EXPECT_EQ(s[j], -kInf) << window << " " << qp << " " << j;
        else
          EXPECT_EQ(s[j], scale * raw[j]) << window << " " << qp << " " << j;
      }
    }
  }
  EXPECT_EQ(row_max(std::vector<float>(13, -kInf).data(), 13), -kInf);
  const std::vector<float> r = {1, 5, -2, 9.5f, 3, 0, 0, 1, 2, 9.25f, 4};
  EXPECT_EQ(row_max(r.data(), static_cast<int>(r.size())), 9.5f);
}

}  // namespace
}  // namespace snapkv::attn
