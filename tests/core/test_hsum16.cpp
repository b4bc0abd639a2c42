// core/hsum16.h: the tree gives, lane by lane, exactly the one-register sum, and that sum adds in
// the documented order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/hsum16.h"

namespace snapkv {
namespace {

#if defined(__AVX512F__)
/// ((x0 + x4) + (x1 + x5)) + ((x2 + x6) + (x3 + x7)) with x_k = v[k] + v[k + 8], in scalar code.
float ordered_sum(const float* v) {
  float x[8];
  for (int k = 0; k < 8; ++k) x[k] = v[k] + v[k + 8];
  return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(Hsum16, TreeEqualsOneRegisterSumsInTheDocumentedOrder) {
  std::mt19937 rng(11);
  // Magnitudes spread over 2^-20 .. 2^20 with both signs: rounding differs between orders.
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  for (int round = 0; round < 500; ++round) {
    alignas(64) float v[16][16];
    for (auto& row : v)
      for (float& x : row) x = std::ldexp(mant(rng), expo(rng));
    __m512 a[16];
    for (int i = 0; i < 16; ++i) a[i] = _mm512_load_ps(v[i]);
    alignas(64) float tree[16];
    _mm512_store_ps(tree, hsum16(a));
    for (int i = 0; i < 16; ++i) {
      const float one = hsum16_one(a[i]);
      ASSERT_TRUE(same_bits(tree[i], one)) << "lane " << i << ": " << tree[i] << " vs " << one;
      ASSERT_TRUE(same_bits(one, ordered_sum(v[i]))) << "lane " << i;
    }
  }
}

TEST(Hsum16, SpecialValues) {
  alignas(64) float v[16][16] = {};
  v[0][3] = std::numeric_limits<float>::infinity();
  v[1][0] = std::numeric_limits<float>::quiet_NaN();
  v[2][15] = -0.0f;
  for (float& x : v[2]) x = -0.0f;  // all -0: the sum is -0
  v[3][0] = 3e38f;
  v[3][8] = 3e38f;  // overflows to inf in the first add
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_load_ps(v[i]);
  alignas(64) float tree[16];
  _mm512_store_ps(tree, hsum16(a));
  EXPECT_EQ(tree[0], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(tree[1]));
  EXPECT_TRUE(same_bits(tree[2], -0.0f));
  EXPECT_EQ(tree[3], std::numeric_limits<float>::infinity());
  for (int i = 4; i < 16; ++i) EXPECT_TRUE(same_bits(tree[i], 0.0f)) << i;
}
#else
TEST(Hsum16, NeedsAvx512) { GTEST_SKIP() << "built without AVX-512"; }
#endif

}  // namespace
}  // namespace snapkv
