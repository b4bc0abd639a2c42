// Admission arithmetic of the server (src/server/admission.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "server/admission.h"
#include "snapkv/snapkv.h"
#include "test_util.h"

namespace snapkv::server {
namespace {

// 4 layers, 2 KV heads of dim 8: 2 x 2 x 8 x 2 B = 64 B per token per layer (F16).
ModelInfo info(std::vector<int> windows = {0, 0, 0, 0}) {
  ModelInfo i;
  i.n_layer = static_cast<int>(windows.size());
  i.n_head_kv = 2;
  i.head_dim = 8;
  i.layer_window = std::move(windows);
  return i;
}

TEST(Admission, FullCache) {
  const PressPlanSummary none;
  const KvProjection p = project_kv(info(), KVType::F16, KVType::F16, 1000, 100, none);
  EXPECT_EQ(p.after_prefill, 4u * 1000 * 64);
  EXPECT_EQ(p.final_bytes, 4u * 1100 * 64);
  EXPECT_EQ(p.prefill_peak, 4u * 1000 * 64);  // the last layer at full length after 3 full ones
  EXPECT_EQ(p.reserve(), 4u * 1100 * 64);
  EXPECT_EQ(p.full_bytes, 4u * 1100 * 64);
  EXPECT_EQ(project_kv(info(), KVType::F32, KVType::F32, 1000, 100, none).reserve(), 2 * p.reserve());
}

// Keys and values of two types: every token costs a key row of one and a value row of the other.
TEST(Admission, MixedKeyValueTypes) {
  const PressPlanSummary none;
  ModelInfo mi = info();
  mi.head_dim = 64;                                // two Q8_0 / Q4_0 blocks per row
  const size_t per_token = 2 * (2 * 34 + 2 * 18);  // 2 KV heads x (K row 68 B + V row 36 B)
  const KvProjection p = project_kv(mi, KVType::Q8_0, KVType::Q4_0, 1000, 100, none);
  EXPECT_EQ(p.after_prefill, 4u * 1000 * per_token);
  EXPECT_EQ(p.reserve(), 4u * 1100 * per_token);
  EXPECT_EQ(per_token * 4, mi.kv_bytes_per_token(KVType::Q8_0, KVType::Q4_0));
  EXPECT_THROW(project_kv(info(), KVType::Q8_0, KVType::Q4_0, 10, 1, none), Error);  // head_dim 8
}

TEST(Admission, CompressedPromptAndPeak) {
  PressPlanSummary plan;
  plan.compress = true;
  plan.capacity = 256;
  const KvProjection p = project_kv(info(), KVType::F16, KVType::F16, 4096, 128, plan);
  EXPECT_EQ(p.after_prefill, 4u * 256 * 64);
  EXPECT_EQ(p.final_bytes, 4u * (256 + 128) * 64);
  // Layer-major: the last layer at its full 4096 while the three before hold 256 each.
  EXPECT_EQ(p.prefill_peak, (3u * 256 + 4096) * 64);
  EXPECT_EQ(p.reserve(), p.prefill_peak);
  EXPECT_EQ(p.full_bytes, 4u * (4096 + 128) * 64);
  // The same budget holds several times as many compressed sessions as full ones.
  const PressPlanSummary none;
  const size_t budget = 4 * project_kv(info(), KVType::F16, KVType::F16, 4096, 128, none).reserve();
  KvBudget b_none(budget), b_snap(budget);
  int n_none = 0, n_snap = 0;
  while (b_none.try_reserve(project_kv(info(), KVType::F16, KVType::F16, 4096, 128, none).reserve())) ++n_none;
  while (b_snap.try_reserve(p.reserve())) ++n_snap;
  EXPECT_EQ(n_none, 4);
  EXPECT_EQ(n_snap, 13);  // 4 x 16896 / 4864 token-layers: the peak bounds it on a 4-layer model
}

TEST(Admission, SlidingWindowLayers) {
  const PressPlanSummary none;
  // Layer 0 and 2 slide over 128 tokens; decoding lets them hold 16 entries more before trimming.
  ModelInfo swa = info({128, 0, 128, 0});
  swa.window_slack = 16;
  const KvProjection p = project_kv(swa, KVType::F16, KVType::F16, 1000, 50, none);
  EXPECT_EQ(p.after_prefill, (2u * 127 + 2u * 1000) * 64);
  EXPECT_EQ(p.final_bytes, (2u * (127 + 16) + 2u * 1050) * 64);
  // Peak at layer 3: 127 + 1000 + 127 held, layer 3 at 1000.
  EXPECT_EQ(p.prefill_peak, (127u + 1000 + 127 + 1000) * 64);
  // A prompt shorter than the window is held whole.
  const KvProjection s = project_kv(swa, KVType::F16, KVType::F16, 10, 5, none);
  EXPECT_EQ(s.after_prefill, 4u * 10 * 64);
  EXPECT_EQ(s.final_bytes, 4u * 15 * 64);
}

// Gemma 3 (15 of 18 layers slide over 512 tokens): a real sequence never holds more KV bytes than
// the projection admission reserves, through the prefill and a decode that runs past the
// sliding-window slack (520 + 70 tokens: the windows grow to 511 + 64 entries before trimming).
TEST(Admission, GemmaSequenceStaysWithinItsProjection) {
  if (!std::filesystem::exists(test::gemma_path())) GTEST_SKIP() << "no Gemma 3 270M (scripts/get-model.sh gemma3)";
  const auto e = Engine::load(test::gemma_path().string());
  const ModelInfo& mi = e->info();
  ASSERT_GT(mi.window_slack, 0);
  const int64_t n_prompt = 520, n_gen = 70;
  std::mt19937_64 rng(5);
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (auto& t : prompt) t = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(mi.n_vocab - 3));
  prompt[0] = 2;  // BOS
  for (const char* spec : {"none", "snapkv:budget=128,window=16"}) {
    const PressSpec press = PressSpec::parse(spec);
    const KvProjection proj =
        project_kv(mi, KVType::F16, KVType::F16, n_prompt, n_gen, plan_press_spec(press, n_prompt));
    SequenceOptions so;
    so.n_ctx = 1024;
    auto seq = e->new_sequence(so);
    Workspace ws(*e);
    PrefillOptions po;
    po.press = press;
    auto logits = e->prefill(*seq, prompt, po, ws);
    EXPECT_LE(seq->stats().peak_kv_cache_bytes, proj.reserve()) << spec;
    EXPECT_LE(seq->stats().kv_cache_bytes, proj.after_prefill) << spec;
    Batch b;
    size_t most = 0;
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (int64_t i = 0; i < n_gen; ++i) {
      b.clear();
      b.add(*seq, next);
      e->step(b, ws);
      const auto l = b.logits(0);
      next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
      ASSERT_LE(seq->stats().kv_cache_bytes, proj.final_bytes) << spec << " after " << i + 1 << " tokens";
      most = std::max(most, seq->stats().kv_cache_bytes);
    }
    EXPECT_LE(seq->stats().peak_kv_cache_bytes, proj.reserve()) << spec;
    const auto per_token_layer = static_cast<size_t>(mi.n_head_kv) * 2 * static_cast<size_t>(mi.head_dim) * 2;
    EXPECT_GE(most, proj.after_prefill + 64 * per_token_layer * 15)
        << spec << ": the windows did not use their slack (the check would not bite)";
  }
}

// A compressed prompt and then a question that re-selects from the cold tier (a session request:
// server.cpp passes the question as reselect_tokens) never hold more KV bytes than admission
// reserves, nor does PyramidKV's prefill, whose early layers keep more than the budget. Before,
// the re-selection's peak (one layer restored whole next to every layer's question entries) went
// past the reservation, by the whole --kv-memory-budget in a server run.
TEST(Admission, ReselectionAndUnevenBudgetsStayWithinTheProjection) {
  const auto e = Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string());
  const ModelInfo& mi = e->info();
  const int64_t n_ctx_tokens = 300, n_gen = 6;
  std::mt19937_64 rng(11);
  std::vector<int32_t> prompt(static_cast<size_t>(n_ctx_tokens));
  for (auto& t : prompt) t = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(mi.n_vocab - 3));
  prompt[0] = 1;  // BOS
  for (const int64_t q : {int64_t{16}, int64_t{200}})
    for (const char* spec : {"snapkv:budget=64,window=8", "pyramidkv:budget=64,window=8", "tova:budget=40,window=8"}) {
      const PressSpec press = PressSpec::parse(spec);
      const PressPlanSummary plan = plan_press_spec(press, n_ctx_tokens);
      ASSERT_TRUE(plan.compress) << spec;
      std::vector<int32_t> question(static_cast<size_t>(q));
      for (auto& t : question) t = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(mi.n_vocab - 3));
      Workspace ws(*e);
      {  // the prompt alone
        const KvProjection proj = project_kv(mi, KVType::F16, KVType::F16, n_ctx_tokens, n_gen, plan);
        auto seq = e->new_sequence({});
        PrefillOptions po;
        po.press = press;
        (void)e->prefill(*seq, prompt, po, ws);
        EXPECT_LE(seq->stats().peak_kv_cache_bytes, proj.reserve()) << spec;
        EXPECT_EQ(seq->stats().kv_cache_bytes, proj.after_prefill) << spec;
      }
      const KvProjection proj = project_kv(mi, KVType::F16, KVType::F16, n_ctx_tokens, n_gen + q, plan, q);
      SequenceOptions so;
      so.cold_tier = parse_cold_tier("int8");
      auto seq = e->new_sequence(so);
      PrefillOptions po;
      po.press = press;
      (void)e->prefill(*seq, prompt, po, ws);
      PrefillOptions pq;
      pq.reselect = true;
      (void)e->prefill(*seq, question, pq, ws);
      EXPECT_EQ(seq->stats().n_reselections, 1) << spec;
      EXPECT_LE(seq->stats().peak_kv_cache_bytes, proj.reserve()) << spec << " q " << q;
      EXPECT_LE(seq->stats().kv_cache_bytes, proj.final_bytes) << spec << " q " << q;
    }
}

TEST(Admission, Budget) {
  KvBudget b(1000);
  EXPECT_TRUE(b.could_fit(1000));
  EXPECT_FALSE(b.could_fit(1001));
  EXPECT_TRUE(b.try_reserve(600));
  EXPECT_FALSE(b.try_reserve(401));
  EXPECT_TRUE(b.try_reserve(400));
  EXPECT_EQ(b.reserved(), 1000u);
  EXPECT_FALSE(b.try_reserve(1));
  b.release(600);
  EXPECT_EQ(b.reserved(), 400u);
  EXPECT_FALSE(b.try_reserve(SIZE_MAX));  // no overflow
  KvBudget unlimited(0);
  EXPECT_TRUE(unlimited.could_fit(SIZE_MAX / 2));
  EXPECT_TRUE(unlimited.try_reserve(SIZE_MAX / 2));
}

}  // namespace
}  // namespace snapkv::server
