// Real-model checks of the eval (label slow: not under the sanitizers): the fork-based runner
// equals independent runs on SmolLM2 (Q4_1: quantized matmuls, where 8+ decode rows would round
// differently), and the fidelity reference of another KV element type (q8_0 measured against an
// f16 full cache); skipped when the model is not in the cache.
#include <gtest/gtest.h>

#include <cstdio>

#include "eval_test_util.h"
#include "runner_check.h"

namespace snapkv::eval {
namespace {

TEST(Runner, ForkBasedEqualsIndependentRunsSmolLM2) {
  auto e = etest::smollm2();
  if (!e) GTEST_SKIP() << "SmolLM2 not in the model cache (scripts/get-model.sh smollm2)";
  PromptFormat pf(*e, ChatMode::Auto);
  Generator g(pf);
  // niah_multikey_1: multi asks its 4 keys from copies of one compressed state.
  const auto ss = samples(g, {{"niah_multikey_1", 1024, -1}, {"fidelity", 1024, -1}}, 1);
  const auto ps = presses({"none", "snapkv:ratio=0.75", "h2o:ratio=0.5"});
  fork_equals_independent(*e, ss, ps, 8);
}

// --kv-type q8_0 --reference-kv-type f16: the full q8_0 cache now differs from its reference a
// little (KL > 0, most argmaxes agree), a compressed one more; with the reference of the same type
// the full cache's KL is exactly 0.
TEST(Runner, FidelityAgainstAnF16ReferenceSmolLM2) {
  auto e = etest::smollm2();
  if (!e) GTEST_SKIP() << "SmolLM2 not in the model cache (scripts/get-model.sh smollm2)";
  PromptFormat pf(*e, ChatMode::Auto);
  Generator g(pf);
  const auto ss = samples(g, {{"fidelity", 1024, -1}}, 1);
  const auto ps = presses({"none", "snapkv:ratio=0.75"});
  Workspace ws(*e);
  RunnerOptions same, cross;
  same.kv_type = cross.kv_type = KVType::Q8_0;
  cross.reference_kv_type = KVType::F16;
  const auto a = Runner(*e, ws, same).run(ss[0], ps, Protocol::Continuation);
  const auto b = Runner(*e, ws, cross).run(ss[0], ps, Protocol::Continuation);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[0].fidelity.kl, 0.0);
  EXPECT_GT(b[0].fidelity.kl, 0.0);
  EXPECT_LT(b[0].fidelity.kl, 0.05);
  EXPECT_GT(b[0].fidelity.top1, 0.9);
  EXPECT_GT(b[1].fidelity.kl, b[0].fidelity.kl);  // compressed and quantized: further away
  EXPECT_EQ(b[0].kv_cache_bytes, a[0].kv_cache_bytes);

  // q4_0 against the same f16 reference: further away than q8_0 (16x coarser steps), in 18 / 34
  // of q8_0's bytes.
  RunnerOptions q4;
  q4.kv_type = KVType::Q4_0;
  q4.reference_kv_type = KVType::F16;
  const auto c = Runner(*e, ws, q4).run(ss[0], ps, Protocol::Continuation);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_GT(c[0].fidelity.kl, b[0].fidelity.kl);
  EXPECT_EQ(c[0].kv_cache_bytes * 34, b[0].kv_cache_bytes * 18);

  // q8_0 keys with q4_0 values (--kv-type-v q4_0): the values' 4-bit rounding costs far less than
  // the keys' (docs/quality.md), so the full cache lands between q8_0 and q4_0, nearer q8_0, in
  // (34 + 18) / (2 x 34) of q8_0's bytes.
  RunnerOptions mixed = q4;
  mixed.kv_type = KVType::Q8_0;
  mixed.kv_type_v = KVType::Q4_0;
  const auto d = Runner(*e, ws, mixed).run(ss[0], ps, Protocol::Continuation);
  ASSERT_EQ(d.size(), 2u);
  std::printf("full cache KL vs f16: q8_0 %.5f, q8_0/q4_0 %.5f, q4_0 %.5f\n", b[0].fidelity.kl, d[0].fidelity.kl,
              c[0].fidelity.kl);
  EXPECT_GT(d[0].fidelity.kl, b[0].fidelity.kl);
  EXPECT_LT(d[0].fidelity.kl, c[0].fidelity.kl / 3);
  EXPECT_GT(d[0].fidelity.top1, 0.85);
  EXPECT_EQ(d[0].kv_cache_bytes * 68, b[0].kv_cache_bytes * 52);
}

}  // namespace
}  // namespace snapkv::eval
