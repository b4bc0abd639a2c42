// Every registered press under every allocator, through the spec API: plan(), exact kept counts
// (uniform: C per head; ada: H * C per layer; pyramid: the layer budgets summing to n_layers * C),
// window and sinks always kept, ascending unique positions, determinism; and the selections
// against the previous implementations (bit for bit) and the double-precision references,
// including AdaKV / PyramidKV allocation over other scorers (knorm, tova).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/presses/scoring.h"
#include "press_test_util.h"
#include "snapkv/press_spec.h"

namespace snapkv::test {
namespace {

using press_detail::HeadScores;

PressSpec spec_of(const std::string& name, int64_t C, int W, int64_t S, const std::string& alloc) {
  PressSpec s{name, {}};
  s.set("budget", std::to_string(C));
  s.set("window", std::to_string(W));
  s.set("sinks", std::to_string(S));
  s.set("alloc", alloc);
  return s;
}

/// Sinks 0..S-1 and window L-W..L-1.
std::vector<int32_t> protected_positions(int64_t L, int W, int64_t S) {
  std::vector<int32_t> r = range(0, S);
  for (int32_t p : range(L - W, L)) r.push_back(p);
  return r;
}

TEST(PressRegistry, EveryPressEveryAllocatorKeepsTheDocumentedCounts) {
  struct Shape {
    int n_head, n_kv;
    bool f16, zeros;
  };
  const int W = 16, n_layers = 4;
  const int64_t L = 160;
  for (const Shape& sh :
       {Shape{8, 2, false, false}, Shape{4, 1, true, false}, Shape{3, 3, true, false}, Shape{4, 2, false, true}}) {
    const Layer l = sh.zeros ? Layer::zeros(L, sh.n_head, sh.n_kv, 16, W, sh.f16)
                             : Layer::random(L, sh.n_head, sh.n_kv, 32, W, sh.f16, 40 + sh.n_head, 2.0f);
    for (const std::string& name : press_names()) {
      if (name == "none") continue;
      for (const std::string alloc : {"uniform", "pyramid", "ada"}) {
        for (int64_t S : {int64_t{0}, int64_t{3}}) {
          for (int64_t C : {W + S, W + S + 5, int64_t{77}, L - 1}) {
            const auto press = make_press(spec_of(name, C, W, S, alloc));
            const std::string what = fmt::format("{} H={}/{}{}{}", press->spec().to_string(), sh.n_head, sh.n_kv,
                                                 sh.f16 ? " f16" : "", sh.zeros ? " zeros" : "");
            const Press::Plan plan = press->plan(L);
            ASSERT_TRUE(plan.compress) << what;
            ASSERT_EQ(plan.capacity, C) << what;
            ASSERT_EQ(press->window(), W);
            ASSERT_EQ(press->sinks(), S);
            const int64_t free_k = C - W - S;
            int64_t layers_total = 0, prev = INT64_MAX;
            for (int ci = 0; ci < n_layers; ++ci) {
              const PressInput in = l.input(ci, n_layers, ci);
              const PressResult r = press->compress(in, plan.capacity);
              expect_well_formed(r, sh.n_kv, L, protected_positions(L, W, S), what);
              int64_t total = 0;
              for (const auto& k : r.kept) total += static_cast<int64_t>(k.size());
              if (alloc == "uniform") {
                for (const auto& k : r.kept) EXPECT_EQ(static_cast<int64_t>(k.size()), C) << what;
              } else if (alloc == "ada") {
                EXPECT_EQ(total, sh.n_kv * C) << what << " layer " << ci;
                const auto safe = static_cast<int64_t>(std::floor(0.2 * static_cast<double>(free_k)));
                for (const auto& k : r.kept) EXPECT_GE(static_cast<int64_t>(k.size()), W + S + safe) << what;
              } else {
                const auto n = static_cast<int64_t>(r.kept[0].size());
                for (const auto& k : r.kept) EXPECT_EQ(static_cast<int64_t>(k.size()), n) << what;
                EXPECT_LE(n, prev) << what << ": pyramid budgets must not grow with depth";
                prev = n;
                layers_total += n;
              }
              if (ci == 0) {
                const PressResult again = make_press(press->spec())->compress(in, plan.capacity);
                EXPECT_EQ(again.kept, r.kept) << what << ": not deterministic";
                EXPECT_EQ(again.scores, r.scores) << what << ": not deterministic";
              }
            }
            if (alloc == "pyramid") {
              EXPECT_EQ(layers_total, n_layers * C) << what;
            }
          }
        }
      }
    }
  }
}

TEST(PressRegistry, BudgetAtLeastThePromptKeepsEverything) {
  const Layer l = Layer::random(40, 4, 2, 8, 4, false, 1);
  for (const std::string& name : press_names()) {
    for (int64_t C : {int64_t{40}, int64_t{41}, int64_t{1000}}) {
      const auto press = make_press(name == "none" ? PressSpec{} : spec_of(name, C, 4, 0, "ada"));
      const Press::Plan plan = press->plan(40);
      EXPECT_FALSE(plan.compress) << name;
      EXPECT_FALSE(plan.reason.empty()) << name;
      const PressResult r = press->compress(l.input(), name == "none" ? 40 : C);
      expect_well_formed(r, 2, 40, range(0, 40), name);
      for (const auto& k : r.kept) EXPECT_EQ(k.size(), 40u) << name;
    }
  }
}

// The spec API reproduces the previous implementations bit for bit: SnapKV = top C-W pooled
// prefix scores + window; PyramidKV = the same with the pyramid_budgets() of the layer; AdaKV =
// adaptive_top_k() over the pooled scores (kept positions and reported scores).
TEST(PressRegistry, SnapKVFamilyEqualsThePreviousImplementation) {
  const int W = 12, n_layers = 5;
  const int64_t L = 400, C = 70;
  for (bool f16 : {false, true}) {
    const Layer l = Layer::random(L, 8, 2, 32, W, f16, 77, 1.5f);
    for (const auto& [K, pool, agg] :
         {std::tuple{7, PoolType::Max, GQAAgg::Mean}, std::tuple{5, PoolType::Avg, GQAAgg::Max},
          std::tuple{1, PoolType::Max, GQAAgg::Sum}}) {
      PressSpec base{"snapkv", {{"budget", std::to_string(C)}, {"window", std::to_string(W)}}};
      base.set("kernel", std::to_string(K));
      base.set("pool", pool == PoolType::Max ? "max" : "avg");
      base.set("gqa_agg", agg == GQAAgg::Mean ? "mean" : agg == GQAAgg::Max ? "max" : "sum");
      for (int ci = 0; ci < n_layers; ++ci) {
        const PressInput in = l.input(ci, n_layers, ci);
        const HeadScores pooled = press_detail::snapkv_scores(in, K, pool, agg);
        const auto old_result = [&](const std::vector<std::vector<int32_t>>& picks) {
          PressResult r;
          for (size_t h = 0; h < pooled.size(); ++h) {
            std::vector<int32_t> k = picks[h];
            std::vector<float> s;
            for (int32_t p : picks[h]) s.push_back(pooled[h][static_cast<size_t>(p)]);
            for (int32_t p : range(L - W, L)) {
              k.push_back(p);
              s.push_back(std::numeric_limits<float>::infinity());
            }
            r.kept.push_back(k);
            r.scores.push_back(s);
          }
          return r;
        };
        const auto top_each = [&](int64_t k) {
          std::vector<std::vector<int32_t>> picks;
          for (const auto& s : pooled) picks.push_back(press_detail::top_k_positions(s.data(), L - W, k));
          return picks;
        };
        const int64_t k_i = press_detail::pyramid_budgets(C - W, L - W, 20, n_layers)[static_cast<size_t>(ci)];
        const std::vector<std::pair<std::string, PressResult>> cases = {
            {"snapkv", old_result(top_each(C - W))},
            {"pyramidkv", old_result(top_each(k_i))},
            {"adakv", old_result(press_detail::adaptive_top_k(pooled, C - W, 0.2))}};
        for (const auto& [name, expect] : cases) {
          PressSpec s = base;
          s.name = name;
          const PressResult got = make_press(s)->compress(in, C);
          EXPECT_EQ(got.kept, expect.kept) << name << " layer " << ci;
          EXPECT_EQ(got.scores, expect.scores) << name << " layer " << ci;
          // The allocator key alone turns one into the other.
          PressSpec via_alloc = base;
          via_alloc.set("alloc", name == "snapkv" ? "uniform" : name == "pyramidkv" ? "pyramid" : "ada");
          EXPECT_EQ(make_press(via_alloc)->compress(in, C).kept, got.kept) << name;
        }
      }
    }
  }
}

/// Reference AdaKV allocation (Feng et al. 2024, Alg. 1) in double over candidates first..n-1:
/// per head its top floor(alpha k) (score desc, position asc), then the best H (k - safe) of the
/// rest of all heads (score desc, position asc, head asc). `margin` = the smallest relative gap
/// between the last chosen and the first rejected score at every cut, so that a float
/// implementation must choose the same when the margin exceeds its rounding error.
std::vector<std::vector<int32_t>> ref_ada(const DScores& s, int64_t first, int64_t k, double alpha, double* margin) {
  const size_t H = s.size();
  const auto n = static_cast<int64_t>(s[0].size());
  const auto safe = static_cast<int64_t>(std::floor(alpha * static_cast<double>(k)));
  const auto gap = [](double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300}); };
  *margin = 1.0;
  std::vector<std::vector<int32_t>> picks(H);
  std::vector<std::tuple<double, int32_t, int>> rest;
  for (size_t h = 0; h < H; ++h) {
    std::vector<int32_t> idx = range(first, n);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return s[h][a] > s[h][b]; });
    if (safe > 0 && safe < static_cast<int64_t>(idx.size()))
      *margin = std::min(*margin, gap(s[h][idx[safe - 1]], s[h][idx[safe]]));
    picks[h].assign(idx.begin(), idx.begin() + safe);
    for (size_t t = static_cast<size_t>(safe); t < idx.size(); ++t)
      rest.emplace_back(-s[h][idx[t]], idx[t], static_cast<int>(h));
  }
  std::sort(rest.begin(), rest.end());
  const auto want = static_cast<size_t>(static_cast<int64_t>(H) * (k - safe));
  if (want > 0 && want < rest.size())
    *margin = std::min(*margin, gap(std::get<0>(rest[want - 1]), std::get<0>(rest[want])));
  for (size_t t = 0; t < want; ++t) picks[static_cast<size_t>(std::get<2>(rest[t]))].push_back(std::get<1>(rest[t]));
  for (auto& p : picks) std::sort(p.begin(), p.end());
  return picks;
}

/// Prefix picks of a result: kept minus the S sinks and the W window positions.
std::vector<std::vector<int32_t>> prefix_picks(const PressResult& r, int64_t S, int W) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& k : r.kept) out.emplace_back(k.begin() + S, k.end() - W);
  return out;
}

// alloc=ada wraps any scorer: knorm (-||k||), tova (last query's attention) and SnapKV's pooled
// scores (adakv) allocated across the KV heads exactly like the double-precision reference.
TEST(PressRegistry, AdaOverKNormTOVAAndSnapKVEqualsTheReference) {
  const int W = 8;
  const int64_t L = 240, C = 48;
  int checked = 0;
  for (int64_t S : {int64_t{0}, int64_t{2}}) {
    for (uint64_t seed : {5u, 6u, 7u}) {
      const Layer l = Layer::random(L, 6, 3, 24, W, seed % 2 == 1, seed, 2.5f);
      // knorm scores in double: -||k_j||.
      DScores knorm(3, std::vector<double>(static_cast<size_t>(L - W)));
      for (int kv = 0; kv < 3; ++kv)
        for (int64_t j = 0; j < L - W; ++j) {
          double ss = 0.0;
          for (int i = 0; i < 24; ++i) ss += static_cast<double>(l.key(kv, j)[i]) * l.key(kv, j)[i];
          knorm[kv][j] = -std::sqrt(ss);
        }
      const DScores tova = ref_gqa(ref_window_scores(l, W - 1), 3, GQAAgg::Max);
      // SnapKV's pooled scores (avg pooling: max pooling repeats values, i.e. exact ties at the cuts).
      DScores snap = ref_gqa(ref_window_scores(l, 0), 3, GQAAgg::Mean);
      for (auto& v : snap) v = ref_pool(v, 7, PoolType::Avg);
      for (const auto& [name, ref_scores, alpha] :
           {std::tuple{std::string("knorm"), knorm, 0.2}, std::tuple{std::string("tova"), tova, 0.5},
            std::tuple{std::string("adakv"), snap, 0.2}}) {
        PressSpec s = spec_of(name, C, W, S, "ada");
        s.set("alpha", fmt::format("{}", alpha));
        if (name == "tova") s.set("gqa_agg", "max");
        if (name == "adakv") s.set("pool", "avg");
        double margin = 0;
        const auto expect = ref_ada(ref_scores, S, C - W - S, alpha, &margin);
        if (margin < 1e-4) continue;  // a near tie at a cut: float and double may differ legitimately
        const PressResult r = make_press(s)->compress(l.input(), C);
        expect_well_formed(r, 3, L, protected_positions(L, W, S), s.to_string());
        EXPECT_EQ(prefix_picks(r, S, W), expect) << s.to_string() << " seed " << seed;
        int64_t total = 0;
        for (const auto& k : r.kept) total += static_cast<int64_t>(k.size());
        EXPECT_EQ(total, 3 * C);
        ++checked;
      }
    }
  }
  RecordProperty("compared", checked);  // of 18 (press, seed, sinks) cases
  EXPECT_GE(checked, 12) << "too many near ties: the test data no longer exercises the comparison";
}

// alloc=pyramid over tova, pyramidkv and snapkv, with and without sinks: per-layer top-k of the
// double-precision reference scores over the candidates S..L-W-1.
TEST(PressRegistry, PyramidOverTOVAAndSnapKVFamilyMatchTheReference) {
  const int W = 10, n_layers = 4;
  const int64_t L = 300, C = 60;
  const Layer l = Layer::random(L, 4, 2, 32, W, true, 31, 2.0f);
  const DScores tova = ref_gqa(ref_window_scores(l, W - 1), 2, GQAAgg::Mean);
  const DScores snap_q = ref_gqa(ref_window_scores(l, 0), 2, GQAAgg::Mean);
  for (int64_t S : {int64_t{0}, int64_t{4}}) {
    const auto budgets = press_detail::pyramid_budgets(C - W - S, L - W - S, 20, n_layers);
    for (int ci = 0; ci < n_layers; ++ci) {
      const PressResult r = make_press(spec_of("tova", C, W, S, "pyramid"))->compress(l.input(ci, n_layers, ci), C);
      expect_well_formed(r, 2, L, protected_positions(L, W, S), "tova pyramid");
      const auto picks = prefix_picks(r, S, W);
      for (int kv = 0; kv < 2; ++kv) {
        const std::vector<double> cand(tova[kv].begin() + S, tova[kv].end());
        std::vector<int32_t> shifted;
        for (int32_t p : picks[kv]) shifted.push_back(p - static_cast<int32_t>(S));
        expect_selection_matches(shifted, cand, budgets[static_cast<size_t>(ci)], 1e-5,
                                 fmt::format("tova pyramid S={} layer {} kv {}", S, ci, kv));
      }
    }
    // snapkv (uniform) and pyramidkv over SnapKV's pooled scores.
    for (int ci = 0; ci < n_layers; ++ci) {
      for (const std::string name : {"snapkv", "pyramidkv"}) {
        PressSpec s = spec_of(name, C, W, S, name == "snapkv" ? "uniform" : "pyramid");
        const PressResult r = make_press(s)->compress(l.input(ci, n_layers, ci), C);
        expect_well_formed(r, 2, L, protected_positions(L, W, S), s.to_string());
        const auto picks = prefix_picks(r, S, W);
        const int64_t k = name == "snapkv" ? C - W - S : budgets[static_cast<size_t>(ci)];
        for (int kv = 0; kv < 2; ++kv) {
          const std::vector<double> pooled = ref_pool(snap_q[kv], 7, PoolType::Max);
          const std::vector<double> cand(pooled.begin() + S, pooled.end());
          std::vector<int32_t> shifted;
          for (int32_t p : picks[kv]) shifted.push_back(p - static_cast<int32_t>(S));
          expect_selection_matches(shifted, cand, k, 1e-5, fmt::format("{} S={} layer {} kv {}", name, S, ci, kv));
        }
      }
    }
  }
}

// The thread count changes nothing but the speed.
TEST(PressRegistry, ResultsDoNotDependOnTheThreadCount) {
  const Layer l = Layer::random(700, 8, 2, 64, 32, true, 3);
  for (const std::string name : {"snapkv", "tova", "h2o"}) {
    const auto press = make_press(spec_of(name, 128, 32, 0, "uniform"));
    PressInput in = l.input();
    const PressResult one = press->compress(in, 128);
    in.n_threads = 3;
    const PressResult three = press->compress(in, 128);
    EXPECT_EQ(one.kept, three.kept) << name;
    EXPECT_EQ(one.scores, three.scores) << name;
    in.n_threads = 0;
    EXPECT_THROW(press->compress(in, 128), Error) << name;
  }
}

}  // namespace
}  // namespace snapkv::test
