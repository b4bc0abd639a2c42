// SmolLM2-135M-Instruct (Q4_1, llama architecture: 30 layers, 9 query / 3 KV heads, 8K context)
// vs llama.cpp golden data (tests/data/smollm2-135m, tools/make_smollm2_golden.py), F32 and F16
// KV cache. Skipped when the model is not in the cache (scripts/get-model.sh smollm2).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string_view>

#include "golden_util.h"
#include "model/model.h"
#include "quant/simd.h"
#include "support/test_session.h"

namespace snapkv {
namespace {

std::shared_ptr<const Model> smollm2() {
  static std::shared_ptr<const Model> m = [] {
    const auto p = test::smollm2_path();
    return std::filesystem::exists(p) ? Model::load(p.string()) : nullptr;
  }();
  return m;
}

#define REQUIRE_SMOLLM2()                                                        \
  if (!smollm2())                                                                \
  GTEST_SKIP() << "SmolLM2 model not found at " << test::smollm2_path().string() \
               << " (run scripts/get-model.sh smollm2)"

// The one use of the engine API in this file: the logits at the last prompt position and after
// feeding each token of `feed` in turn (teacher forcing with llama.cpp's greedy tokens, so every
// step is compared on the same inputs even after the two argmaxes part).
std::vector<std::vector<float>> logits_along(const std::vector<int32_t>& prompt, const std::vector<int32_t>& feed,
                                             KVType kv) {
  TestSessionOptions opt;
  opt.n_ctx = 4096;
  opt.kv_type = kv;
  TestSession s(smollm2(), opt);
  std::vector<std::vector<float>> out;
  const auto first = s.prefill(prompt, false);
  out.emplace_back(first.begin(), first.end());
  for (const int32_t t : feed) {
    const auto l = s.decode(t);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

TEST(SmolLM2, Config) {
  REQUIRE_SMOLLM2();
  const ModelConfig& c = smollm2()->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.n_embd, 576);
  EXPECT_EQ(c.n_head, 9);
  EXPECT_EQ(c.n_head_kv, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 1536);
  EXPECT_EQ(c.n_vocab, 49152);
  EXPECT_EQ(c.n_ctx_train, 8192);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.125f);
  EXPECT_FLOAT_EQ(c.rope_base, 1e5f);
  EXPECT_EQ(c.rope_type, RopeType::Normal);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.post_norms);
  EXPECT_TRUE(c.tied_output);
  for (int il = 0; il < c.n_layer; ++il) EXPECT_EQ(c.layer_window(il), 0) << il;
}

// Tolerances, from measurement (tests/data/smollm2-135m, llama-cpp-python 0.3.16 built without AMX,
// see tools/make_smollm2_golden.py). Observed snapkv vs golden, last prompt position, full
// vocabulary: max |dlogit| 0.53-1.00, RMS 0.12-0.30 (the largest on the 5-token `capital`);
// top-40 logits along the 32 greedy steps: max 0.84. The peer's own spread is as large: llama.cpp
// with an F16 vs an F32 KV cache differs by max 0.92 / RMS 0.33 (chat_boiling), and llama.cpp's
// batched prefill vs its token-by-token decode of the same 32 tokens by max 1.15 / RMS 0.54 (both
// quantize activations to 8 bits per mat-mul, in different places; the logits themselves have a
// standard deviation of ~3.6 over the vocabulary).
// A real bug is far above this: llama.cpp's broken AMX Q4_1 kernels gave RMS 2-8 and max 9-30.
// The measurements above are of the AVX-512 VNNI kernels. With the AVX2 integer matmuls (an
// x86-64-v3 build, run by scripts/test.sh) the golden F16 `capital` logits come out bit for bit
// (RMS 0: that arithmetic is ggml's), but F16 `chat_boiling` measures RMS 0.553 (max 1.13): as far
// as llama.cpp's own batched-vs-decode spread above; our AVX2 and AVX-512 builds differ from each
// other by RMS 0.24-0.32 on that prompt (activation quantization amplifies last-bit differences
// over 30 layers). So the RMS bound is 0.45 for the AVX-512 VNNI level and 0.7 for the others
// (AVX2 measured; scalar builds not measured).
constexpr float kMaxLogitErr = 1.5f;  // max |dlogit| (full vocabulary, or the golden top-40 ids)
const double kRmsLogitErr =           // RMS over the full vocabulary
    std::string_view(quant::isa_name()) == "avx512-vnni" ? 0.45 : 0.7;
// The argmax must be llama.cpp's greedy token wherever llama.cpp's top1 - top2 gap is at least
// this: twice the largest top-40 error seen, with margin (two logits can err in opposite ways).
constexpr float kFlipGap = 2.0f;

double rms_diff(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

struct SmolCase {
  std::string kv;
  std::string prompt;
};

void PrintTo(const SmolCase& c, std::ostream* os) { *os << c.kv << " " << c.prompt; }

class SmolLM2Golden : public testing::TestWithParam<SmolCase> {};

TEST_P(SmolLM2Golden, MatchesLlamaCpp) {
  REQUIRE_SMOLLM2();
  const SmolCase& sc = GetParam();
  const auto dir = test::source_dir() / "tests" / "data" / "smollm2-135m" / sc.kv;
  const auto golden = test::read_json(dir / "golden.json");
  nlohmann::json pr;
  for (const auto& p : golden["prompts"])
    if (p["name"] == sc.prompt) pr = p;
  ASSERT_FALSE(pr.is_null()) << sc.prompt;

  const auto tokens = test::ids(pr["token_ids"]);
  const auto& steps = pr["greedy"]["steps"];
  const auto feed = test::ids(pr["greedy"]["token_ids"]);
  const auto logits = logits_along(tokens, std::vector<int32_t>(feed.begin(), feed.end() - 1),
                                   sc.kv == "kv_f16" ? KVType::F16 : KVType::F32);
  ASSERT_EQ(logits.size(), steps.size());

  const auto gl = test::read_f32(dir / pr["last_logits_file"].get<std::string>());
  const float err_file = test::max_abs_diff(logits[0], gl);
  const double rms_file = rms_diff(logits[0], gl);
  EXPECT_LT(err_file, kMaxLogitErr);
  EXPECT_LT(rms_file, kRmsLogitErr);

  // Teacher forcing gives every step the same inputs as llama.cpp's, so each step whose golden gap
  // is clear is checked, also after a near-tie (where the free-running greedy paths may part).
  float err_top = 0.0f;
  int checked = 0;
  size_t free_run = steps.size();  // greedy tokens equal from the start, as a free run would give
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& st = steps[i];
    float e = 0.0f;
    for (const auto& pair : st["top"])
      e = std::max(e, std::fabs(logits[i][pair[0].get<size_t>()] - pair[1].get<float>()));
    err_top = std::max(err_top, e);
    EXPECT_LT(e, kMaxLogitErr) << "step " << i;
    const int32_t want = st["token_id"];
    if (test::argmax(logits[i]) != want && free_run == steps.size()) free_run = i;
    if (st["gap"].get<float>() >= kFlipGap) {
      EXPECT_EQ(test::argmax(logits[i]), want) << "greedy token differs at step " << i << " (gap " << st["gap"] << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  fmt::print(
      "[smollm2 {} {} ({} tokens)] last-position logits max|d| {:.3g} rms {:.3g}; top-40 max|d| {:.3g} over {} "
      "steps; argmax checked at {} clear steps; greedy tokens equal for the first {}\n",
      sc.kv, sc.prompt, tokens.size(), err_file, rms_file, err_top, steps.size(), checked, free_run);
}

std::string smol_case_name(const testing::TestParamInfo<SmolCase>& info) {
  return info.param.kv + "_" + info.param.prompt;
}

// gpl3_long (3005 tokens) runs once, with the F32 cache: the F16 prefill is the slow one (4.6 min
// under ASan on a loaded 2-core machine). F16 is compared with llama.cpp on the short prompts; a long
// F16 prefill runs end to end in tests/e2e/test_cli_smollm2.cpp (3.6K tokens, answer checked).
INSTANTIATE_TEST_SUITE_P(Golden, SmolLM2Golden,
                         testing::Values(SmolCase{"kv_f32", "capital"}, SmolCase{"kv_f32", "chat_boiling"},
                                         SmolCase{"kv_f16", "capital"}, SmolCase{"kv_f16", "chat_boiling"},
                                         SmolCase{"kv_f32", "gpl3_long"}),
                         smol_case_name);

}  // namespace
}  // namespace snapkv
