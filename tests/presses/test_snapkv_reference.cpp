// SnapKV scoring and selection against an explicit double-precision reference (logits, softmax,
// window sum, GQA mean/max/sum, max/avg pooling, top-k) on random queries and f32/f16 keys.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/presses/scoring.h"
#include "kv/presses/vec_math.h"
#include "press_test_util.h"

namespace snapkv::test {
namespace {

struct Case {
  int64_t L;
  int n_head, n_head_kv, d, W;
  int64_t C;
  int K;
  PoolType pool;
  GQAAgg agg;
  bool f16;
  float q_std;
};

std::string describe(const Case& c) {
  return fmt::format("L={} H={}/{} d={} W={} C={} K={} pool={} agg={} {} q_std={}", c.L, c.n_head, c.n_head_kv, c.d,
                     c.W, c.C, c.K, c.pool == PoolType::Max ? "max" : "avg", static_cast<int>(c.agg),
                     c.f16 ? "f16" : "f32", c.q_std);
}

const Case kCases[] = {
    {300, 8, 2, 64, 32, 100, 7, PoolType::Max, GQAAgg::Mean, false, 1.0f},
    {300, 8, 2, 64, 32, 100, 7, PoolType::Avg, GQAAgg::Mean, true, 1.0f},
    {517, 9, 3, 64, 17, 200, 5, PoolType::Avg, GQAAgg::Max, true, 1.0f},
    {517, 9, 3, 64, 17, 200, 5, PoolType::Max, GQAAgg::Sum, false, 1.0f},
    {65, 4, 1, 32, 7, 64, 1, PoolType::Max, GQAAgg::Sum, false, 1.0f},     // L just above C
    {129, 4, 1, 48, 9, 128, 7, PoolType::Avg, GQAAgg::Mean, true, 1.0f},   // L = C + 1, chunk edge
    {700, 8, 2, 64, 31, 256, 7, PoolType::Avg, GQAAgg::Mean, true, 3.0f},  // peaky attention
    {700, 8, 2, 64, 31, 256, 7, PoolType::Max, GQAAgg::Max, false, 3.0f},
    {12, 2, 2, 16, 7, 9, 7, PoolType::Max, GQAAgg::Mean, false, 1.0f},  // prefix of 5 < kernel
    {12, 2, 2, 16, 7, 9, 7, PoolType::Avg, GQAAgg::Mean, false, 1.0f},
    {40, 6, 3, 8, 1, 20, 3, PoolType::Avg, GQAAgg::Sum, true, 2.0f},       // W = 1
    {200, 3, 3, 64, 33, 150, 5, PoolType::Max, GQAAgg::Mean, true, 1.0f},  // MHA, odd W
};

constexpr double kRelTol = 1e-5;

TEST(SnapKVReference, WindowScoresPerQueryHeadMatchDoubleReference) {
  for (const Case& c : kCases) {
    const Layer l = Layer::random(c.L, c.n_head, c.n_head_kv, c.d, c.W, c.f16, 11 + c.L, c.q_std);
    const PressInput in = l.input();
    const auto got = press_detail::window_attention_scores(in, 0);
    const DScores ref = ref_window_scores(l, 0);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t h = 0; h < ref.size(); ++h) {
      ASSERT_EQ(got[h].size(), ref[h].size());
      double total = 0.0;
      for (size_t j = 0; j < ref[h].size(); ++j) {
        ASSERT_NEAR(got[h][j], ref[h][j], kRelTol * std::abs(ref[h][j]) + 1e-30)
            << describe(c) << " head " << h << " pos " << j;
        total += ref[h][j];
      }
      EXPECT_LE(total, c.W + 1e-9);  // probability mass of the prefix only
      EXPECT_GT(total, 0.0);
    }
  }
}

TEST(SnapKVReference, PooledScoresAndSelectionMatchDoubleReference) {
  int exact = 0, near_ties = 0;
  for (const Case& c : kCases) {
    const Layer l = Layer::random(c.L, c.n_head, c.n_head_kv, c.d, c.W, c.f16, 11 + c.L, c.q_std);
    PressConfig cfg;
    cfg.name = "snapkv";
    cfg.budget = c.C;
    cfg.window = c.W;
    cfg.kernel = c.K;
    cfg.pool = c.pool;
    cfg.gqa_agg = c.agg;
    const PressInput in = l.input();
    const auto pooled = press_detail::snapkv_scores(in, c.K, c.pool, c.agg);
    const DScores ref_q = ref_window_scores(l, 0);
    const DScores ref_kv = ref_gqa(ref_q, c.n_head_kv, c.agg);
    const auto press = make_press(cfg);
    const PressResult res = press->compress(in, c.C);
    expect_well_formed(res, c.n_head_kv, c.L, range(c.L - c.W, c.L), describe(c));
    for (int kv = 0; kv < c.n_head_kv; ++kv) {
      const std::vector<double> ref = ref_pool(ref_kv[kv], c.K, c.pool);
      ASSERT_EQ(pooled[kv].size(), ref.size());
      for (size_t j = 0; j < ref.size(); ++j)
        ASSERT_NEAR(pooled[kv][j], ref[j], kRelTol * std::abs(ref[j]) + 1e-30)
            << describe(c) << " kv " << kv << " pos " << j;
      ASSERT_EQ(static_cast<int64_t>(res.kept[kv].size()), c.C) << describe(c);
      const std::vector<int32_t> picks(res.kept[kv].begin(), res.kept[kv].end() - c.W);
      for (size_t i = 0; i < picks.size(); ++i) {
        ASSERT_LT(picks[i], c.L - c.W);
        EXPECT_EQ(res.scores[kv][i], pooled[kv][static_cast<size_t>(picks[i])]);  // the ranking score
      }
      expect_selection_matches(picks, ref, c.C - c.W, kRelTol, describe(c) + fmt::format(" kv {}", kv));
      (picks == ref_top_k(ref, c.C - c.W) ? exact : near_ties)++;
    }
  }
  // Most heads must match exactly (near ties are rare on random data).
  EXPECT_GE(exact, 20) << "exact " << exact << ", near ties " << near_ties;
}

// The helper that splits the rows into blocks under a memory cap gives the same sums as one block.
TEST(SnapKVReference, ColumnSumsIndependentOfRowBlocking) {
  const Layer l = Layer::random(300, 2, 1, 32, 40, true, 5);
  const PressInput in = l.input();
  std::vector<float> a(300, 0.0f), b(300, 0.0f);
  press_detail::attention_column_sums(l.query(1, 0), 300, 0, in.keys[0], l.scale, a.data(), 300);
  press_detail::attention_column_sums(l.query(1, 0), 300, 0, in.keys[0], l.scale, b.data(), 300, 500);
  DScores ref(1, std::vector<double>(300, 0.0));
  for (int64_t i = 0; i < 300; ++i) {
    const auto p = ref_softmax_row(l, l.query(1, i), 0, i);
    for (int64_t j = 0; j <= i; ++j) ref[0][j] += p[j];
  }
  for (int j = 0; j < 300; ++j) {
    EXPECT_NEAR(a[j], ref[0][j], 1e-5 * ref[0][j]) << j;
    EXPECT_NEAR(b[j], ref[0][j], 1e-5 * ref[0][j]) << j;
  }
}

TEST(SnapKVReference, ExpApproximationAccuracy) {
  double worst = 0.0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -static_cast<float>(i) * 1e-4f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(press_detail::exp_neg(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(press_detail::exp_neg(0.0f), 1.0f);
  EXPECT_EQ(press_detail::exp_neg(-88.0f), 0.0f);
  EXPECT_EQ(press_detail::exp_neg(-std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace snapkv::test
