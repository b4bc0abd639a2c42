// Selection properties of every press on random and degenerate inputs: exact sizes, window and
// sinks always kept (also when every score is equal), ascending unique positions, determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/presses/scoring.h"
#include "press_test_util.h"

namespace snapkv::test {
namespace {

PressConfig config(const std::string& name, int64_t budget, int window) {
  PressConfig cfg;
  cfg.name = name;
  cfg.budget = budget;
  cfg.window = window;
  return cfg;
}

/// Positions every press must keep: the window, plus the sinks for streamingllm.
std::vector<int32_t> must_keep(const std::string& name, const PressConfig& cfg, int64_t L, int64_t C) {
  if (name == "streamingllm") {
    std::vector<int32_t> r = range(0, cfg.sinks);
    for (int32_t p : range(L - (C - cfg.sinks), L)) r.push_back(p);
    return r;
  }
  return range(L - cfg.window, L);
}

void check_sizes(const std::string& name, const PressResult& r, int n_head_kv, int64_t C, const std::string& what) {
  int64_t total = 0;
  for (const auto& k : r.kept) total += static_cast<int64_t>(k.size());
  EXPECT_EQ(total, n_head_kv * C) << what;
  if (name != "adakv") {
    for (const auto& k : r.kept) EXPECT_EQ(static_cast<int64_t>(k.size()), C) << what;
  }
}

TEST(PressProperties, EveryPressOnRandomInputs) {
  for (bool f16 : {false, true}) {
    for (const auto& [n_head, n_kv] : {std::pair{8, 2}, std::pair{4, 1}, std::pair{3, 3}}) {
      const int W = 16;
      const int64_t L = 200;
      const Layer l = Layer::random(L, n_head, n_kv, 32, W, f16, 7 + n_head, 2.0f);
      const PressInput in = l.input();
      for (const std::string& name : press_names()) {
        if (name == "none") continue;
        for (int64_t C : {int64_t{W + 4}, int64_t{W + 5}, int64_t{77}, L - 1}) {
          const PressConfig cfg = config(name, C, W);
          const std::string what = fmt::format("{} C={} H={}/{} {}", name, C, n_head, n_kv, f16 ? "f16" : "f32");
          const PressResult r = make_press(cfg)->compress(in, C);
          expect_well_formed(r, n_kv, L, must_keep(name, cfg, L, C), what);
          check_sizes(name, r, n_kv, C, what);
          if (name == "adakv") {
            const int64_t safe = static_cast<int64_t>(std::floor(cfg.adakv_alpha * static_cast<double>(C - W)));
            for (const auto& k : r.kept) EXPECT_GE(static_cast<int64_t>(k.size()), safe + W) << what;
          }
        }
      }
    }
  }
}

// Every attention score equal (all-zero queries and keys): ties must never evict the window, and
// equal prefix scores prefer earlier positions.
TEST(PressProperties, AllScoresEqualKeepWindowAndEarliestPositions) {
  const int W = 8;
  const int64_t L = 100, C = 30;
  for (bool f16 : {false, true}) {
    const Layer l = Layer::zeros(L, 4, 2, 16, W, f16);
    const PressInput in = l.input();
    for (const std::string& name : press_names()) {
      if (name == "none") continue;
      const PressConfig cfg = config(name, C, W);
      const PressResult r = make_press(cfg)->compress(in, C);
      expect_well_formed(r, 2, L, must_keep(name, cfg, L, C), name);
      check_sizes(name, r, 2, C, name);
      // Presses whose scores are all equal here pick the earliest prefix positions.
      if (name == "snapkv" || name == "pyramidkv" || name == "adakv" || name == "tova" || name == "knorm") {
        std::vector<int32_t> expect = range(0, C - W);
        for (int32_t p : range(L - W, L)) expect.push_back(p);
        for (const auto& k : r.kept) EXPECT_EQ(k, expect) << name;
      }
    }
  }
}

TEST(PressProperties, NoneKeepsEverything) {
  const Layer l = Layer::random(50, 2, 1, 8, 4, false, 1);
  const PressResult r = make_press(PressConfig{})->compress(l.input(), 10);
  expect_well_formed(r, 1, 50, range(0, 50), "none");
}

TEST(PressProperties, PassingCapacityAtLeastLKeepsEverything) {
  const Layer l = Layer::random(40, 2, 1, 8, 4, false, 1);
  for (const std::string& name : press_names()) {
    const PressResult r = make_press(config(name, 40, 4))->compress(l.input(), 40);
    expect_well_formed(r, 1, 40, range(0, 40), name);
  }
}

TEST(PressProperties, StreamingLLMKeepsSinksAndRecent) {
  const Layer l = Layer::random(64, 2, 2, 8, 8, false, 3);
  PressConfig cfg = config("streamingllm", 20, 8);
  cfg.sinks = 4;
  const PressResult r = make_press(cfg)->compress(l.input(), 20);
  std::vector<int32_t> expect = range(0, 4);
  for (int32_t p : range(48, 64)) expect.push_back(p);
  for (const auto& k : r.kept) EXPECT_EQ(k, expect);
  cfg.sinks = 0;
  const PressResult r0 = make_press(cfg)->compress(l.input(), 20);
  for (const auto& k : r0.kept) EXPECT_EQ(k, range(44, 64));
}

TEST(PressProperties, RandomIsDeterministicBySeed) {
  const Layer l = Layer::random(300, 4, 2, 8, 8, false, 3);
  PressConfig cfg = config("random", 50, 8);
  cfg.seed = 123;
  const PressResult a = make_press(cfg)->compress(l.input(0, 1, 5), 50);
  const PressResult b = make_press(cfg)->compress(l.input(0, 1, 5), 50);
  EXPECT_EQ(a.kept, b.kept);
  EXPECT_NE(a.kept[0], a.kept[1]) << "KV heads should draw independently";
  const PressResult other_layer = make_press(cfg)->compress(l.input(0, 1, 6), 50);
  EXPECT_NE(a.kept, other_layer.kept);
  cfg.seed = 124;
  const PressResult c = make_press(cfg)->compress(l.input(0, 1, 5), 50);
  EXPECT_NE(a.kept, c.kept);
  // Roughly uniform: the picks spread over the whole prefix.
  int64_t first_half = 0;
  for (int32_t p : a.kept[0]) first_half += p < 146;
  EXPECT_GT(first_half, 10);
  EXPECT_LT(first_half, 32);
}

TEST(PressProperties, PyramidKVBudgetsDecreaseAndSumToUniformTotal) {
  const int W = 8, n_layers = 6;
  const int64_t L = 400, C = 58;  // P = 50, min = 2, max = 98 <= L - W
  const Layer l = Layer::random(L, 4, 2, 16, W, true, 9);
  const auto press = make_press(config("pyramidkv", C, W));
  int64_t total = 0, prev = INT64_MAX;
  for (int i = 0; i < n_layers; ++i) {
    const PressResult r = press->compress(l.input(i, n_layers, i), C);
    expect_well_formed(r, 2, L, range(L - W, L), fmt::format("layer {}", i));
    const int64_t n = static_cast<int64_t>(r.kept[0].size());
    EXPECT_EQ(static_cast<int64_t>(r.kept[1].size()), n);
    EXPECT_LE(n, prev) << "layer " << i;
    prev = n;
    total += n;
    if (i == 0) {
      EXPECT_EQ(n, 98 + W);
    }
    if (i == n_layers - 1) {
      EXPECT_EQ(n, 2 + W);
    }
  }
  EXPECT_EQ(total, n_layers * C);
}

TEST(PressProperties, PyramidBudgetsExactValues) {
  // P = 100, beta = 20: min 5, max 195; linear 195, 147.5, 100, 52.5, 5 -> one extra token to the
  // earlier of the two .5 layers.
  EXPECT_EQ(press_detail::pyramid_budgets(100, 1000, 20, 5), (std::vector<int64_t>{195, 148, 100, 52, 5}));
  // Too short a prompt for the pyramid (max 195 > 150): uniform.
  EXPECT_EQ(press_detail::pyramid_budgets(100, 150, 20, 5), (std::vector<int64_t>(5, 100)));
  EXPECT_EQ(press_detail::pyramid_budgets(100, 1000, 20, 1), (std::vector<int64_t>{100}));
  for (int n : {2, 3, 7, 18, 26, 62}) {
    for (int64_t P : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{1000}, int64_t{4063}}) {
      const auto b = press_detail::pyramid_budgets(P, 3 * P + 1, 20, n);
      ASSERT_EQ(static_cast<int>(b.size()), n);
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) {
        sum += b[i];
        if (i > 0) {
          EXPECT_LE(b[i], b[i - 1]) << n << " " << P;
        }
        EXPECT_GE(b[i], static_cast<int64_t>(P / 20));
        EXPECT_LE(b[i], 2 * P - P / 20);
      }
      EXPECT_EQ(sum, n * P) << n << " " << P;
    }
  }
  EXPECT_THROW(press_detail::pyramid_budgets(10, 100, 0.5, 4), Error);
  EXPECT_THROW(press_detail::pyramid_budgets(10, 5, 20, 4), Error);
}

TEST(PressProperties, AdaKVSharesTheLayerBudgetAcrossHeads) {
  // KV head 0: peaky attention (a few keys aligned with the queries); KV head 1: flat.
  const int W = 8, d = 16;
  const int64_t L = 300, C = 40;
  Layer l = Layer::random(L, 4, 2, d, W, false, 21, 0.05f);
  const std::vector<float> qv(l.all_q.begin() + (L - 1) * d, l.all_q.begin() + L * d);
  for (int h = 0; h < 2; ++h)  // query heads 0 and 1 (KV head 0): every window query is qv
    for (int64_t i = L - W; i < L; ++i) std::copy(qv.begin(), qv.end(), l.all_q.begin() + (h * L + i) * d);
  for (int64_t j = 0; j < L - W; j += 37)  // a few keys of KV head 0 aligned with qv
    for (int i = 0; i < d; ++i) l.keys[j * d + i] = qv[i] >= 0 ? 3.0f : -3.0f;
  l.finish();
  PressConfig cfg = config("adakv", C, W);
  const PressResult r = make_press(cfg)->compress(l.input(), C);
  expect_well_formed(r, 2, L, range(L - W, L), "adakv");
  const int64_t safe = static_cast<int64_t>(std::floor(cfg.adakv_alpha * (C - W)));
  EXPECT_EQ(static_cast<int64_t>(r.kept[0].size() + r.kept[1].size()), 2 * C);
  EXPECT_GE(static_cast<int64_t>(r.kept[0].size()), safe + W);
  EXPECT_GE(static_cast<int64_t>(r.kept[1].size()), safe + W);
  EXPECT_NE(r.kept[0].size(), r.kept[1].size()) << "budgets should adapt to the heads";
}

TEST(PressProperties, AdaKVWithOneKVHeadEqualsSnapKV) {
  const Layer l = Layer::random(257, 4, 1, 16, 11, true, 5);
  const PressResult a = make_press(config("adakv", 60, 11))->compress(l.input(), 60);
  const PressResult s = make_press(config("snapkv", 60, 11))->compress(l.input(), 60);
  EXPECT_EQ(a.kept, s.kept);
  EXPECT_EQ(a.scores, s.scores);
}

TEST(PressProperties, AdaptiveTopKMatchesBruteForce) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(0, 5);  // many ties
  for (int trial = 0; trial < 50; ++trial) {
    const int H = 1 + trial % 4;
    const int64_t n = 10 + trial;
    const int64_t k = 1 + trial % 9;
    const double alpha = (trial % 5) * 0.25;
    press_detail::HeadScores s(static_cast<size_t>(H), std::vector<float>(static_cast<size_t>(n)));
    for (auto& v : s)
      for (auto& x : v) x = static_cast<float>(small(rng));
    const auto got = press_detail::adaptive_top_k(s, k, alpha);
    // Brute force: safeguard per head, then the best remaining (score desc, pos asc, head asc).
    const int64_t safe = static_cast<int64_t>(std::floor(alpha * k));
    std::vector<std::vector<int32_t>> expect(static_cast<size_t>(H));
    std::vector<std::vector<char>> taken(static_cast<size_t>(H), std::vector<char>(static_cast<size_t>(n), 0));
    for (int h = 0; h < H; ++h) {
      std::vector<double> d(s[h].begin(), s[h].end());
      expect[h] = ref_top_k(d, safe);
      for (int32_t p : expect[h]) taken[h][p] = 1;
    }
    std::vector<std::tuple<float, int32_t, int>> rest;
    for (int h = 0; h < H; ++h)
      for (int32_t j = 0; j < n; ++j)
        if (!taken[h][j]) rest.emplace_back(-s[h][j], j, h);
    std::sort(rest.begin(), rest.end());
    for (int64_t t = 0; t < H * (k - safe); ++t) expect[std::get<2>(rest[t])].push_back(std::get<1>(rest[t]));
    for (auto& e : expect) std::sort(e.begin(), e.end());
    EXPECT_EQ(got, expect) << "trial " << trial;
  }
}

TEST(PressProperties, PoolingMatchesReference) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int n : {1, 2, 5, 6, 7, 30, 129}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = u(rng);
    const std::vector<double> xd(x.begin(), x.end());
    for (int K : {1, 3, 5, 7, 9, 15, 301}) {
      for (PoolType t : {PoolType::Max, PoolType::Avg}) {
        const auto got = press_detail::pool1d(x, K, t);
        const auto ref = ref_pool(xd, K, t);
        ASSERT_EQ(got.size(), ref.size());
        for (int j = 0; j < n; ++j) EXPECT_NEAR(got[j], ref[j], 1e-6) << "n=" << n << " K=" << K << " j=" << j;
      }
    }
  }
  EXPECT_THROW(press_detail::pool1d({1.0f}, 4, PoolType::Max), Error);
}

TEST(PressProperties, TopKTiesPreferEarlierAndNaNRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> s = {1, 3, 3, nan, 2, 3, 0};
  EXPECT_EQ(press_detail::top_k_positions(s.data(), 7, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(press_detail::top_k_positions(s.data(), 7, 4), (std::vector<int32_t>{1, 2, 4, 5}));
  EXPECT_EQ(press_detail::top_k_positions(s.data(), 7, 6), (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(press_detail::top_k_positions(s.data(), 7, 0), (std::vector<int32_t>{}));
}

}  // namespace
}  // namespace snapkv::test
