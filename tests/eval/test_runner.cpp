// The fork-based runner: a press whose budget covers the whole prompt scores exactly as none,
// sample by sample; one prefill + forks gives what independent runs (a fresh prefill with the
// press, decoded alone) give, for every protocol (reselect: with the cold tier) and the fidelity
// measure (stories260K; SmolLM2: test_runner_real.cpp, without reselect).
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "eval/runner.h"
#include "eval/tasks.h"
#include "eval_test_util.h"
#include "runner_check.h"
#include "support/synthetic_model.h"

namespace snapkv::eval {
namespace {

const std::vector<Case> kTinyCases = {
    {"niah_single_1", 640, -1},   {"niah_single_2", 640, -1}, {"niah_multikey_1", 640, -1},
    {"niah_multiquery", 640, -1}, {"fwe", 640, -1},           {"niah_grid", 640, 0.5}};

TEST(Runner, PressWithBudgetCoveringThePromptScoresExactlyAsNone) {
  auto e = etest::stories();
  Workspace ws(*e);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  RunnerOptions ro;
  ro.gen_tokens = 24;
  Runner run(*e, ws, ro);
  const auto ps = presses({"none", "snapkv:budget=100000", "knorm:budget=4096,window=8", "tova:ratio=0"});
  for (const Sample& s : samples(g, kTinyCases, 2)) {
    for (Protocol p : {Protocol::Aware, Protocol::Agnostic, Protocol::Multi, Protocol::Reselect, Protocol::Followup}) {
      const auto recs = run.run(s, ps, p);
      const size_t nq = multi_question(p) ? s.questions.size() : 1;
      ASSERT_EQ(recs.size(), ps.size() * nq) << s.id;
      for (size_t k = 0; k < recs.size(); ++k) {
        const Record& none = recs[k % nq];  // press-major: the first nq records are none's
        EXPECT_EQ(none.press_name, "none");
        EXPECT_FALSE(recs[k].compressed) << recs[k].press;
        EXPECT_EQ(recs[k].kv_cache_bytes, none.kv_cache_bytes) << recs[k].press;
        expect_same(recs[k], none, s.id + " " + protocol_name(p));
      }
    }
  }
}

TEST(Runner, ForkBasedEqualsIndependentRunsTiny) {
  auto e = etest::stories();
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  std::vector<Case> cases = kTinyCases;
  cases.push_back({"fidelity", 640, -1});
  const auto ps = presses({"none", "snapkv:budget=64,window=16", "streamingllm:budget=48", "tova:budget=80,window=8",
                           "h2o:budget=64,window=8", "adakv:ratio=0.5", "pyramidkv:ratio=0.75,window=16",
                           "knorm:budget=100,window=4", "random:ratio=0.5"});
  fork_equals_independent(
      *e, samples(g, cases, 1), ps, 24,
      {Protocol::Aware, Protocol::Agnostic, Protocol::Multi, Protocol::Reselect, Protocol::Followup});
}

// --reference-kv-type: the fidelity reference is a full cache of another element type, prefilled
// on its own (here f16 measured against f32): the full f16 cache now differs a little from it; a
// compressed f16 cache differs more; against its own type the full cache's KL is exactly 0.
// The fidelity records of one stories260K sample, presses none and snapkv (budget 64), run with
// options oa and then ob.
std::pair<std::vector<Record>, std::vector<Record>> fidelity_runs(const RunnerOptions& oa, const RunnerOptions& ob) {
  auto e = etest::stories();
  Workspace ws(*e);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  const auto s = samples(g, {{"fidelity", 640, -1}}, 1).at(0);
  const auto ps = presses({"none", "snapkv:budget=64,window=16"});
  auto a = Runner(*e, ws, oa).run(s, ps, Protocol::Continuation);
  auto b = Runner(*e, ws, ob).run(s, ps, Protocol::Continuation);
  return {std::move(a), std::move(b)};
}

TEST(Runner, FidelityAgainstAReferenceOfAnotherKvType) {
  RunnerOptions same, cross;
  cross.reference_kv_type = KVType::F32;  // kv_type stays F16
  const auto [a, b] = fidelity_runs(same, cross);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[0].fidelity.kl, 0.0);
  EXPECT_GT(b[0].fidelity.kl, 0.0);
  EXPECT_LT(b[0].fidelity.kl, 1e-3);
  EXPECT_GT(b[1].fidelity.kl, b[0].fidelity.kl);
  EXPECT_EQ(b[0].kv_cache_bytes, a[0].kv_cache_bytes);  // the measured caches are f16 in both runs
  // The f16 caches are the same in both runs: the compressed row's perplexity does not change.
  EXPECT_DOUBLE_EQ(b[1].fidelity.ppl, a[1].fidelity.ppl);
}

// --fidelity-chunk 1: the continuation goes one token per call (through the decode kernel); the
// same positions are scored, the full cache's KL stays exactly 0 (the reference is fed the same
// way), and a compressed row's numbers move only by the two kernels' f32 rounding.
TEST(Runner, FidelityOneTokenPerCallScoresTheSamePositions) {
  RunnerOptions one;
  one.fidelity_chunk = 1;
  const auto [a, b] = fidelity_runs(RunnerOptions{}, one);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].fidelity.kl, 0.0);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(b[k].fidelity.n, a[k].fidelity.n) << a[k].press;
    EXPECT_GT(b[k].fidelity.n, 0) << a[k].press;
    EXPECT_NEAR(b[k].fidelity.ppl, a[k].fidelity.ppl, 1e-3 * a[k].fidelity.ppl) << a[k].press;
    EXPECT_NEAR(b[k].fidelity.kl, a[k].fidelity.kl, 1e-4 + 1e-2 * a[k].fidelity.kl) << a[k].press;
  }
  EXPECT_GT(b[1].fidelity.kl, 0.0);
}

// --prefill-attn bf16 / int8: the fidelity reference stays exact. On a head_dim-32 model (the
// shapes both kernels take) a workspace with prefill attention `a` gives the same reference
// perplexity, bit for bit, as an exact one: its reference is prefilled and teacher-forced on its
// own in an exact workspace; the measured caches (none included) are `a`'s, so even the `none` row
// differs from the reference (KL > 0: the rounding alone).
void expect_fidelity_reference_stays_exact(PrefillAttention a) {
  auto e = load_synthetic_engine(small_q8_kv_config(), 2);
  ASSERT_EQ(e->info().head_dim % 32, 0);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  const auto s = samples(g, {{"fidelity", 640, -1}}, 1).at(0);
  const auto ps = presses({"none", "snapkv:budget=64,window=16"});
  Workspace exact_ws(*e);
  WorkspaceOptions wo;
  wo.prefill_attention = a;
  Workspace other_ws(*e, wo);
  ASSERT_EQ(exact_ws.prefill_attention(), PrefillAttention::Exact);
  ASSERT_EQ(other_ws.prefill_attention(), a);
  const auto x = Runner(*e, exact_ws).run(s, ps, Protocol::Continuation);
  const auto y = Runner(*e, other_ws).run(s, ps, Protocol::Continuation);
  ASSERT_EQ(x.size(), 2u);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(x[0].fidelity.kl, 0.0);  // exact against exact: the same cache
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_GT(y[k].fidelity.n, 0) << y[k].press;
    EXPECT_EQ(y[k].fidelity.ppl_full, x[k].fidelity.ppl_full) << y[k].press;  // the exact reference
    EXPECT_TRUE(std::isfinite(y[k].fidelity.kl)) << y[k].press;
    EXPECT_GE(y[k].fidelity.kl, 0.0) << y[k].press;
  }
  EXPECT_GT(y[0].fidelity.kl, 0.0);  // the rounding alone moves the distribution (the kernel really ran)
  EXPECT_LT(y[0].fidelity.kl, 0.05);
}

TEST(Runner, FidelityReferenceStaysExactUnderBf16PrefillAttention) {
  if (!prefill_attention_supported(PrefillAttention::BF16)) GTEST_SKIP() << "this build has no AVX512-BF16";
  expect_fidelity_reference_stays_exact(PrefillAttention::BF16);
}

TEST(Runner, FidelityReferenceStaysExactUnderInt8PrefillAttention) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  expect_fidelity_reference_stays_exact(PrefillAttention::Int8);
}

TEST(Runner, ProtocolMustFitTheSampleAndSkipDropsWork) {
  auto e = etest::stories();
  Workspace ws(*e);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  RunnerOptions ro;
  ro.gen_tokens = 4;
  Runner run(*e, ws, ro);
  const auto ps = presses({"none", "snapkv:budget=64,window=16"});
  const Sample fid = g.make({"fidelity", 512, 1, 0, -1});
  const Sample niah = g.make({"niah_single_2", 512, 1, 0, -1});
  EXPECT_THROW(run.run(fid, ps, Protocol::Aware), Error);
  EXPECT_THROW(run.run(niah, ps, Protocol::Continuation), Error);
  const auto recs = run.run(niah, ps, Protocol::Aware, [](size_t press, int) { return press == 0; });
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].press_name, "snapkv");
  EXPECT_TRUE(recs[0].compressed);
  EXPECT_LT(recs[0].kv_cache_bytes, recs[0].kv_cache_bytes_full);
  EXPECT_TRUE(run.run(niah, ps, Protocol::Aware, [](size_t, int) { return true; }).empty());
  // The canonical spec of a record names every key.
  EXPECT_EQ(recs[0].press.rfind("snapkv:budget=64,window=16,", 0), 0u) << recs[0].press;
  const auto j = recs[0].to_json();
  EXPECT_EQ(record_key(nlohmann::json::parse(j.dump())), recs[0].key());
}

}  // namespace
}  // namespace snapkv::eval
