#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/logit_scan.h"

namespace snapkv {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

int64_t argmax_reference(const std::vector<float>& x) {
  int64_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  return best;
}

int64_t bad_reference(const std::vector<float>& x, bool* any_finite) {
  bool fin = false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || x[i] == kInf) return static_cast<int64_t>(i);
    fin = fin || x[i] != -kInf;
  }
  *any_finite = fin;
  return -1;
}

/// Rows drawn from few distinct values (many ties), with -inf, NaN and +inf sprinkled in at the
/// given rates, at every length from 1 to 80 and a few long ones (vector bodies and tails).
std::vector<std::vector<float>> rows(double p_neg_inf, double p_nan, double p_pos_inf, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> val(-3, 3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<float>> out;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 80; ++n) lengths.push_back(n);
  for (int64_t n : {255, 256, 257, 4099, 49152, 262144}) lengths.push_back(n);
  for (int64_t n : lengths) {
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) {
        const double r = u(rng);
        v = r < p_neg_inf           ? -kInf
            : r < p_neg_inf + p_nan ? kNaN
            : r < p_neg_inf + p_nan + p_pos_inf
                ? kInf
                : static_cast<float>(val(rng)) * (u(rng) < 0.5 ? 1.0f : -1.0f) + (val(rng) == 0 ? -0.0f : 0.0f);
      }
      out.push_back(std::move(x));
    }
  }
  return out;
}

TEST(LogitScan, FirstMaxIndexEqualsTheSequentialScan) {
  for (const auto& [ni, nan, pi] :
       {std::tuple{0.0, 0.0, 0.0}, std::tuple{0.3, 0.0, 0.0}, std::tuple{0.2, 0.1, 0.0}, std::tuple{0.0, 0.05, 0.01},
        std::tuple{0.97, 0.02, 0.0}, std::tuple{1.0, 0.0, 0.0}}) {
    for (const auto& x : rows(ni, nan, pi, 7)) {
      ASSERT_EQ(first_max_index(x.data(), static_cast<int64_t>(x.size())), argmax_reference(x))
          << "n " << x.size() << " rates " << ni << "/" << nan << "/" << pi;
    }
  }
}

TEST(LogitScan, FirstMaxIndexCases) {
  std::vector<float> x(100, 1.0f);
  EXPECT_EQ(first_max_index(x.data(), 100), 0);  // all equal: the first
  x[37] = 2.0f;
  x[93] = 2.0f;
  EXPECT_EQ(first_max_index(x.data(), 100), 37);  // ties across lanes: the lowest index
  x[99] = 3.0f;
  EXPECT_EQ(first_max_index(x.data(), 100), 99);  // in the scalar tail
  x[0] = kNaN;
  EXPECT_EQ(first_max_index(x.data(), 100), 0);  // a leading NaN is never beaten
  x[0] = 1.0f;
  x[50] = kNaN;
  EXPECT_EQ(first_max_index(x.data(), 100), 99);  // a NaN elsewhere never wins
  std::vector<float> ninf(40, -kInf);
  EXPECT_EQ(first_max_index(ninf.data(), 40), 0);
  ninf[33] = -1e30f;
  EXPECT_EQ(first_max_index(ninf.data(), 40), 33);
}

TEST(LogitScan, FirstNanOrPosInfEqualsTheSequentialScan) {
  for (const auto& [ni, nan, pi] :
       {std::tuple{0.0, 0.0, 0.0}, std::tuple{0.5, 0.0, 0.0}, std::tuple{0.99, 0.0, 0.0}, std::tuple{1.0, 0.0, 0.0},
        std::tuple{0.0, 0.001, 0.0}, std::tuple{0.0, 0.0, 0.001}}) {
    for (const auto& x : rows(ni, nan, pi, 11)) {
      bool fin_ref = false, fin = false;
      const int64_t want = bad_reference(x, &fin_ref);
      ASSERT_EQ(first_nan_or_pos_inf(x.data(), static_cast<int64_t>(x.size()), &fin), want) << "n " << x.size();
      if (want < 0) {
        ASSERT_EQ(fin, fin_ref) << "n " << x.size();
      }
    }
  }
  bool fin = true;
  EXPECT_EQ(first_nan_or_pos_inf(nullptr, 0, &fin), -1);
  EXPECT_FALSE(fin);
}

}  // namespace
}  // namespace snapkv
