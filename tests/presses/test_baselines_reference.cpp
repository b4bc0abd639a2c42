// TOVA, H2O and knorm scores/selections against explicit double-precision references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/presses/scoring.h"
#include "press_test_util.h"

namespace snapkv::test {
namespace {

PressConfig config(const std::string& name, int64_t budget, int window, GQAAgg agg) {
  PressConfig cfg;
  cfg.name = name;
  cfg.budget = budget;
  cfg.window = window;
  cfg.gqa_agg = agg;
  return cfg;
}

/// Prefix picks of one head (kept minus the window).
std::vector<int32_t> picks(const PressResult& r, int kv, int W) {
  return std::vector<int32_t>(r.kept[kv].begin(), r.kept[kv].end() - W);
}

TEST(BaselinesReference, TOVAUsesTheLastQueryOnly) {
  for (const auto& [H, Hkv, agg, f16] : {std::tuple{8, 2, GQAAgg::Mean, false}, std::tuple{9, 3, GQAAgg::Max, true},
                                         std::tuple{4, 1, GQAAgg::Sum, true}}) {
    const int W = 13;
    const int64_t L = 333, C = 100;
    const Layer l = Layer::random(L, H, Hkv, 32, W, f16, 17 + H, 2.0f);
    const PressInput in = l.input();
    const auto got_q = press_detail::window_attention_scores(in, W - 1);
    const DScores ref_q = ref_window_scores(l, W - 1);
    for (int h = 0; h < H; ++h)
      for (int64_t j = 0; j < L - W; ++j) ASSERT_NEAR(got_q[h][j], ref_q[h][j], 1e-5 * ref_q[h][j]) << h << " " << j;
    const DScores ref = ref_gqa(ref_q, Hkv, agg);
    const PressResult r = make_press(config("tova", C, W, agg))->compress(in, C);
    expect_well_formed(r, Hkv, L, range(L - W, L), "tova");
    for (int kv = 0; kv < Hkv; ++kv) expect_selection_matches(picks(r, kv, W), ref[kv], C - W, 1e-5, "tova");
  }
}

TEST(BaselinesReference, H2OAccumulatedAttentionNormalisedByQueryCount) {
  // L = 600 spans three 256-query row blocks and several 64-key chunks.
  for (const auto& [H, Hkv, agg, f16] : {std::tuple{4, 2, GQAAgg::Mean, false}, std::tuple{3, 1, GQAAgg::Max, true}}) {
    const int W = 10;
    const int64_t L = 600, C = 150;
    const Layer l = Layer::random(L, H, Hkv, 16, W, f16, 29 + H, 1.5f);
    const DScores ref_q = ref_h2o_scores(l);
    DScores ref_prefix(ref_q.size());
    for (size_t h = 0; h < ref_q.size(); ++h) ref_prefix[h].assign(ref_q[h].begin(), ref_q[h].end() - W);
    const DScores ref = ref_gqa(ref_prefix, Hkv, agg);
    const auto press = make_press(config("h2o", C, W, agg));
    ASSERT_TRUE(press->needs_all_queries());
    const PressResult r = press->compress(l.input(), C);
    expect_well_formed(r, Hkv, L, range(L - W, L), "h2o");
    for (int kv = 0; kv < Hkv; ++kv) {
      const auto p = picks(r, kv, W);
      expect_selection_matches(p, ref[kv], C - W, 1e-5, fmt::format("h2o kv {}", kv));
      for (size_t i = 0; i < p.size(); ++i)  // reported scores are the normalised sums
        EXPECT_NEAR(r.scores[kv][i], ref[kv][p[i]], 1e-5 * ref[kv][p[i]]);
    }
  }
}

TEST(BaselinesReference, KNormKeepsSmallestKeys) {
  const int W = 5;
  const int64_t L = 120, C = 40;
  for (bool f16 : {false, true}) {
    const Layer l = Layer::random(L, 4, 2, 24, W, f16, 4);
    const PressResult r = make_press(config("knorm", C, W, GQAAgg::Mean))->compress(l.input(), C);
    expect_well_formed(r, 2, L, range(L - W, L), "knorm");
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<double> neg_norm(static_cast<size_t>(L - W));
      for (int64_t j = 0; j < L - W; ++j) {
        double ss = 0.0;
        for (int i = 0; i < 24; ++i) ss += static_cast<double>(l.key(kv, j)[i]) * l.key(kv, j)[i];
        neg_norm[j] = -std::sqrt(ss);
      }
      expect_selection_matches(picks(r, kv, W), neg_norm, C - W, 1e-6, "knorm");
    }
  }
}

}  // namespace
}  // namespace snapkv::test
