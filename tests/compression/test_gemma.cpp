// Gemma 3 270M (test 6): MQA (1 KV head) with 5 sliding-window layers per full-attention layer.
// Only the full layers (5, 11, 17) are handed to the press; they keep exactly the budget; the
// sliding-window layers keep their most recent window entries (plus bounded slack), contiguous.
// Skipped when the model is not in the cache (scripts/get-model.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compression_util.h"

namespace snapkv {
namespace {

TEST(CompressionGemma, OnlyFullLayersCompressedSwaLayersBounded) {
  const auto m = ctest::gemma();
  if (!m) GTEST_SKIP() << "Gemma model not found at " << test::gemma_path().string() << " (run scripts/get-model.sh)";
  const ModelConfig& cfg = m->config();
  ASSERT_EQ(cfg.n_head_kv, 1);
  const int64_t L = 1500, C = 256;
  const int W = 32;
  const int64_t swa_window = cfg.sliding_window;
  ASSERT_EQ(swa_window, 512);
  const auto prompt = ctest::random_tokens(static_cast<size_t>(L), cfg.n_vocab, 81);
  TestSessionOptions o = ctest::options("snapkv", C, KVType::F16, W, 4096);
  TestSession s(m, o);
  s.prefill(prompt);

  std::vector<int> kept_layers;
  for (const auto& k : s.kept()) kept_layers.push_back(k.layer);
  EXPECT_EQ(kept_layers, (std::vector<int>{5, 11, 17}));

  // Entries an SWA layer may hold: the window - 1 positions any future query can see, plus the
  // documented slack (KVCache::kSwaSlack).
  const int64_t swa_max = swa_window - 1 + KVCache::kSwaSlack;
  auto check_layers = [&](int64_t n_past) {
    size_t full_entries = 0;
    for (int il = 0; il < cfg.n_layer; ++il) {
      const KVLayerCache& layer = s.kv_cache().layer(il);
      ASSERT_EQ(layer.heads.size(), 1u);
      const KVHeadCache& h = layer.heads[0];
      const auto pos = h.positions();
      if (cfg.layer_window(il) == 0) {
        EXPECT_FALSE(layer.is_swa());
        EXPECT_EQ(h.size(), C + (n_past - L)) << "layer " << il;
        for (int j = 0; j < W; ++j)
          EXPECT_EQ(pos[pos.size() - static_cast<size_t>(n_past - L) - W + j], L - W + j) << "layer " << il;
        full_entries += static_cast<size_t>(h.size());
      } else {
        EXPECT_TRUE(layer.is_swa());
        EXPECT_GE(h.size(), swa_window - 1) << "layer " << il;
        EXPECT_LE(h.size(), swa_max) << "layer " << il << ": SWA layer holds more than window - 1 + slack";
        // Contiguous, ending at the last token.
        for (size_t j = 0; j < pos.size(); ++j)
          ASSERT_EQ(pos[j], n_past - static_cast<int64_t>(pos.size()) + static_cast<int64_t>(j)) << "layer " << il;
      }
    }
    EXPECT_EQ(s.stats().kv_cache_bytes, ctest::formula_bytes(s.kv_cache()));
    EXPECT_EQ(full_entries, 3 * static_cast<size_t>(C + (n_past - L)));
  };
  check_layers(L);
  // The compressed cache must be smaller than the uncompressed one it is reported against.
  EXPECT_LT(s.stats().kv_cache_bytes, s.stats().kv_cache_bytes_full);

  // A few decode steps keep every invariant.
  for (int t = 0; t < 3; ++t) s.decode(prompt[static_cast<size_t>(t)]);
  check_layers(L + 3);
}

}  // namespace
}  // namespace snapkv
