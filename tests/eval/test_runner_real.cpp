// Real-model checks of the eval (label slow: not under the sanitizers): the fork-based runner
// equals independent runs on SmolLM2 (Q4_1: quantized matmuls, where 8+ decode rows would round
// differently); skipped when the model is not in the cache.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace snapkv::eval
