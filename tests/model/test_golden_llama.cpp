// Llama-architecture engine vs llama.cpp golden data (stories260K F32 model, llama-2-tiny-random
// F16 model), for an F32 and an F16 KV cache.
//
// F32 cache: every logit within 1e-3 (measured ~1e-5).
// F16 cache: the engine rounds like ggml (Q to F16 before K.Q, probabilities to F16 before the V
// product), so short prompts match within 1e-3 too. Over long sequences an F16 cache is chaotic:
// a 1-ulp f32 difference upstream (e.g. another summation order in a mat-mul) flips an F16
// rounding of a K/V element or a probability somewhere, and stories260K amplifies each flip to
// ~1e-3..1e-2 in the logits (measured: perturbing K/V by 1.2e-7 relative moves long_400 logits
// by up to 0.02). Long prompts and greedy steps are therefore held to 0.03 max abs, and the F16
// mimicry is checked statistically: RMS(ours - llama.cpp f16) must be well below
// RMS(llama.cpp f16 - llama.cpp f32) (measured ratio <= 0.2).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "golden_util.h"
#include "model/model.h"
#include "support/test_session.h"

namespace snapkv {
namespace {

using test::argmax;
using test::max_abs_diff;

struct Case {
  std::string model;  // file stem in ../shared/models
  std::string kv;     // kv_f16 | kv_f32
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " " << c.kv; }

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = info.param.model + "_" + info.param.kv;
  for (auto& c : s)
    if (c == '-' || c == '.') c = '_';
  return s;
}

double rms_diff(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s / static_cast<double>(a.size()));
}

constexpr float kTol = 1e-3f;
constexpr float kTolF16Chaotic = 0.03f;
constexpr size_t kShortPrompt = 16;

class LlamaGolden : public testing::TestWithParam<Case> {};

TEST_P(LlamaGolden, LogitsAndGreedyPathMatchLlamaCpp) {
  const Case& c = GetParam();
  const bool f16 = c.kv == "kv_f16";
  const auto dir = test::golden_dir(c.model, c.kv);
  const auto other_dir = test::golden_dir(c.model, f16 ? "kv_f32" : "kv_f16");
  const auto golden = test::read_json(dir / "golden.json");
  auto model = Model::load((test::shared_dir() / "models" / (c.model + ".gguf")).string());
  const int n_vocab = model->config().n_vocab;
  ASSERT_EQ(n_vocab, golden["n_vocab"].get<int>());

  TestSessionOptions opt;
  opt.n_ctx = 512;
  opt.kv_type = f16 ? KVType::F16 : KVType::F32;

  for (const auto& pr : golden["prompts"]) {
    const std::string name = pr["name"];
    SCOPED_TRACE(name);
    const auto tokens = test::ids(pr["token_ids"]);
    const float tol = (!f16 || tokens.size() <= kShortPrompt) ? kTol : kTolF16Chaotic;
    TestSession s(model, opt);
    std::vector<float> all;
    const auto last = s.prefill(tokens, false, &all);
    const auto gl = test::read_f32(dir / (name + ".last_logits.f32"));
    const float err_last = max_abs_diff(last, gl);
    EXPECT_LT(err_last, tol);
    float err_all = 0.0f;
    if (std::filesystem::exists(dir / (name + ".prompt_all_logits.f32"))) {
      const auto ga = test::read_f32(dir / (name + ".prompt_all_logits.f32"));
      err_all = max_abs_diff(all, ga);
      EXPECT_LT(err_all, tol);
      if (f16) {
        const auto go = test::read_f32(other_dir / (name + ".prompt_all_logits.f32"));
        EXPECT_LT(rms_diff(all, ga), 0.35 * rms_diff(ga, go)) << "F16 rounding does not follow llama.cpp's";
      }
    }

    // Greedy: feed the argmax back; compare logits while our path equals the golden path.
    const auto gtok = test::ids(pr["greedy_token_ids"]);
    const bool has_steps = std::filesystem::exists(dir / (name + ".greedy_step_logits.f32"));
    std::vector<float> steps;
    if (has_steps) steps = test::read_f32(dir / (name + ".greedy_step_logits.f32"));
    const float step_tol = f16 ? kTolF16Chaotic : kTol;
    std::vector<float> cur(last.begin(), last.end());
    float err_steps = 0.0f;
    int same = 0;
    for (size_t i = 0; i < gtok.size(); ++i) {
      if (has_steps) {
        std::span<const float> row(steps.data() + i * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab));
        const float e = max_abs_diff(cur, row);
        err_steps = std::max(err_steps, e);
        EXPECT_LT(e, step_tol) << "step " << i;
        if (argmax(cur) != gtok[i]) {
          // Allowed only where the golden top1-top2 gap is within our measured logit error.
          EXPECT_LE(test::top_gap(row), 2 * e) << "greedy token differs at step " << i;
          break;
        }
      } else if (argmax(cur) != gtok[i]) {
        break;  // tiny-random: top gaps ~1e-3; its logits are compared above instead
      }
      ++same;
      const auto next = s.decode(gtok[i]);
      cur.assign(next.begin(), next.end());
    }
    if (has_steps) {
      EXPECT_EQ(same, static_cast<int>(gtok.size()));
    }
    fmt::print("[{} {} {}] max|dlogit| last {:.3g} prompt_all {:.3g} greedy_steps {:.3g}; greedy tokens equal {}/{}\n",
               c.model, c.kv, name, err_last, err_all, err_steps, same, gtok.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, LlamaGolden,
                         testing::Values(Case{"stories260K", "kv_f32"}, Case{"stories260K", "kv_f16"},
                                         Case{"llama-2-tiny-random", "kv_f32"}, Case{"llama-2-tiny-random", "kv_f16"}),
                         case_name);

}  // namespace
}  // namespace snapkv
