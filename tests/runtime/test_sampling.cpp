#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "snapkv/error.h"
#include "snapkv/sampling.h"

namespace snapkv {

TEST(Sampling, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s({.temp = 0.0f, .top_k = 40, .top_p = 0.95f, .seed = 1});
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l), 1);
  EXPECT_EQ(argmax(l), 1);
}

TEST(Sampling, TopKOneIsGreedy) {
  Sampler s({.temp = 1.5f, .top_k = 1, .top_p = 1.0f, .seed = 7});
  std::vector<float> l = {0.1f, 0.3f, 3.0f, 0.2f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l), 2);
}

TEST(Sampling, TopPKeepsOnlyTheNucleus) {
  // p(0) ~ 0.84 at temp 1: with top_p 0.5 only token 0 survives.
  Sampler s({.temp = 1.0f, .top_k = 0, .top_p = 0.5f, .seed = 3});
  std::vector<float> l = {3.0f, 1.0f, 0.5f, 0.0f};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l), 0);
}

TEST(Sampling, SeededDrawsAreReproducibleAndFollowTheDistribution) {
  std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4 at temp 1
  Sampler a({.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  Sampler b({.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t x = a.sample(l);
    EXPECT_EQ(x, b.sample(l));
    ones += x;
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.015);
}

TEST(Sampling, BadSettingsThrow) {
  EXPECT_THROW(Sampler({.temp = 1.0f, .top_k = 40, .top_p = 0.0f, .seed = 0}), Error);
  Sampler s({});
  EXPECT_THROW(s.sample({}), Error);
}

// Logits from a C caller may hold anything: NaN must be refused (it breaks the ordering the
// partial sort needs and made the draw's range NaN: std::uniform_real_distribution(0, NaN) is
// undefined), and -inf (a masked token) must never be drawn while a finite logit exists.
TEST(Sampling, NonFiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const float temp : {0.0f, 0.8f}) {
    Sampler s({.temp = temp, .top_k = 0, .top_p = 0.9f, .seed = 5});
    EXPECT_THROW(s.sample(std::vector<float>{nan, 1.0f, 2.0f}), Error) << temp;
    EXPECT_THROW(s.sample(std::vector<float>{1.0f, 2.0f, nan}), Error) << temp;
    EXPECT_THROW(s.sample(std::vector<float>{-inf, -inf}), Error) << temp;  // nothing can be drawn
    EXPECT_THROW(s.sample(std::vector<float>{0.0f, inf}), Error) << temp;
    for (int i = 0; i < 200; ++i) {
      const int32_t t = s.sample(std::vector<float>{-inf, 0.5f, -inf, 0.25f});
      EXPECT_TRUE(t == 1 || t == 3) << t;
    }
  }
  // Extreme but finite settings still draw a valid id.
  Sampler hot({.temp = inf, .top_k = 0, .top_p = 1.0f, .seed = 1});
  Sampler cold({.temp = 1e-38f, .top_k = 0, .top_p = 1.0f, .seed = 1});
  for (int i = 0; i < 50; ++i) {
    const int32_t t = hot.sample(std::vector<float>{-inf, 0.5f, 2.0f});
    EXPECT_TRUE(t == 1 || t == 2) << t;
    EXPECT_EQ(cold.sample(std::vector<float>{0.5f, 2.0f, -inf}), 1);
  }
}

}  // namespace snapkv
