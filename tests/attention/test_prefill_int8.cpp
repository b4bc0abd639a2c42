// The INT8 prefill kernel (PrefillAttention::Int8) against naive double-precision references on
// random ragged per-head caches (causal and sliding-window masks, GQA/MQA, F32/F16/Q8_0/Q4_0, odd
// query counts, long rows): (a) against attention with the kernel's quantization done in double —
// int8 queries and keys with one scale per 32 dims, values with one per row, the weights
// p_j x scale_v_j in 7 bits per block of 64 entries — a tight bound (what is left: the kernel's
// f32 sums and exponentials, and the rare weight that rounds the other way); (b) against exact
// attention — the whole int8 error, a loose bound recording its size. Plus: bit-identical for 1
// and 2 threads, for any split of the queries into chunks, and on a rerun; queries without
// visible keys give zeros; a NaN query (in any 32-dim group) gives NaN, a NaN key NaN where it is
// seen; block weights too small to scale, and a NaN value row no query sees, leave outputs finite
// and chunk-invariant; one head's entries do not leak into another's; outlier key channels cost
// only their group; head_dim % 32 != 0 or > 512 runs the exact kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/int8_dot.h"
#include "snapkv/prefill_attention.h"
#include "support/attention_reference.h"

namespace snapkv {
namespace {

using ICase = test::AttnCase;
using Built = test::AttnInputs;

// x[0..n) x mul quantized as the kernel does (f32 arithmetic, round to nearest even): q8 and the
// scale (0 for a zero row).
float quantize_i8(const float* x, int n, float mul, std::vector<int>& q8) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  amax *= mul;
  q8.assign(static_cast<size_t>(n), 0);
  if (!(amax > 0.0f)) return 0.0f;
  const float inv = 127.0f / amax * mul;
  for (int i = 0; i < n; ++i) q8[static_cast<size_t>(i)] = static_cast<int>(std::nearbyint(x[i] * inv));
  return amax / 127.0f;
}

// Attention with the INT8 kernel's quantization, in double, query and key scales per `group`
// dims (the kernel's 32; head_dim: one per row). [n_q][n_head][head_dim].
std::vector<double> int8_reference(const ICase& c, const Built& b, float scale, int group = 32) {
  const int G = c.n_head / c.n_head_kv, hd = c.head_dim;
  std::vector<double> out(static_cast<size_t>(c.n_q * c.n_head * hd), 0.0);
  std::vector<float> row(static_cast<size_t>(hd));
  std::vector<int> q8, v8;
  for (int64_t t = 0; t < c.n_q; ++t)
    for (int h = 0; h < c.n_head; ++h) {
      const KVHeadCache& hc = b.cache.heads[static_cast<size_t>(h / G)];
      // Queries and keys: one scale per `group` dims.
      std::vector<float> sq(static_cast<size_t>(hd / group));
      std::vector<int> g8;
      q8.assign(static_cast<size_t>(hd), 0);
      for (int g = 0; g < hd / group; ++g) {
        sq[static_cast<size_t>(g)] = quantize_i8(b.q.data() + (t * c.n_head + h) * hd + group * g, group, scale, g8);
        std::copy(g8.begin(), g8.end(), q8.begin() + group * g);
      }
      const int64_t qp = b.qpos[static_cast<size_t>(t)];
      std::vector<double> s(static_cast<size_t>(hc.size()), -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j < hc.size(); ++j) {
        const int64_t kp = hc.positions()[static_cast<size_t>(j)];
        if (kp > qp || (c.window > 0 && qp - kp >= c.window)) continue;
        hc.key_row(j, row.data());
        double sum = 0;
        for (int g = 0; g < hd / group; ++g) {
          const float skg = quantize_i8(row.data() + group * g, group, 1.0f, g8);
          int64_t dot = 0;
          for (int i = 0; i < group; ++i)
            dot += int64_t{q8[static_cast<size_t>(group * g + i)]} * g8[static_cast<size_t>(i)];
          sum += static_cast<double>(dot) * sq[static_cast<size_t>(g)] * skg;
        }
        s[static_cast<size_t>(j)] = sum;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      if (mx == -INFINITY) continue;
      double l = 0;
      std::vector<double> acc(static_cast<size_t>(hd), 0.0);
      for (int64_t kb = 0; kb < hc.size(); kb += 64) {
        const int64_t ke = std::min<int64_t>(hc.size(), kb + 64);
        std::vector<double> w(static_cast<size_t>(ke - kb), 0.0);
        std::vector<std::vector<int>> vq(static_cast<size_t>(ke - kb));
        double wmax = 0;
        for (int64_t j = kb; j < ke; ++j) {
          if (s[static_cast<size_t>(j)] == -INFINITY) continue;
          const double p = std::exp(s[static_cast<size_t>(j)] - mx);
          l += p;
          hc.value_row(j, row.data());
          const float sv = quantize_i8(row.data(), hd, 1.0f, vq[static_cast<size_t>(j - kb)]);
          w[static_cast<size_t>(j - kb)] = p * sv;
          wmax = std::max(wmax, p * sv);
        }
        if (!(wmax > 0)) continue;
        for (int64_t j = kb; j < ke; ++j) {
          const double w8 = std::nearbyint(127.0 * w[static_cast<size_t>(j - kb)] / wmax);
          if (w8 == 0) continue;
          for (int i = 0; i < hd; ++i)
            acc[static_cast<size_t>(i)] += wmax / 127.0 * w8 * vq[static_cast<size_t>(j - kb)][static_cast<size_t>(i)];
        }
      }
      double* o = out.data() + (t * c.n_head + h) * hd;
      for (int i = 0; i < hd; ++i) o[i] = acc[static_cast<size_t>(i)] / l;
    }
  return out;
}

// Largest |a - b|; infinite where either is NaN.
double worst_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    w = std::isnan(d) ? INFINITY : std::max(w, d);
  }
  return w;
}

class PrefillInt8VsNaive : public testing::TestWithParam<ICase> {
 protected:
  void SetUp() override {
    if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  }
};

TEST_P(PrefillInt8VsNaive, MatchesReference) {
  const ICase& c = GetParam();
  const Built b = test::make_attention_inputs(c, 7 + static_cast<uint64_t>(c.n_q));
  const AttentionParams p = test::attention_params(c);
  AttentionWorkspace ws(p, c.n_q, PrefillAttention::Int8);
  std::vector<float> out(b.q.size(), -7.0f);
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, out.data(), ws, 1);
  // (a) The kernel's quantization in double: left are f32 sums and exponentials (relative 7e-6)
  // and the odd 7-bit weight whose rounding they flip (one step: |v| / 127 x its share).
  const double d_int8 = worst_diff(out, int8_reference(c, b, p.scale));
  EXPECT_LT(d_int8, 4e-3);
  // (b) Exact attention: scores move by ~|q| |k| / 127 per row, values by 1/254 of a row's
  // largest, weights by 1/254 of a block's largest; outputs (|v| ~ 1) by a few 1e-2 at most.
  const double d_exact = worst_diff(out, test::naive_attention(c, b, p.scale));
  EXPECT_LT(d_exact, 0.08);
  RecordProperty("worst_vs_int8_reference", std::to_string(d_int8));
  RecordProperty("worst_vs_exact", std::to_string(d_exact));

  // Two threads and a rerun: the same bits.
  std::vector<float> two(out.size()), again(out.size());
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, two.data(), ws, 2);
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, again.data(), ws, 1);
  EXPECT_EQ(out, two);
  EXPECT_EQ(out, again);

  // Splits of the queries into two chunks of >= 2 (one query runs the decode kernel): the same bits.
  if (c.n_q >= 5)
    for (const int64_t cut : {c.n_q / 2 + 1, c.n_q - 2}) {
      std::vector<float> split(out.size(), -3.0f);
      const size_t row = static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim);
      attention(p, b.q.data(), b.qpos.data(), cut, b.cache, split.data(), ws, 2);
      attention(p, b.q.data() + static_cast<size_t>(cut) * row, b.qpos.data() + cut, c.n_q - cut, b.cache,
                split.data() + static_cast<size_t>(cut) * row, ws, 2);
      EXPECT_EQ(out, split) << "cut " << cut;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillInt8VsNaive,
    testing::Values(
        // SmolLM2 (9 / 3 / 64) and Gemma 3 (4 / 1 / 256) shapes, ragged heads, a window
        ICase{9, 3, 64, 37, 3000, 0, KVType::F16, 0.9}, ICase{4, 1, 256, 40, 400, 0, KVType::F32, 1.0},
        ICase{4, 1, 256, 33, 900, 512, KVType::F16, 1.0}, ICase{4, 1, 64, 70, 200, 33, KVType::F16, 0.8},
        // Q8_0 and Q4_0 caches, head_dim 32, a query block count that leaves a tail of rows
        ICase{4, 2, 32, 19, 500, 0, KVType::Q8_0, 0.6}, ICase{9, 3, 64, 45, 700, 0, KVType::Q4_0, 1.0},
        // many query heads per KV head, head_dim 128 / 96 / 512
        ICase{16, 2, 128, 9, 700, 0, KVType::F16, 1.0}, ICase{80, 1, 32, 3, 300, 0, KVType::F32, 1.0},
        ICase{6, 2, 96, 21, 333, 100, KVType::F32, 0.7}, ICase{2, 1, 512, 5, 150, 0, KVType::F16, 1.0},
        // two queries, an odd key count in the last block, and a long row (many key blocks)
        ICase{6, 3, 64, 2, 65, 0, KVType::F16, 1.0}, ICase{2, 1, 64, 6, 5000, 0, KVType::F16, 1.0}));

// Gemma 3's keys have a few channels far larger than the rest (docs/attention.md, "INT8 prefill"): here
// channel 7 of every key is +-60 against N(0, 1) elsewhere (head_dim 256, one KV head, 4 query
// heads), and the queries are small in dims 0-31. One scale per row would leave every channel
// steps of ~0.47; with scales per 32 dims only channel 7's group (which hardly counts here) pays.
// The kernel must stay within its usual rounding of exact attention and well inside what row
// scales give (the double reference with one scale per row).
TEST(PrefillInt8, OutlierKeyChannelsCostOnlyTheirGroup) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  const ICase c{4, 1, 256, 24, 300, 0, KVType::F16, 1.0};
  Built b = test::make_attention_inputs(c, 29);
  std::mt19937_64 rng(31);
  KVHeadCache& hc = b.cache.heads[0];
  std::vector<float> k(static_cast<size_t>(hc.size()) * 256), v(k.size());
  for (int64_t j = 0; j < hc.size(); ++j) {
    hc.key_row(j, k.data() + j * 256);
    hc.value_row(j, v.data() + j * 256);
    k[static_cast<size_t>(j) * 256 + 7] = (rng() & 1) ? 60.0f : -60.0f;
  }
  KVHeadCache outliers(KVType::F16, 256);
  outliers.append(hc.size(), hc.positions().data(), k.data(), 256, v.data(), 256);
  hc = std::move(outliers);
  // Dims 0-31 (channel 7's group) barely move the scores: what is left is the other groups'.
  for (size_t i = 0; i < b.q.size(); ++i)
    if (i % 256 < 32) b.q[i] *= 0.01f;
  const AttentionParams p = test::attention_params(c);
  AttentionWorkspace ws(p, c.n_q, PrefillAttention::Int8);
  std::vector<float> out(b.q.size());
  attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, out.data(), ws, 2);
  const std::vector<double> exact = test::naive_attention(c, b, p.scale);
  const double d_kernel = worst_diff(out, exact);
  std::vector<float> row_scales(out.size());
  const std::vector<double> r = int8_reference(c, b, p.scale, 256);
  for (size_t i = 0; i < r.size(); ++i) row_scales[i] = static_cast<float>(r[i]);
  const double d_rows = worst_diff(row_scales, exact);
  EXPECT_LT(worst_diff(out, int8_reference(c, b, p.scale)), 4e-3);
  EXPECT_LT(d_kernel, 0.05);
  EXPECT_LT(3 * d_kernel, d_rows) << "kernel " << d_kernel << ", one scale per row " << d_rows;
  RecordProperty("worst_vs_exact", std::to_string(d_kernel));
  RecordProperty("worst_row_scales_vs_exact", std::to_string(d_rows));
}

// Keys at positions 10..99 of two heads of 64 dims (F16), random, and queries at qpos.
Built small_case(uint64_t seed, const std::vector<int32_t>& qpos, int n_head) {
  Built b;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int g = 0; g < 2; ++g) {
    KVHeadCache h(KVType::F16, 64);
    std::vector<int32_t> pos;
    for (int32_t x = 10; x < 100; ++x) pos.push_back(x);
    std::vector<float> k(pos.size() * 64), v(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    h.append(static_cast<int64_t>(pos.size()), pos.data(), k.data(), 64, v.data(), 64);
    b.cache.heads.push_back(std::move(h));
  }
  b.qpos = qpos;
  b.q.resize(qpos.size() * static_cast<size_t>(n_head) * 64);
  for (auto& x : b.q) x = nd(rng);
  return b;
}

TEST(PrefillInt8, QueriesWithoutVisibleKeysGetZeros) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  // Queries at 3..6 see no key; the queries at 50, 51 see some.
  const AttentionParams p{4, 2, 64, 0.125f, 0};
  const Built b = small_case(3, {3, 4, 5, 6, 50, 51}, 4);
  AttentionWorkspace ws(p, 6, PrefillAttention::Int8), exact_ws(p, 6);
  std::vector<float> out(b.q.size(), -1.0f), exact(b.q.size(), -1.0f);
  attention(p, b.q.data(), b.qpos.data(), 6, b.cache, out.data(), ws, 2);
  attention(p, b.q.data(), b.qpos.data(), 6, b.cache, exact.data(), exact_ws, 2);
  for (size_t i = 0; i < 4 * 4 * 64; ++i) ASSERT_EQ(out[i], 0.0f) << i;
  double worst = 0, norm = 0;
  for (size_t i = 4 * 4 * 64; i < out.size(); ++i) {
    worst = std::max(worst, std::fabs(double{out[i]} - exact[i]));
    norm = std::max(norm, std::fabs(double{exact[i]}));
  }
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(norm, 0.1);
}

TEST(PrefillInt8, NaNQueryGivesNaNAndLeavesOthersAlone) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  const AttentionParams p{4, 2, 64, 0.125f, 0};
  const Built clean = small_case(5, {60, 61, 62}, 4);
  AttentionWorkspace ws(p, 3, PrefillAttention::Int8);
  std::vector<float> ref(clean.q.size());
  attention(p, clean.q.data(), clean.qpos.data(), 3, clean.cache, ref.data(), ws, 2);
  for (const size_t dim : {17, 50}) {  // the first and the second 32-dim group
    Built b = small_case(5, {60, 61, 62}, 4);
    b.q[(1 * 4 + 2) * 64 + dim] = NAN;  // token 1, query head 2 (KV head 1)
    std::vector<float> out(b.q.size());
    attention(p, b.q.data(), b.qpos.data(), 3, b.cache, out.data(), ws, 2);
    for (size_t r = 0; r < 12; ++r)
      for (size_t d = 0; d < 64; ++d) {
        const size_t i = r * 64 + d;
        if (r == 1 * 4 + 2)
          ASSERT_TRUE(std::isnan(out[i])) << dim << " " << d;
        else
          ASSERT_EQ(out[i], ref[i]) << dim << " " << r << " " << d;
      }
  }
}

// A NaN in dim 45 (the second 32-dim group) of KV head 1's key at position 70: the rows of that
// head whose queries see position 70 are NaN, every other row keeps its bits.
TEST(PrefillInt8, NaNKeyGivesNaNWhereSeen) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  const AttentionParams p{4, 2, 64, 0.125f, 0};
  const std::vector<int32_t> qpos{60, 75, 80};
  const Built clean = small_case(9, qpos, 4);
  Built b = small_case(9, qpos, 4);
  KVHeadCache& hc = b.cache.heads[1];
  std::vector<float> k(static_cast<size_t>(hc.size()) * 64), v(k.size());
  for (int64_t j = 0; j < hc.size(); ++j) {
    hc.key_row(j, k.data() + j * 64);
    hc.value_row(j, v.data() + j * 64);
  }
  k[(70 - 10) * 64 + 45] = NAN;  // keys start at position 10
  KVHeadCache with_nan(KVType::F16, 64);
  with_nan.append(hc.size(), hc.positions().data(), k.data(), 64, v.data(), 64);
  hc = std::move(with_nan);
  AttentionWorkspace ws(p, 3, PrefillAttention::Int8);
  std::vector<float> out(b.q.size()), ref(b.q.size());
  attention(p, b.q.data(), b.qpos.data(), 3, b.cache, out.data(), ws, 2);
  attention(p, clean.q.data(), clean.qpos.data(), 3, clean.cache, ref.data(), ws, 2);
  for (size_t t = 0; t < 3; ++t)
    for (size_t h = 0; h < 4; ++h)
      for (size_t d = 0; d < 64; ++d) {
        const size_t i = (t * 4 + h) * 64 + d;
        if (t > 0 && h >= 2)  // KV head 1, queries at 75 and 80
          ASSERT_TRUE(std::isnan(out[i])) << t << " " << h << " " << d;
        else
          ASSERT_EQ(out[i], ref[i]) << t << " " << h << " " << d;
      }
}

// Head 0 has 64 keys with infinite values in keys 6..63 (its outputs are inf / NaN, as exact
// attention's are); head 1 has 5 keys (its quantized block follows head 0's in the workspace, and
// its task runs on the thread that ran head 0's): its outputs must be finite and close to exact
// attention. (The INT8 kernel zeroes a block's entries past the head's last one and gives tail keys
// weight 0, so this mostly checks the per-head block layout.)
TEST(PrefillInt8, StaleValuesOfAnotherHeadDoNotLeak) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  EXPECT_LT(test::stale_values_head1_worst(PrefillAttention::Int8), 0.05);  // infinite where one is not finite
}

// One head, keys at positions 0..127 of 64 dims; key j = +c e_0 for j < 64 and -c e_0 after, so a
// query a e_0 scores +42.5 on block 0 and -42.5 on block 1: block 1's weights are e^-85 x its
// value scales, ~1e-39, below the smallest weight scale the kernel quantizes (kTinyMax: 127 / max
// would overflow). Value row 100 is NaN: no query before position 100 sees it. Queries at 90..99
// in one call and in two: finite, the same bits, and exact attention's values.
TEST(PrefillInt8, TinyBlockWeightsAndUnseenNaNValues) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  const AttentionParams p{1, 1, 64, 0.125f, 0};
  KVLayerCache cache;
  std::mt19937_64 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  KVHeadCache h(KVType::F32, 64);
  std::vector<int32_t> pos(128);
  std::vector<float> k(128 * 64, 0.0f), v(128 * 64);
  for (int j = 0; j < 128; ++j) {
    pos[static_cast<size_t>(j)] = j;
    k[static_cast<size_t>(j) * 64] = j < 64 ? 20.0f : -20.0f;
  }
  for (auto& x : v) x = nd(rng);
  for (int d = 0; d < 64; ++d) v[100 * 64 + static_cast<size_t>(d)] = NAN;
  h.append(128, pos.data(), k.data(), 64, v.data(), 64);
  cache.heads.push_back(std::move(h));
  std::vector<int32_t> qpos;
  for (int32_t t = 90; t < 100; ++t) qpos.push_back(t);
  std::vector<float> q(qpos.size() * 64, 0.0f);
  for (size_t t = 0; t < qpos.size(); ++t) q[t * 64] = 17.0f;  // 0.125 x 17 x 20 = 42.5
  AttentionWorkspace ws(p, 10, PrefillAttention::Int8), exact_ws(p, 10);
  std::vector<float> one(q.size()), two(q.size()), exact(q.size());
  attention(p, q.data(), qpos.data(), 10, cache, one.data(), ws, 2);
  attention(p, q.data(), qpos.data(), 4, cache, two.data(), ws, 2);
  attention(p, q.data() + 4 * 64, qpos.data() + 4, 6, cache, two.data() + 4 * 64, ws, 1);
  attention(p, q.data(), qpos.data(), 10, cache, exact.data(), exact_ws, 2);
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_TRUE(std::isfinite(one[i])) << i;
    EXPECT_NEAR(one[i], exact[i], 0.02) << i;  // the mean of block 0's values, int8-rounded
  }
  EXPECT_EQ(one, two);
}

TEST(PrefillInt8, ReportsItsInstructions) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) {
    EXPECT_STREQ(prefill_attention_isa(PrefillAttention::Int8, 64), "unsupported");
    return;
  }
  // The dot-product instruction this build compiled to (int8_dot.h): vpdpbusd on VNNI CPUs.
  const std::string isa = prefill_attention_isa(PrefillAttention::Int8, 64);
  EXPECT_TRUE(isa == "avx2-int8" || isa == "avx512vnni-int8" || isa == "avxvnni-int8") << isa;
  EXPECT_EQ(isa, attn::kInt8PrefillIsa);
  EXPECT_EQ(prefill_attention_isa(PrefillAttention::Int8, 512), isa);
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::Int8, 72), "f32");   // runs the exact kernel
  EXPECT_STREQ(prefill_attention_isa(PrefillAttention::Int8, 544), "f32");  // too
  EXPECT_EQ(prefill_attention_from_name("int8"), PrefillAttention::Int8);
  EXPECT_STREQ(prefill_attention_name(PrefillAttention::Int8), "int8");
}

TEST(PrefillInt8, OtherHeadDimsRunTheExactKernel) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  for (const ICase& c : {ICase{4, 2, 72, 19, 500, 0, KVType::F16, 1.0}, ICase{2, 1, 544, 7, 90, 0, KVType::F16, 1.0}}) {
    const Built b = test::make_attention_inputs(c, 5);
    const AttentionParams p = test::attention_params(c);
    AttentionWorkspace i8(p, c.n_q, PrefillAttention::Int8), exact(p, c.n_q);
    std::vector<float> o1(b.q.size()), o2(b.q.size());
    attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, o1.data(), i8, 2);
    attention(p, b.q.data(), b.qpos.data(), c.n_q, b.cache, o2.data(), exact, 2);
    EXPECT_EQ(o1, o2) << c.head_dim;
    EXPECT_EQ(i8.prefill_attention(), PrefillAttention::Int8);
  }
}

}  // namespace
}  // namespace snapkv
