// Memory accounting of a compressed cache (tests 4, 5a, 5g):
//  - kv_cache_bytes == entries x 2 x row bytes (kv_row_bytes), over the n_head_kv heads of each
//    layer (never expanded to the query heads), == the kept_tokens_per_layer-derived total;
//  - evicted entries are released: after compression every head's capacity equals its size;
//  - peak_kv_cache_bytes of a layer-major prefill is one layer at full length plus the other
//    layers compressed: (L + (n_layer - 1) C) x per-entry bytes, exactly;
//  - kv_cache_bytes_full does not depend on the press.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "compression_util.h"

namespace snapkv {
namespace {

using ctest::options;
using ctest::random_tokens;

/// Bytes of one token's entry in one layer: n_head_kv heads x (K + V) x row bytes (kv_row_bytes).
size_t layer_entry_bytes(const ModelConfig& c, KVType kv) {
  return static_cast<size_t>(c.n_head_kv) * 2 * kv_row_bytes(kv, c.head_dim);
}

// Tests 4 and 5a on stories260K (8 query heads, 4 KV heads): every press, F16 and F32.
TEST(CompressionMemory, BytesMatchTheEntriesHeld) {
  const auto m = ctest::stories();
  const ModelConfig& cfg = m->config();
  const int64_t L = 300, C = 48;
  const auto prompt = random_tokens(L, cfg.n_vocab, 51);
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    const size_t per = layer_entry_bytes(cfg, kv);
    size_t full_bytes_none = 0;
    for (const auto& name : ctest::all_presses()) {
      if (kv == KVType::F16 && name != "none" && name != "snapkv" && name != "adakv") continue;
      SCOPED_TRACE(name + (kv == KVType::F16 ? " f16" : " f32"));
      TestSession s(m, options(name, name == "none" ? 0 : C, kv, 16));
      s.prefill(prompt);
      const KVCache& cache = s.kv_cache();
      const SequenceStats& st = s.stats();
      // 5a: one cache per KV head, never one per query head.
      ASSERT_EQ(cache.n_head_kv(), 4);
      ASSERT_EQ(cfg.n_head, 8);
      size_t entries = 0;
      for (int il = 0; il < cfg.n_layer; ++il) {
        const KVLayerCache& layer = cache.layer(il);
        ASSERT_EQ(layer.heads.size(), 4u);
        size_t layer_entries = 0;
        for (const auto& h : layer.heads) {
          layer_entries += static_cast<size_t>(h.size());
          EXPECT_EQ(h.bytes(), static_cast<size_t>(h.size()) * 2 * kv_row_bytes(kv, 8));
          // 5g: evicted entries are freed, not masked: the buffers hold exactly the kept entries.
          EXPECT_EQ(h.capacity(), h.size()) << "layer " << il;
          EXPECT_EQ(h.capacity_bytes(), h.bytes());
        }
        if (name == "none") {
          EXPECT_EQ(layer_entries, static_cast<size_t>(4 * L));
        } else if (name != "pyramidkv") {
          EXPECT_EQ(layer_entries, static_cast<size_t>(4 * C)) << "layer " << il;
        }
        EXPECT_EQ(layer.bytes(), layer_entries * per / 4);
        EXPECT_DOUBLE_EQ(st.kept_tokens_per_layer[static_cast<size_t>(il)] * 4, static_cast<double>(layer_entries));
        entries += layer_entries;
      }
      const size_t expect_entries = static_cast<size_t>(cfg.n_layer) * 4 * (name == "none" ? L : C);
      EXPECT_EQ(entries, expect_entries);
      EXPECT_EQ(st.kv_cache_bytes, entries * per / 4);
      EXPECT_EQ(st.kv_cache_bytes, ctest::formula_bytes(cache));
      EXPECT_EQ(st.kv_cache_bytes, cache.bytes());
      EXPECT_EQ(cache.capacity_bytes(), cache.bytes());
      double kept_sum = 0;
      for (const double k : st.kept_tokens_per_layer) kept_sum += k;
      EXPECT_EQ(static_cast<size_t>(std::llround(kept_sum * 4)) * per / 4, st.kv_cache_bytes);
      // kv_cache_bytes_full: press-independent, n_layer x L full entries.
      EXPECT_EQ(st.kv_cache_bytes_full, static_cast<size_t>(cfg.n_layer) * static_cast<size_t>(L) * per);
      if (name == "none") full_bytes_none = st.kv_cache_bytes_full;
      EXPECT_EQ(st.kv_cache_bytes_full, full_bytes_none);

      // One decode step adds exactly one entry per head; the buffers grow by one block.
      std::vector<int64_t> before;
      for (int il = 0; il < cfg.n_layer; ++il)
        for (const auto& h : cache.layer(il).heads) before.push_back(h.size());
      s.decode(prompt[0]);
      size_t i = 0;
      for (int il = 0; il < cfg.n_layer; ++il) {
        for (const auto& h : cache.layer(il).heads) {
          EXPECT_EQ(h.size(), before[i] + 1);
          EXPECT_EQ(h.capacity(), before[i] + KVHeadCache::kGrowEntries);
          ++i;
        }
      }
      EXPECT_EQ(s.stats().kv_cache_bytes, (entries + static_cast<size_t>(cfg.n_layer) * 4) * per / 4);
      EXPECT_EQ(s.stats().kv_cache_bytes_full, static_cast<size_t>(cfg.n_layer) * static_cast<size_t>(L + 1) * per);
    }
  }
}

// Test 4 (peak) on the synthetic model: 4 layers, 2 KV heads, head_dim 16, L = 2000, C = 128.
// Layer-major prefill holds at most one layer at full length plus the already compressed ones:
// peak = (L + (n_layer - 1) C) x per-entry bytes, i.e. below the full cache by exactly
// full x (n_layer - 1)/n_layer x (1 - C/L).
TEST(CompressionMemory, PeakIsOneFullLayerPlusCompressedOthers) {
  const auto m = ctest::synthetic();
  const ModelConfig& cfg = m->config();
  ASSERT_EQ(cfg.n_layer, 4);
  const int64_t C = 128;
  // The F16 prefill attention is the slow one: a shorter prompt for it (same formula).
  struct Case {
    std::string press;
    KVType kv;
    int64_t L;
  };
  for (const Case& c : {Case{"snapkv", KVType::F32, 2000}, Case{"adakv", KVType::F32, 2000},
                        Case{"none", KVType::F32, 2000}, Case{"snapkv", KVType::F16, 800}}) {
    {
      const std::string& name = c.press;
      const KVType kv = c.kv;
      const int64_t L = c.L;
      const auto prompt = random_tokens(static_cast<size_t>(L), cfg.n_vocab, 52);
      SCOPED_TRACE(fmt::format("{} {} L {}", name, kv == KVType::F16 ? "f16" : "f32", L));
      TestSession s(m, options(name, name == "none" ? 0 : C, kv, 32, 4096));
      s.prefill(prompt);
      const SequenceStats& st = s.stats();
      const size_t per = layer_entry_bytes(cfg, kv);
      const auto nl = static_cast<size_t>(cfg.n_layer);
      const size_t full = nl * static_cast<size_t>(L) * per;
      EXPECT_EQ(st.kv_cache_bytes_full, full);
      if (name == "none") {
        EXPECT_EQ(st.kv_cache_bytes, full);
        EXPECT_EQ(st.peak_kv_cache_bytes, full);
        continue;
      }
      const size_t peak = (static_cast<size_t>(L) + (nl - 1) * static_cast<size_t>(C)) * per;
      EXPECT_EQ(st.peak_kv_cache_bytes, peak);
      // The same in the brief's terms: full - peak == full (n_layer-1)/n_layer (1 - C/L).
      const double saved = static_cast<double>(full) * (static_cast<double>(nl - 1) / static_cast<double>(nl)) *
                           (1.0 - static_cast<double>(C) / static_cast<double>(L));
      EXPECT_NEAR(static_cast<double>(full - st.peak_kv_cache_bytes), saved, 1e-6 * static_cast<double>(full));
      EXPECT_EQ(st.kv_cache_bytes, nl * static_cast<size_t>(C) * per);
      EXPECT_EQ(s.kv_cache().capacity_bytes(), st.kv_cache_bytes) << "evicted entries must be released";
      for (int il = 0; il < cfg.n_layer; ++il) {
        int64_t layer_total = 0;
        for (const auto& h : s.kv_cache().layer(il).heads) {
          layer_total += h.size();
          EXPECT_EQ(h.capacity(), h.size());
        }
        EXPECT_EQ(layer_total, cfg.n_head_kv * C) << "layer " << il;
      }
      // Decoding afterwards moves the peak only by the decoded entries.
      for (int t = 0; t < 3; ++t) s.decode(prompt[static_cast<size_t>(t)]);
      EXPECT_EQ(s.stats().kv_cache_bytes, nl * static_cast<size_t>(C + 3) * per);
      EXPECT_EQ(s.stats().peak_kv_cache_bytes, peak);
    }
  }
}

}  // namespace
}  // namespace snapkv
