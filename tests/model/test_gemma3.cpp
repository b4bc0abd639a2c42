// Gemma 3 270M (Q4_K_M) vs llama.cpp golden data (tests/data/gemma3-270m), F32 and F16 KV cache.
// Skipped when the model is not in the cache (scripts/get-model.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "golden_util.h"
#include "model/model.h"
#include "support/test_session.h"

namespace snapkv {
namespace {

std::shared_ptr<const Model> gemma() {
  static std::shared_ptr<const Model> m = [] {
    const auto p = test::gemma_path();
    return std::filesystem::exists(p) ? Model::load(p.string()) : nullptr;
  }();
  return m;
}

#define REQUIRE_GEMMA() \
  if (!gemma())         \
  GTEST_SKIP() << "Gemma model not found at " << test::gemma_path().string() << " (run scripts/get-model.sh)"

TEST(Gemma3, Config) {
  REQUIRE_GEMMA();
  const ModelConfig& c = gemma()->config();
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.n_layer, 18);
  EXPECT_EQ(c.n_embd, 640);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_EQ(c.n_vocab, 262144);
  EXPECT_EQ(c.n_ctx_train, 32768);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(c.rope_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_base_swa, 1e4f);
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(640.0f));
  EXPECT_EQ(c.rope_type, RopeType::NeoX);
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.tied_output);
  for (int il = 0; il < c.n_layer; ++il) EXPECT_EQ(c.layer_is_swa[static_cast<size_t>(il)] != 0, il % 6 != 5) << il;
}

// Tolerances. Gemma 3 270M through quantized weights is numerically chaotic: llama.cpp quantizes
// the activations to 8 bits per mat-mul, and one changed rounding flips a Q8 code somewhere.
// Measured: perturbing the embeddings by 1.2e-7 (relative) moves snapkv's last-position logits by
// RMS 0.28 / max 1.2; llama.cpp's own F16-vs-F32 KV cache differ by RMS 0.28 / max 1.36; a float64
// reference differs from llama.cpp by RMS 0.22 and from snapkv by RMS 0.19. Observed snapkv vs
// golden: RMS <= 0.3, max <= 1.0 on the full vocabulary, top-40 per step <= 1.6 (heavy-tailed:
// it grows along the greedy path and moves whenever a kernel's rounding changes). A real bug
// (wrong RoPE base, window, norm, scale) gives RMS errors of several logits.
constexpr float kMaxLogitErr = 2.5f;   // max |dlogit| (full vocabulary, or the golden top-40 ids)
constexpr double kRmsLogitErr = 0.45;  // RMS over the full vocabulary
constexpr float kFlipGap = 1.5f;       // greedy tokens may differ only where the golden gap is below this

double rms_diff(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

struct GemmaCase {
  std::string kv;
  std::string prompt;
};

void PrintTo(const GemmaCase& c, std::ostream* os) { *os << c.kv << " " << c.prompt; }

class Gemma3Golden : public testing::TestWithParam<GemmaCase> {};

TEST_P(Gemma3Golden, MatchesLlamaCpp) {
  REQUIRE_GEMMA();
  const GemmaCase& gc = GetParam();
  const auto dir = test::source_dir() / "tests" / "data" / "gemma3-270m" / gc.kv;
  const auto golden = test::read_json(dir / "golden.json");
  nlohmann::json pr;
  for (const auto& p : golden["prompts"])
    if (p["name"] == gc.prompt) pr = p;
  ASSERT_FALSE(pr.is_null()) << gc.prompt;

  TestSessionOptions opt;
  opt.n_ctx = 4096;
  opt.kv_type = gc.kv == "kv_f16" ? KVType::F16 : KVType::F32;
  TestSession s(gemma(), opt);
  const auto tokens = test::ids(pr["token_ids"]);
  auto cur = s.prefill(tokens, false);
  float err_file = 0.0f;
  double rms_file = 0.0;
  if (pr.contains("last_logits_file")) {
    const auto gl = test::read_f32(dir / pr["last_logits_file"].get<std::string>());
    err_file = test::max_abs_diff(cur, gl);
    rms_file = rms_diff(cur, gl);
    EXPECT_LT(err_file, kMaxLogitErr);
    EXPECT_LT(rms_file, kRmsLogitErr);
  }
  const auto& steps = pr["greedy"]["steps"];
  float err_top = 0.0f;
  int same = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& st = steps[i];
    float e = 0.0f;
    for (const auto& pair : st["top"]) e = std::max(e, std::fabs(cur[pair[0].get<size_t>()] - pair[1].get<float>()));
    err_top = std::max(err_top, e);
    EXPECT_LT(e, kMaxLogitErr) << "step " << i;
    const int32_t want = st["token_id"];
    if (test::argmax(cur) != want) {
      EXPECT_LT(st["gap"].get<float>(), kFlipGap) << "greedy token differs at step " << i;
      break;
    }
    ++same;
    cur = s.decode(want);
  }
  fmt::print(
      "[gemma3 {} {} ({} tokens)] last-position logits max|d| {:.3g} rms {:.3g}; top-40 max|d| {:.3g}; "
      "greedy tokens equal {}/{}\n",
      gc.kv, gc.prompt, tokens.size(), err_file, rms_file, err_top, same, steps.size());
}

std::string gemma_case_name(const testing::TestParamInfo<GemmaCase>& info) {
  return info.param.kv + "_" + info.param.prompt;
}

// gpl3_long (2210 tokens, ~4x the sliding window) runs once, with the F32 cache (it is the slow one).
INSTANTIATE_TEST_SUITE_P(Golden, Gemma3Golden,
                         testing::Values(GemmaCase{"kv_f32", "capital"}, GemmaCase{"kv_f32", "story"},
                                         GemmaCase{"kv_f32", "chat_boiling"}, GemmaCase{"kv_f32", "apache2_medium"},
                                         GemmaCase{"kv_f32", "gpl3_long"}, GemmaCase{"kv_f16", "capital"},
                                         GemmaCase{"kv_f16", "story"}, GemmaCase{"kv_f16", "chat_boiling"},
                                         GemmaCase{"kv_f16", "apache2_medium"}),
                         gemma_case_name);

TEST(Gemma3, SlidingWindowLayersStayBounded) {
  REQUIRE_GEMMA();
  const auto golden = test::read_json(test::source_dir() / "tests" / "data" / "gemma3-270m" / "kv_f16" / "golden.json");
  std::vector<int32_t> tokens;
  for (const auto& p : golden["prompts"])
    if (p["name"] == "apache2_medium") tokens = test::ids(p["token_ids"]);
  ASSERT_EQ(tokens.size(), 609u);
  TestSessionOptions opt;
  opt.n_ctx = 1024;
  opt.prefill_chunk = 256;
  TestSession s(gemma(), opt);
  s.prefill(tokens);
  const ModelConfig& c = gemma()->config();
  const size_t entry = 2 * 256 * 2;  // one KV head, K+V, head_dim 256, F16
  size_t want = 0;
  for (int il = 0; il < c.n_layer; ++il) {
    const auto& h = s.kv_cache().layer(il).heads[0];
    if (c.layer_window(il) > 0) {
      EXPECT_GE(h.size(), 511);
      EXPECT_LE(h.size(), 511 + 256);
      EXPECT_EQ(h.positions().back(), 608);
      EXPECT_LE(h.positions().front(), 609 - 511);  // what the next query (position 609) needs
    } else {
      EXPECT_EQ(h.size(), 609);
    }
    want += static_cast<size_t>(h.size()) * entry;
  }
  EXPECT_EQ(s.stats().kv_cache_bytes, want);
  // press none: the full-cache figure is what is held (SWA layers count what they hold).
  EXPECT_EQ(s.stats().kv_cache_bytes_full, want);
  for (int i = 0; i < 40; ++i) s.decode(tokens[static_cast<size_t>(i)]);
  for (int il = 0; il < c.n_layer; ++il) {
    if (c.layer_window(il) > 0) {
      EXPECT_LE(s.kv_cache().layer(il).heads[0].capacity(), 511 + 256);
    }
  }
}

}  // namespace
}  // namespace snapkv
