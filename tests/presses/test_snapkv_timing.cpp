// SnapKV on a 32K-token prompt (W = 32, head_dim 64, 9 query / 3 KV heads, f16 keys): prints the
// time of one layer's compress() and checks the selection's structure (timings are reported,
// not asserted, so the test is not flaky on loaded machines).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>

#include "kv/presses/scoring.h"
#include "press_test_util.h"

namespace snapkv::test {
namespace {

TEST(SnapKVTiming, Layer32K) {
  const int64_t L = 32768, C = 2048;
  const int W = 32;
  const Layer l = Layer::random(L, 9, 3, 64, W, true, 42);
  PressConfig cfg;
  cfg.name = "snapkv";
  cfg.budget = C;
  const auto press = make_press(cfg);
  PressInput in = l.input();
  in.n_threads = omp_get_max_threads();  // the press uses exactly the threads it is given
  double best_ms = 1e30;
  PressResult res;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    res = press->compress(in, C);
    const auto t1 = std::chrono::steady_clock::now();
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  fmt::print("snapkv compress, L={} W={} d=64 heads 9/3 f16 keys, C={}, {} threads: {:.2f} ms (best of 3)\n", L, W, C,
             in.n_threads, best_ms);
  RecordProperty("compress_ms", fmt::format("{:.2f}", best_ms));
  expect_well_formed(res, 3, L, range(L - W, L), "32K");
  for (const auto& k : res.kept) EXPECT_EQ(static_cast<int64_t>(k.size()), C);

  // Spot-check the scores of a few prefix positions against the double reference.
  const auto pooled = press_detail::window_attention_scores(in, 0);
  const int64_t probe[] = {0, 1234, L - W - 1};
  for (int h : {0, 4, 8}) {
    double ref[3] = {};
    for (int i = 0; i < W; ++i) {
      const int64_t pos = L - W + i;
      const auto p = ref_softmax_row(l, l.query(h, pos), h / 3, pos);
      for (int t = 0; t < 3; ++t) ref[t] += p[static_cast<size_t>(probe[t])];
    }
    for (int t = 0; t < 3; ++t)
      EXPECT_NEAR(pooled[h][probe[t]], ref[t], 1e-5 * ref[t]) << "head " << h << " pos " << probe[t];
  }
}

}  // namespace
}  // namespace snapkv::test
