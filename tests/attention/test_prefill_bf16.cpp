// The BF16 prefill kernel (PrefillAttention::BF16) against a naive double-precision reference on
// random ragged per-head caches (causal and sliding-window masks, GQA/MQA, F32/F16/Q8_0, odd query
// counts, long rows): (a) against attention over the same inputs rounded to bfloat16 — only the
// probabilities' rounding and f32 sums remain, a tight bound; (b) against exact attention — the
// whole bf16 error, a loose bound recording its size. Plus: bit-identical for 1 and 2 threads, for
// any split of the queries into chunks, and on a rerun; queries without visible keys give zeros;
// head_dim % 32 != 0 runs the exact kernel. Where the CPU has AMX-BF16, every case runs twice: on
// AMX tiles and on AVX512-BF16 vectors (the two agree up to f32 summation order).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/amx.h"
#include "attention/attention.h"
#include "snapkv/prefill_attention.h"
#include "support/attention_reference.h"

namespace snapkv {
namespace {

using BCase = test::AttnCase;
using Built = test::AttnInputs;

Built build(const BCase& c, uint64_t seed) { return test::make_attention_inputs(c, seed); }

// Naive attention in double; with `bf16` the pre-scaled query, the keys and the values are rounded
// to bfloat16 first, without it the query is rounded as the exact kernel does. [n_q][n_head][head_dim].
std::vector<double> reference(const BCase& c, const Built& b, float scale, bool bf16) {
  return test::naive_attention(c, b, scale, bf16 ? test::RefRounding::BF16 : test::RefRounding::Kernel);
}

double worst_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

AttentionParams params(const BCase& c) { return test::attention_params(c); }

class PrefillBF16VsNaive : public testing::TestWithParam<BCase> {
 protected:
  void SetUp() override {
    if (!prefill_attention_supported(PrefillAttention::BF16)) GTEST_SKIP() << "this build has no AVX512-BF16";
  }
};

// Runs the BF16 kernel on AVX512-BF16 vectors instead of AMX tiles while alive.
struct NoAmx {
  NoAmx() { attn::set_amx_disabled(true); }
  ~NoAmx() { attn::set_amx_disabled(false); }
  NoAmx(const NoAmx&) = delete;
  NoAmx& operator=(const NoAmx&) = delete;
};

// The checks of one case with the kernel's current instruction set; returns its output.
std::vector<float> check_case(const BCase& c) {
  const Built b = build(c, 7 + static_cast<uint64_t>(c.n_q));
  const AttentionParams p = params(c);
  AttentionWorkspace ws(p, c.n_q, PrefillAttention::BF16);
  std::vector<float> out(b.q.size(), -7.0f);
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, out.data(), ws, 1);
  // (a) Inputs rounded as the kernel rounds them: what is left is the probabilities' rounding to
  // bf16 (relative 2^-9 each, averaging out over many keys) and f32 sums.
  const double d_rounded = worst_diff(out, reference(c, b, p.scale, true));
  EXPECT_LT(d_rounded, 6e-3);
  // (b) Exact attention: scores move by ~2^-8 |q| |k|; outputs (|v| ~ 1) by a few 1e-2 at most.
  const double d_exact = worst_diff(out, reference(c, b, p.scale, false));
  EXPECT_LT(d_exact, 0.05);
  testing::Test::RecordProperty("worst_vs_rounded", std::to_string(d_rounded));
  testing::Test::RecordProperty("worst_vs_exact", std::to_string(d_exact));

  // Two threads and a rerun: the same bits.
  std::vector<float> two(out.size()), again(out.size());
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, two.data(), ws, 2);
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, again.data(), ws, 1);
  EXPECT_EQ(out, two);
  EXPECT_EQ(out, again);

  // Any split of the queries into chunks of >= 2: the same bits.
  if (c.n_q >= 5) {  // both chunks >= 2 queries (one query runs the decode kernel)
    const int64_t cut = c.n_q / 2 + 1;
    std::vector<float> split(out.size(), -3.0f);
    const size_t row = static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim);
    attention(p, b.q.data(), b.qpos.data(), cut, b.cache, split.data(), ws, 2);
    attention(p, b.q.data() + static_cast<size_t>(cut) * row, b.qpos.data() + cut, c.n_q - cut, b.cache,
              split.data() + static_cast<size_t>(cut) * row, ws, 2);
    EXPECT_EQ(out, split);
  }
  return out;
}

TEST_P(PrefillBF16VsNaive, MatchesReference) {
  const BCase& c = GetParam();
  if (attn::amx_usable()) {
    std::vector<float> tiles, vectors;
    {
      SCOPED_TRACE("AMX tiles");
      tiles = check_case(c);
    }
    {
      SCOPED_TRACE("AVX512-BF16 vectors");
      NoAmx off;
      ASSERT_FALSE(attn::amx_usable());
      vectors = check_case(c);
    }
    // Same bf16 operands and probabilities up to a rare rounding flip of a probability whose score
    // moved in the last f32 bit: outputs (|v| ~ 1) within a few bf16 steps.
    double w = 0;
    for (size_t i = 0; i < tiles.size(); ++i) w = std::max(w, static_cast<double>(std::fabs(tiles[i] - vectors[i])));
    EXPECT_LT(w, 2e-3);
    RecordProperty("worst_amx_vs_avx512", std::to_string(w));
  } else {
    check_case(c);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillBF16VsNaive,
    testing::Values(
        // SmolLM2 (9 / 3 / 64) and Gemma 3 (4 / 1 / 256) shapes, ragged heads, a window
        BCase{9, 3, 64, 37, 3000, 0, KVType::F16, 0.9}, BCase{4, 1, 256, 40, 400, 0, KVType::F32, 1.0},
        BCase{4, 1, 256, 33, 900, 512, KVType::F16, 1.0}, BCase{4, 1, 64, 70, 200, 33, KVType::F16, 0.8},
        // Q8_0, head_dim 32 (one pair chunk), a query block count that leaves a tail of rows
        BCase{4, 2, 32, 19, 500, 0, KVType::Q8_0, 0.6}, BCase{9, 3, 64, 45, 700, 0, KVType::Q8_0, 1.0},
        // many query heads per KV head (R > 64 rows: several chunk groups), head_dim 128 / 96
        BCase{16, 2, 128, 9, 700, 0, KVType::F16, 1.0}, BCase{80, 1, 32, 3, 300, 0, KVType::F32, 1.0},
        BCase{6, 2, 96, 21, 333, 100, KVType::F32, 0.7},
        // two queries, an odd key count in the last block, and a long row (many key blocks)
        BCase{6, 3, 64, 2, 65, 0, KVType::F16, 1.0}, BCase{2, 1, 64, 6, 5000, 0, KVType::F16, 1.0},
        // more than 128 query heads per KV head (one token per task, 144 padded rows), and
        // head_dim > 512 (the queries are packed in pieces of 512)
        BCase{136, 1, 32, 3, 100, 0, KVType::F32, 1.0}, BCase{2, 1, 544, 7, 90, 0, KVType::F16, 1.0}));

// Runs `check` on every instruction set the BF16 kernel has here (AMX tiles, AVX512-BF16 vectors).
template <typename F>
void on_each_path(F check) {
  if (attn::amx_usable()) {
    SCOPED_TRACE("AMX tiles");
    check();
  }
  SCOPED_TRACE("AVX512-BF16 vectors");
  NoAmx off;
  check();
}

TEST(PrefillBF16, QueriesWithoutVisibleKeysGetZeros) {
  if (!prefill_attention_supported(PrefillAttention::BF16)) GTEST_SKIP() << "this build has no AVX512-BF16";
  on_each_path([] {
    // Keys at positions 10..99; queries at 3..6 see none, the queries at 50, 51 see some.
    const AttentionParams p{4, 2, 64, 0.125f, 0};
    KVLayerCache cache;
    std::mt19937_64 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int g = 0; g < 2; ++g) {
      KVHeadCache h(KVType::F16, 64);
      std::vector<int32_t> pos;
      for (int32_t x = 10; x < 100; ++x) pos.push_back(x);
      std::vector<float> k(pos.size() * 64), v(k.size());
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      h.append(static_cast<int64_t>(pos.size()), pos.data(), k.data(), 64, v.data(), 64);
      cache.heads.push_back(std::move(h));
    }
    const std::vector<int32_t> qpos{3, 4, 5, 6, 50, 51};
    std::vector<float> q(qpos.size() * 4 * 64);
    for (auto& x : q) x = nd(rng);
    AttentionWorkspace ws(p, 6, PrefillAttention::BF16);
    std::vector<float> out(q.size(), -1.0f);
    attention(p, q.data(), qpos.data(), 6, cache, out.data(), ws, 2);
    for (size_t i = 0; i < 4 * 4 * 64; ++i) ASSERT_EQ(out[i], 0.0f) << i;
    // The two queries that see keys: the exact kernel's values up to bf16 rounding.
    AttentionWorkspace exact_ws(p, 6);
    std::vector<float> exact(q.size(), -1.0f);
    attention(p, q.data(), qpos.data(), 6, cache, exact.data(), exact_ws, 2);
    double worst = 0, norm = 0;
    for (size_t i = 4 * 4 * 64; i < out.size(); ++i) {
      worst = std::max(worst, std::fabs(double{out[i]} - exact[i]));
      norm = std::max(norm, std::fabs(double{exact[i]}));
    }
    EXPECT_LT(worst, 0.03);
    EXPECT_GT(norm, 0.1);
  });
}

// A block's value pairs past its last key hold the previous block's (or another head's) values: with
// an infinite value there, a zero probability times it would be NaN. Head 0 has 64 keys with
// infinite values in keys 6..63 (its outputs are inf / NaN, as exact attention's are); head 1, run
// after it on the same thread, has 5 keys (3 value pairs): its outputs must be finite and match
// exact attention.
TEST(PrefillBF16, StaleValuesOfAnotherHeadDoNotLeak) {
  if (!prefill_attention_supported(PrefillAttention::BF16)) GTEST_SKIP() << "this build has no AVX512-BF16";
  // Infinite where an output is not finite.
  on_each_path([] { EXPECT_LT(test::stale_values_head1_worst(PrefillAttention::BF16), 0.03); });
}

TEST(PrefillBF16, ReportsItsInstructions) {
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::Exact, 64), "f32");
  EXPECT_STREQ(prefill_attention_isa(static_cast<PrefillAttention>(7), 64), "unsupported");
  if (!prefill_attention_supported(PrefillAttention::BF16)) {
    EXPECT_STREQ(prefill_attention_isa(PrefillAttention::BF16, 64), "unsupported");
    return;
  }
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::BF16, 64), attn::amx_usable() ? "amx-bf16" : "avx512-bf16");
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::BF16, 72), "f32");  // runs the exact kernel
  NoAmx off;
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::BF16, 64), "avx512-bf16");
}

TEST(PrefillBF16, OtherHeadDimsRunTheExactKernel) {
  if (!prefill_attention_supported(PrefillAttention::BF16)) GTEST_SKIP() << "this build has no AVX512-BF16";
  const BCase c{4, 2, 72, 19, 500, 0, KVType::F16, 1.0};
  const Built b = build(c, 5);
  const AttentionParams p = params(c);
  AttentionWorkspace bf(p, c.n_q, PrefillAttention::BF16), exact(p, c.n_q);
  std::vector<float> o1(b.q.size()), o2(b.q.size());
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, o1.data(), bf, 2);
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, o2.data(), exact, 2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(exact.prefill_attention(), PrefillAttention::Exact);
  EXPECT_EQ(bf.prefill_attention(), PrefillAttention::BF16);
}

}  // namespace
}  // namespace snapkv
