// Attention kernels (blocked prefill, split-K decode) vs a naive double-precision
// reference on random ragged per-head caches: causal and sliding-window masks, GQA/MQA, F32/F16/Q8_0
// (Q8_0: the reference reads the dequantized rows, so only the f32 rounding of the kernel remains).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/attention.h"
#include "snapkv/error.h"
#include "support/attention_reference.h"

namespace snapkv {
namespace {

using test::AttnCase;
using Built = test::AttnInputs;

Built build(const AttnCase& c, uint64_t seed) { return test::make_attention_inputs(c, seed); }

// Naive attention in double; with an F16 cache the query is rounded to F16 first (as the kernel
// does, mimicking ggml). Returns [n_q][n_head][head_dim].
std::vector<double> reference(const AttnCase& c, const Built& b, float scale) {
  return test::naive_attention(c, b, scale);
}

class AttentionVsNaive : public testing::TestWithParam<AttnCase> {};

TEST_P(AttentionVsNaive, MatchesReference) {
  const AttnCase& c = GetParam();
  for (const int threads : {1, 2}) {
    const Built b = build(c, 42 + static_cast<uint64_t>(c.n_q));
    AttentionParams p{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
    AttentionWorkspace ws(p, c.n_q);
    std::vector<float> out(b.q.size(), -7.0f);
    attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, out.data(), ws, threads);
    const auto ref = reference(c, b, p.scale);
    // F32, and decode with F16: only f32 rounding. F16 prefill also rounds the probabilities to
    // F16 (ggml's V product).
    const double tol = (c.type != KVType::F16 || c.n_q == 1) ? 2e-5 : 2e-3;
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
    EXPECT_LT(worst, tol) << "threads " << threads;
    // Running it again gives bit-identical results (no races, deterministic reductions).
    std::vector<float> again(out.size());
    attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, again.data(), ws, threads);
    EXPECT_EQ(out, again);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionVsNaive,
    testing::Values(
        // decode (1 query): GQA, MQA (Gemma shape), many key blocks, ragged heads, windows
        AttnCase{8, 4, 8, 1, 300, 0, KVType::F32, 0.7}, AttnCase{8, 4, 8, 1, 300, 0, KVType::F16, 0.7},
        AttnCase{4, 1, 256, 1, 700, 0, KVType::F32, 1.0}, AttnCase{4, 1, 256, 1, 700, 0, KVType::F16, 0.9},
        AttnCase{4, 1, 256, 1, 700, 512, KVType::F16, 1.0}, AttnCase{6, 2, 12, 1, 50, 9, KVType::F32, 0.5},
        // prefill (several query blocks x key blocks): GQA, MQA, windows, odd head_dim, ragged
        AttnCase{8, 4, 8, 37, 300, 0, KVType::F32, 0.6}, AttnCase{8, 4, 8, 37, 300, 0, KVType::F16, 0.6},
        AttnCase{4, 1, 256, 40, 400, 0, KVType::F32, 1.0}, AttnCase{4, 1, 256, 40, 400, 0, KVType::F16, 1.0},
        AttnCase{4, 1, 64, 70, 200, 33, KVType::F32, 0.8}, AttnCase{4, 1, 64, 70, 200, 33, KVType::F16, 0.8},
        AttnCase{6, 3, 12, 17, 90, 5, KVType::F32, 0.4}, AttnCase{2, 2, 4, 5, 5, 0, KVType::F32, 1.0},
        // SmolLM2's GQA shape (3 query heads per KV head): query blocks with an odd number of rows
        AttnCase{9, 3, 64, 37, 3000, 0, KVType::F16, 0.9}, AttnCase{9, 3, 64, 37, 3000, 0, KVType::F32, 0.9},
        // head_dim a multiple of 32 other than 64, and one that is not (scalar P V path)
        AttnCase{4, 2, 32, 19, 500, 0, KVType::F32, 1.0}, AttnCase{4, 2, 72, 19, 500, 0, KVType::F16, 1.0},
        // F16 prefill over long key ranges: scores kept between the passes (5000), and a range
        // longer than the kept-scores cache (kScoreCacheMaxKeys = 65536: scores recomputed)
        AttnCase{4, 2, 64, 20, 5000, 0, KVType::F16, 1.0}, AttnCase{4, 2, 64, 20, 5000, 4500, KVType::F16, 1.0},
        AttnCase{2, 1, 64, 6, 70000, 0, KVType::F16, 1.0},
        // Q8_0 (head_dim a multiple of 32): decode and prefill, GQA/MQA, windows, ragged heads
        AttnCase{9, 3, 64, 1, 3000, 0, KVType::Q8_0, 0.9}, AttnCase{4, 1, 256, 1, 700, 512, KVType::Q8_0, 1.0},
        AttnCase{9, 3, 64, 37, 3000, 0, KVType::Q8_0, 0.9}, AttnCase{4, 1, 256, 40, 400, 0, KVType::Q8_0, 1.0},
        AttnCase{4, 1, 64, 70, 200, 33, KVType::Q8_0, 0.8}, AttnCase{4, 2, 32, 19, 500, 0, KVType::Q8_0, 0.6}));

TEST(Attention, QueryWithoutVisibleKeysGetsZeros) {
  // One head holding positions {0, 1, 2}; a window of 2 and a query at position 10 sees nothing.
  KVLayerCache cache;
  cache.window = 2;
  KVHeadCache h(KVType::F32, 4);
  const int32_t pos[3] = {0, 1, 2};
  std::vector<float> kv(12, 1.0f);
  h.append(3, pos, kv.data(), 4, kv.data(), 4);
  cache.heads.push_back(std::move(h));
  AttentionParams p{1, 1, 4, 0.5f, 2};
  AttentionWorkspace ws(p, 4);
  std::vector<float> q(8, 1.0f), out(8, 5.0f);
  const int32_t qpos[2] = {10, 11};
  attention(p, q.data(), qpos, 1, cache, out.data(), ws, 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], 0.0f);
  attention(p, q.data(), qpos, 2, cache, out.data(), ws, 2);
  for (const float x : out) EXPECT_EQ(x, 0.0f);
}

// A decode query over a head far longer than anything the workspace was sized for is exact: the
// split-K decode scratch depends on rows and heads only (a sequence may hold up to 2^30 positions).
TEST(Attention, DecodeScratchHasNoKeyBound) {
  for (const KVType type : {KVType::F32, KVType::F16, KVType::Q8_0}) {
    const AttnCase c{8, 4, type == KVType::Q8_0 ? 32 : 8, 1, 5000, 0, type, 0.9};
    const Built b = build(c, 5);
    AttentionParams p{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), 0};
    AttentionWorkspace small(p, 1);
    std::vector<float> out(b.q.size(), -7.0f);
    attention(p, b.q.data(), b.qpos.data(), 1, b.cache, out.data(), small, 2);
    const auto ref = reference(c, b, p.scale);
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
    EXPECT_LT(worst, type != KVType::F16 ? 2e-5 : 2e-3);
  }
}

TEST(Attention, RejectsMismatchedShapes) {
  KVLayerCache cache;
  cache.heads.emplace_back(KVType::F32, 4);
  AttentionParams p{2, 2, 4, 1.0f, 0};  // cache has 1 head, params say 2
  AttentionWorkspace ws(p, 2);
  std::vector<float> q(8), out(8);
  const int32_t qpos[1] = {0};
  EXPECT_THROW(attention(p, q.data(), qpos, 1, cache, out.data(), ws, 2), Error);
  AttentionParams p1{1, 1, 4, 1.0f, 0};
  AttentionWorkspace ws1(p1, 2);
  const int32_t qpos3[3] = {0, 1, 2};
  std::vector<float> q3(12), out3(12);
  EXPECT_THROW(attention(p1, q3.data(), qpos3, 3, cache, out3.data(), ws1, 2), Error);  // 3 > max_queries
  EXPECT_THROW(AttentionWorkspace(AttentionParams{3, 2, 4, 1.0f, 0}, 2), Error);        // 3 % 2 != 0
}

}  // namespace
}  // namespace snapkv
