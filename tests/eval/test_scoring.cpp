// Scorers, fidelity metrics and the RNG against hand-made cases.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "eval/fidelity.h"
#include "eval/rng.h"
#include "eval/score.h"
#include "snapkv/error.h"

namespace snapkv::eval {
namespace {

TEST(Score, StringMatchAll) {
  EXPECT_DOUBLE_EQ(string_match_all(" 1234567.", {"1234567"}), 1.0);
  EXPECT_DOUBLE_EQ(string_match_all("The number is 123456", {"1234567"}), 0.0);  // partial value
  EXPECT_DOUBLE_EQ(string_match_all("1111111 and 3333333", {"1111111", "2222222", "3333333", "4444444"}), 0.5);
  EXPECT_DOUBLE_EQ(string_match_all("VAR ABCDE, var fghij", {"ABCDE", "FGHIJ", "KLMNO"}), 2.0 / 3.0);  // case
  EXPECT_DOUBLE_EQ(string_match_all("anything", {}), 0.0);
  EXPECT_DOUBLE_EQ(string_match_all("", {"x"}), 0.0);
  EXPECT_DOUBLE_EQ(string_match_part("b c", {"a", "c"}), 1.0);
  EXPECT_DOUBLE_EQ(string_match_part("b", {"a", "c"}), 0.0);
}

TEST(Score, PostprocessPred) {
  EXPECT_EQ(postprocess_pred("  12\t34\x01 \n"), "12\n34");
  EXPECT_EQ(postprocess_pred("\n\n"), "");
  EXPECT_EQ(postprocess_pred("a b"), "a b");
  EXPECT_EQ(count_occurrences("aaaa", "aa"), 2u);
  EXPECT_EQ(count_occurrences("abc", ""), 0u);
  EXPECT_EQ(count_occurrences("x1y1", "1"), 2u);
}

TEST(Fidelity, HandComputedDistributions) {
  FidelityAccum same;
  const std::vector<float> a = {1.0f, 2.0f, -1.0f};
  same.add(a, a, 1);
  auto s = same.stats();
  EXPECT_EQ(s.n, 1);
  EXPECT_NEAR(s.kl, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.top1, 1.0);
  EXPECT_DOUBLE_EQ(s.ppl, s.ppl_full);

  // p = (1/2, 1/2), q = (3/4, 1/4): KL = 1/2 ln(4/3); target 1: ppl 2 vs 4.
  FidelityAccum f;
  const std::vector<float> p = {0.0f, 0.0f};
  const std::vector<float> q = {static_cast<float>(std::log(3.0)), 0.0f};
  f.add(p, q, 1);
  s = f.stats();
  EXPECT_NEAR(s.kl, 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_DOUBLE_EQ(s.top1, 1.0);  // ties go to the lowest id: both pick 0
  EXPECT_NEAR(s.ppl_full, 2.0, 1e-9);
  EXPECT_NEAR(s.ppl, 4.0, 1e-6);
  // A second position where the argmax differs: top-1 1/2, ppl the geometric mean.
  f.add(std::vector<float>{0.0f, 1.0f}, std::vector<float>{1.0f, 0.0f}, 0);
  s = f.stats();
  EXPECT_DOUBLE_EQ(s.top1, 0.5);
  EXPECT_EQ(s.n, 2);
  const double nll_full = std::log(2.0) + std::log(1.0 + std::exp(1.0));
  EXPECT_NEAR(s.ppl_full, std::exp(nll_full / 2), 1e-6);
  EXPECT_THROW(f.add(p, std::vector<float>{0.0f}, 0), Error);
  EXPECT_THROW(f.add(p, q, 2), Error);
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(42), b(42), c(43);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 8; ++i) va.push_back(a.next()), vb.push_back(b.next()), vc.push_back(c.next());
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  Rng r(1);
  std::vector<int> hist(7);
  for (int i = 0; i < 70000; ++i) {
    const auto x = r.range(3, 9);
    ASSERT_GE(x, 3);
    ASSERT_LE(x, 9);
    ++hist[static_cast<size_t>(x - 3)];
  }
  for (int h : hist) EXPECT_NEAR(h, 10000, 500);
  const auto s = r.sample(10, 10);
  EXPECT_EQ(std::set<size_t>(s.begin(), s.end()).size(), 10u);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_EQ(derive_seed(5, "a"), derive_seed(5, "a"));
  EXPECT_NE(derive_seed(5, "a"), derive_seed(5, "b"));
  EXPECT_NE(derive_seed(5, "a"), derive_seed(6, "a"));
}

}  // namespace
}  // namespace snapkv::eval
