// Split-K decode attention (attention/decode.h) vs a double-precision reference on random ragged
// caches (F16/F32/Q8_0, GQA 1-8, head_dim 32-256, 1 to 70K keys across the split boundaries, sliding
// windows, queries that see nothing), plus the properties the engine relies on: a row's output is
// bit-identical alone or in any batch and for any thread count, the workspace does not depend on
// the cache length, and bad inputs throw.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention/decode.h"
#include "attention/decode_q8_keys.h"
#include "attention/decode_simd.h"
#include "core/fp16.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using Split = DecodeWorkspace;

struct DecCase {
  int n_head_kv, group, head_dim;
  KVType type;
  int64_t n_keys;    // entries of KV head 0 (the others hold fewer: ragged)
  double keep_prob;  // probability that a position is stored (gapped, per-head position sets)
  int window;        // 0 = full causal
  int64_t q_back;    // the query sits this many positions before the last stored one (later keys are future)
  float k_scale;     // key magnitude: larger = peakier softmax (many probabilities underflow to 0)
};

void PrintTo(const DecCase& c, std::ostream* os) {
  *os << "n_head_kv " << c.n_head_kv << " G " << c.group << " head_dim " << c.head_dim << " " << kv_type_name(c.type)
      << " keys " << c.n_keys << " keep " << c.keep_prob << " window " << c.window << " q_back " << c.q_back
      << " k_scale " << c.k_scale;
}

AttentionParams params(const DecCase& c) {
  return {c.n_head_kv * c.group, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
}

/// One sequence: its cache (head g holds about n_keys * (1 - g / (2 n_head_kv)) entries at its own
/// positions), its query and the query position.
struct Seq {
  KVLayerCache cache;
  std::vector<float> q;
  int32_t pos = 0;
};

Seq make_seq(const DecCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  Seq s;
  s.cache.window = c.window;
  int32_t last = 0;
  for (int g = 0; g < c.n_head_kv; ++g) {
    const auto want = std::max<int64_t>(1, c.n_keys - c.n_keys * g / (2 * c.n_head_kv));
    std::vector<int32_t> pos;
    for (int32_t p = 0; static_cast<int64_t>(pos.size()) < want; ++p)
      if (ud(rng) < c.keep_prob) pos.push_back(p);
    last = std::max(last, pos.back());
    std::vector<float> k(pos.size() * static_cast<size_t>(c.head_dim)), v(k.size());
    for (auto& x : k) x = nd(rng) * c.k_scale;
    for (auto& x : v) x = nd(rng);
    KVHeadCache h(c.type, c.head_dim);
    h.append(static_cast<int64_t>(pos.size()), pos.data(), k.data(), c.head_dim, v.data(), c.head_dim);
    s.cache.heads.push_back(std::move(h));
  }
  s.q.resize(static_cast<size_t>(c.n_head_kv * c.group * c.head_dim));
  for (auto& x : s.q) x = nd(rng);
  s.pos = static_cast<int32_t>(last - c.q_back);
  return s;
}

/// Naive attention in double; with an F16 cache the query is rounded to F16 first, over Q8_0 keys
/// to int16 where the kernel's int16 path takes it (as the kernel does). [n_head][head_dim]; zeros
/// for a head without a visible key.
std::vector<double> reference(const AttentionParams& p, const Seq& s) {
  const int G = p.n_head / p.n_head_kv, hd = p.head_dim;
  std::vector<double> out(static_cast<size_t>(p.n_head * hd), 0.0);
  std::vector<float> row(static_cast<size_t>(hd));
  for (int h = 0; h < p.n_head; ++h) {
    const KVHeadCache& hc = s.cache.heads[static_cast<size_t>(h / G)];
    const float* q = s.q.data() + static_cast<size_t>(h) * hd;
    // Over Q8_0 keys the kernel may round the query to int16 (attention/decode_q8_keys.h).
    std::vector<float> q_i16(static_cast<size_t>(hd));
    if (hc.k_type() == KVType::Q8_0 && attn::query_i16_values(q, hd, q_i16.data())) q = q_i16.data();
    std::vector<double> sc;
    std::vector<int64_t> idx;
    for (int64_t j = 0; j < hc.size(); ++j) {
      const int64_t kp = hc.positions()[static_cast<size_t>(j)];
      if (kp > s.pos || (p.window > 0 && s.pos - kp >= p.window)) continue;
      hc.key_row(j, row.data());
      double d = 0;
      for (int i = 0; i < hd; ++i) {
        const float qi = hc.k_type() == KVType::F16 ? fp16_to_fp32(fp32_to_fp16(q[i])) : q[i];
        d += static_cast<double>(qi) * row[static_cast<size_t>(i)];
      }
      sc.push_back(p.scale * d);
      idx.push_back(j);
    }
    if (sc.empty()) continue;
    const double mx = *std::max_element(sc.begin(), sc.end());
    double sum = 0;
    for (auto& x : sc) sum += (x = std::exp(x - mx));
    double* o = out.data() + static_cast<size_t>(h) * hd;
    for (size_t j = 0; j < sc.size(); ++j) {
      hc.value_row(idx[j], row.data());
      for (int i = 0; i < hd; ++i) o[i] += sc[j] / sum * row[static_cast<size_t>(i)];
    }
  }
  return out;
}

std::vector<float> run_alone(const AttentionParams& p, const Seq& s, int threads) {
  DecodeWorkspace ws(p, 1);
  std::vector<float> out(s.q.size(), -7.0f);
  const DecodeQuery row{s.q.data(), s.pos, &s.cache, out.data()};
  attention_decode(p, {&row, 1}, ws, threads);
  return out;
}

class DecodeVsReference : public testing::TestWithParam<DecCase> {};

TEST_P(DecodeVsReference, MatchesAndIsThreadIndependent) {
  const DecCase& c = GetParam();
  const AttentionParams p = params(c);
  const Seq s = make_seq(c, 1234 + static_cast<uint64_t>(c.n_keys));
  const auto out = run_alone(p, s, 1);
  const auto ref = reference(p, s);
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
  // f32 scores and accumulation only (the query's F16 rounding is in the reference). The scores'
  // rounding error grows with their magnitude: measured <= 9e-7 for k_scale 2, 6.5e-6 (AVX-512)
  // and 2.1e-5 (scalar build, one sequential f32 sum per dot) for k_scale 20 (scores up to ~100).
  EXPECT_LT(worst, 2e-5 * std::max(1.0f, c.k_scale / 4.0f));
  for (const int threads : {2, 3}) EXPECT_EQ(run_alone(p, s, threads), out) << "threads " << threads;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeVsReference,
    testing::Values(
        // key counts around the block (64) and split sizes (min_split_keys: 512 keys for 3 x 64 and
        // 4 x 64, 256 for 4 x 256; 16 splits from 16 x that on)
        DecCase{2, 4, 64, KVType::F16, 1, 1.0, 0, 0, 2.0f}, DecCase{2, 4, 64, KVType::F16, 63, 1.0, 0, 0, 2.0f},
        DecCase{2, 4, 64, KVType::F32, 65, 1.0, 0, 0, 2.0f}, DecCase{1, 4, 256, KVType::F16, 512, 1.0, 0, 0, 2.0f},
        DecCase{1, 4, 256, KVType::F16, 513, 1.0, 0, 0, 2.0f}, DecCase{3, 3, 64, KVType::F16, 1025, 1.0, 0, 0, 2.0f},
        DecCase{3, 3, 64, KVType::F32, 4097, 0.9, 0, 0, 2.0f}, DecCase{1, 4, 256, KVType::F16, 8191, 1.0, 0, 0, 2.0f},
        DecCase{1, 4, 256, KVType::F32, 8192, 1.0, 0, 0, 2.0f}, DecCase{2, 3, 64, KVType::F16, 8193, 1.0, 0, 0, 2.0f},
        DecCase{1, 3, 64, KVType::F16, 70000, 1.0, 0, 0, 2.0f}, DecCase{2, 1, 32, KVType::F32, 70000, 0.8, 0, 0, 2.0f},
        // GQA 1 / 8, head_dim 32 (exactly summed F16 dots) and 72 (8-element tail)
        DecCase{4, 1, 32, KVType::F16, 3000, 0.7, 0, 0, 2.0f}, DecCase{1, 8, 64, KVType::F16, 2500, 0.9, 0, 0, 2.0f},
        DecCase{2, 8, 72, KVType::F32, 1300, 0.9, 0, 0, 2.0f}, DecCase{2, 4, 72, KVType::F16, 1300, 0.6, 0, 0, 2.0f},
        DecCase{3, 3, 32, KVType::F32, 900, 1.0, 0, 0, 2.0f},
        // causal: the cache holds later positions than the query
        DecCase{3, 3, 64, KVType::F16, 2000, 0.8, 0, 700, 2.0f},
        DecCase{1, 4, 256, KVType::F32, 600, 1.0, 0, 300, 2.0f},
        // sliding windows (Gemma's 512; one smaller than a block; one that sees a single key)
        DecCase{1, 4, 256, KVType::F16, 2000, 1.0, 512, 0, 2.0f},
        DecCase{2, 3, 64, KVType::F32, 3000, 0.5, 40, 100, 2.0f}, DecCase{2, 4, 64, KVType::F16, 300, 1.0, 1, 0, 2.0f},
        // peaky softmax: most probabilities underflow to 0
        DecCase{1, 4, 256, KVType::F16, 5000, 1.0, 0, 0, 12.0f}, DecCase{3, 3, 64, KVType::F32, 5000, 1.0, 0, 0, 20.0f},
        // Q8_0 (dequantized in registers, or a key block at a time without AVX-512): across splits,
        // GQA 1-8, windows, causal
        DecCase{3, 3, 64, KVType::Q8_0, 1, 1.0, 0, 0, 2.0f}, DecCase{3, 3, 64, KVType::Q8_0, 8193, 0.9, 0, 0, 2.0f},
        DecCase{1, 4, 256, KVType::Q8_0, 2000, 1.0, 512, 0, 2.0f},
        DecCase{4, 1, 32, KVType::Q8_0, 3000, 0.7, 0, 0, 2.0f},
        DecCase{2, 8, 64, KVType::Q8_0, 1300, 0.9, 40, 100, 2.0f},
        DecCase{1, 3, 64, KVType::Q8_0, 70000, 1.0, 0, 0, 2.0f}));

TEST(DecodeAttention, SplitCountsDependOnlyOnTheKeyCountAndShape) {
  EXPECT_EQ(Split::min_split_keys(3, 64), 512);   // SmolLM2-135M: 262144 / 192 = 1365, capped
  EXPECT_EQ(Split::min_split_keys(4, 256), 256);  // Gemma 3 270M
  EXPECT_EQ(Split::min_split_keys(8, 128), 256);
  EXPECT_EQ(Split::min_split_keys(5, 256), 192);  // 204.8, rounded down to whole key blocks
  EXPECT_EQ(Split::min_split_keys(64, 256), Split::kKeyBlock);
  EXPECT_EQ(Split::n_splits(0, 512), 0);
  EXPECT_EQ(Split::n_splits(1, 512), 1);
  EXPECT_EQ(Split::n_splits(512, 512), 1);
  EXPECT_EQ(Split::n_splits(513, 512), 2);
  EXPECT_EQ(Split::n_splits(8192, 512), 16);
  EXPECT_EQ(Split::n_splits(70000, 512), 16);
  EXPECT_EQ(Split::n_splits(256, 256), 1);
  EXPECT_EQ(Split::n_splits(512, 256), 2);  // Gemma 3's sliding window: a split for each of 2 threads
  EXPECT_EQ(Split::n_splits(4096, 256), 16);
  for (const int64_t min_keys : {64, 192, 256, 512}) {
    for (int64_t nk = 1; nk < 20000; nk += 37) {
      const int64_t len = Split::split_keys(nk, min_keys);
      const int ns = Split::n_splits(nk, min_keys);
      EXPECT_EQ(len % Split::kKeyBlock, 0) << nk;
      EXPECT_GE(ns, 1);
      EXPECT_LE(ns, Split::kMaxSplits);
      EXPECT_GE(len * ns, nk) << nk;        // the splits cover every key
      EXPECT_LT(len * (ns - 1), nk) << nk;  // and none is empty
    }
  }
}

TEST(DecodeAttention, BatchedRowsEqualRowsAlone) {
  // Five sequences of one layer (SmolLM2's shape) with different lengths, position sets and query
  // positions, one of which sees no key; in one call, in another order, and alone.
  // Also Gemma 3's shape (4 x 256: splits of >= 256 keys) with and without its 512-key window.
  struct Shape {
    int n_head_kv, group, head_dim, window;
    std::array<int64_t, 5> lens;
  };
  const Shape shapes[] = {{3, 3, 64, 0, {1, 700, 3000, 9000, 40}},
                          {1, 4, 256, 512, {1, 300, 700, 3000, 40}},
                          {1, 4, 256, 0, {1, 257, 520, 5000, 40}}};
  for (const Shape& sh : shapes)
    for (const KVType type : {KVType::F16, KVType::Q8_0}) {
      SCOPED_TRACE(std::string(kv_type_name(type)) + " head_dim " + std::to_string(sh.head_dim) + " window " +
                   std::to_string(sh.window));
      const DecCase base{sh.n_head_kv, sh.group, sh.head_dim, type, 0, 0.8, sh.window, 0, 2.0f};
      const AttentionParams p = params(base);
      std::vector<Seq> seqs;
      const auto& lens = sh.lens;
      for (size_t i = 0; i < std::size(lens); ++i) {
        DecCase c = base;
        c.n_keys = lens[i];
        seqs.push_back(make_seq(c, 99 + i));
      }
      seqs[4].pos = seqs[4].cache.heads[0].positions()[0] - 1;  // before every stored key
      const size_t n = seqs.size(), qn = seqs[0].q.size();
      for (const int threads : {1, 2, 3, 7}) {
        DecodeWorkspace ws(p, 8);
        std::vector<float> fwd(n * qn, -7.0f), rev(n * qn, -7.0f);
        std::vector<DecodeQuery> rows, rrows;
        for (size_t i = 0; i < n; ++i)
          rows.push_back({seqs[i].q.data(), seqs[i].pos, &seqs[i].cache, fwd.data() + i * qn});
        for (size_t i = n; i-- > 0;)
          rrows.push_back({seqs[i].q.data(), seqs[i].pos, &seqs[i].cache, rev.data() + i * qn});
        attention_decode(p, rows, ws, threads);
        attention_decode(p, rrows, ws, threads);
        EXPECT_EQ(fwd, rev) << "threads " << threads;
        for (size_t i = 0; i < n; ++i) {
          const auto alone = run_alone(p, seqs[i], 1);
          EXPECT_TRUE(std::equal(alone.begin(), alone.end(), fwd.begin() + static_cast<std::ptrdiff_t>(i * qn)))
              << "row " << i << " threads " << threads;
        }
        for (size_t d = 4 * qn; d < 5 * qn; ++d) EXPECT_EQ(fwd[d], 0.0f);
      }
    }
}

TEST(DecodeAttention, MoreThreadsThanTasks) {
  // One row, one KV head of 8 query heads, 500 keys: two split tasks, enough work for the parallel
  // region; threads whose share holds no task must leave the result as one thread makes it.
  const DecCase c{1, 8, 128, KVType::F16, 500, 1.0, 0, 0, 2.0f};
  const AttentionParams p = params(c);
  const Seq s = make_seq(c, 5);
  ASSERT_EQ(Split::n_splits(static_cast<int64_t>(s.cache.heads[0].size()), Split::min_split_keys(8, 128)), 2);
  const auto one = run_alone(p, s, 1);
  // 40 > WorkSplit::kMaxParts: the static shares instead of work stealing.
  for (const int threads : {2, 7, 16, 40}) EXPECT_EQ(run_alone(p, s, threads), one) << "threads " << threads;
}

TEST(DecodeAttention, InsideParallelRegionMatchesOneThread) {
  // Called from inside a parallel region the kernel's own region has one thread, while its tasks
  // were shared out for `threads` (core/work_split.h): that thread runs its share and takes every
  // other share's tasks from the back. The result must be the one-thread result, bit for bit.
  for (const KVType type : {KVType::F16, KVType::Q8_0}) {
    const DecCase c{1, 4, 256, type, 5000, 1.0, 0, 0, 2.0f};  // Gemma 3's shape: 16 split tasks
    const AttentionParams p = params(c);
    const Seq s = make_seq(c, 9);
    const auto one = run_alone(p, s, 1);
    std::vector<float> got[4];
#pragma omp parallel for num_threads(2)
    for (int k = 0; k < 4; ++k) got[k] = run_alone(p, s, 2 + k);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(got[k], one) << kv_type_name(type) << " threads " << 2 + k;
  }
}

TEST(DecodeAttention, QueriesWithoutVisibleKeysGetZeros) {
  const DecCase c{2, 2, 16, KVType::F32, 10, 1.0, 3, 0, 2.0f};
  const AttentionParams p = params(c);
  Seq s = make_seq(c, 5);
  DecodeWorkspace ws(p, 2);
  std::vector<float> out(2 * s.q.size(), 5.0f);
  // Window 3 at position 100: the keys (positions 0..9) are all too old. Row 1: empty heads.
  KVLayerCache empty;
  empty.window = 3;
  empty.heads.emplace_back(KVType::F32, 16);
  empty.heads.emplace_back(KVType::F32, 16);
  const DecodeQuery rows[2] = {{s.q.data(), 100, &s.cache, out.data()},
                               {s.q.data(), 0, &empty, out.data() + s.q.size()}};
  attention_decode(p, rows, ws, 2);
  for (const float x : out) EXPECT_EQ(x, 0.0f);
}

TEST(DecodeAttention, OutputMayAliasTheQuery) {
  const DecCase c{2, 3, 64, KVType::F32, 2000, 1.0, 0, 0, 2.0f};
  const AttentionParams p = params(c);
  Seq s = make_seq(c, 8);
  const auto want = run_alone(p, s, 2);
  DecodeWorkspace ws(p, 1);
  const DecodeQuery row{s.q.data(), s.pos, &s.cache, s.q.data()};
  attention_decode(p, {&row, 1}, ws, 2);
  EXPECT_EQ(s.q, want);
}

TEST(DecodeAttention, WorkspaceSizeDoesNotDependOnTheKeyCount) {
  for (const DecCase& c :
       {DecCase{3, 3, 64, KVType::F16, 0, 1.0, 0, 0, 2.0f}, DecCase{1, 4, 256, KVType::F16, 0, 1.0, 0, 0, 2.0f}}) {
    const AttentionParams p = params(c);
    for (const int64_t R : {1, 16}) {
      DecodeWorkspace ws(p, R);
      const auto r = static_cast<size_t>(R), nh = static_cast<size_t>(p.n_head), hd = static_cast<size_t>(p.head_dim);
      const size_t rg = r * static_cast<size_t>(p.n_head_kv);
      const size_t want = 4 * r * nh * (16 * (hd + 2) + hd) + 8 * (3 * rg + 1) + 8 * (16 * rg + 1);
      EXPECT_EQ(ws.bytes(), want);
      EXPECT_EQ(DecodeWorkspace::bytes_for(p, R), want);
      for (const int64_t nk : {10, 70000}) {
        DecCase k = c;
        k.n_keys = nk;
        const Seq s = make_seq(k, 3);
        std::vector<float> out(s.q.size());
        const DecodeQuery row{s.q.data(), s.pos, &s.cache, out.data()};
        attention_decode(p, {&row, 1}, ws, 2);
        EXPECT_EQ(ws.bytes(), want) << "after " << nk << " keys";
      }
    }
  }
}

TEST(DecodeAttention, RejectsBadInputs) {
  const DecCase c{2, 2, 16, KVType::F32, 10, 1.0, 0, 0, 2.0f};
  const AttentionParams p = params(c);
  Seq s = make_seq(c, 5);
  std::vector<float> out(s.q.size());
  DecodeWorkspace ws(p, 1);
  const DecodeQuery row{s.q.data(), s.pos, &s.cache, out.data()};
  const DecodeQuery two[2] = {row, row};
  EXPECT_THROW(attention_decode(p, two, ws, 1), Error);  // 2 rows > max_rows 1
  EXPECT_THROW(attention_decode(p, {&row, 1}, ws, 0), Error);
  AttentionParams other = p;
  other.head_dim = 32;
  EXPECT_THROW(attention_decode(other, {&row, 1}, ws, 1), Error);  // workspace of another shape
  other = p;
  other.n_head = 6;
  EXPECT_THROW(attention_decode(other, {&row, 1}, ws, 1), Error);
  other = p;
  other.n_head = 3;  // 3 % 2 != 0
  EXPECT_THROW(attention_decode(other, {&row, 1}, ws, 1), Error);
  EXPECT_THROW(DecodeWorkspace(other, 1), Error);
  EXPECT_THROW(DecodeWorkspace(p, 0), Error);
  for (int which = 0; which < 3; ++which) {
    DecodeQuery bad = row;
    if (which == 0) bad.q = nullptr;
    if (which == 1) bad.out = nullptr;
    if (which == 2) bad.cache = nullptr;
    EXPECT_THROW(attention_decode(p, {&bad, 1}, ws, 1), Error) << which;
  }
  KVLayerCache three;  // 3 heads, expected 2
  for (int g = 0; g < 3; ++g) three.heads.emplace_back(KVType::F32, 16);
  DecodeQuery bad = row;
  bad.cache = &three;
  EXPECT_THROW(attention_decode(p, {&bad, 1}, ws, 1), Error);
  KVLayerCache dims;  // head_dim 8, expected 16
  for (int g = 0; g < 2; ++g) dims.heads.emplace_back(KVType::F32, 8);
  bad.cache = &dims;
  EXPECT_THROW(attention_decode(p, {&bad, 1}, ws, 1), Error);
  KVLayerCache mixed;  // F32 and F16 heads
  mixed.heads.emplace_back(KVType::F32, 16);
  mixed.heads.emplace_back(KVType::F16, 16);
  bad.cache = &mixed;
  EXPECT_THROW(attention_decode(p, {&bad, 1}, ws, 1), Error);
}

// The register tiles compute what the simd.h row helpers compute, bit for bit.
template <typename T>
void check_tiles(int hd, bool exact) {
  std::mt19937 rng(static_cast<unsigned>(hd));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  constexpr int kNk = 9;
  std::vector<float> q(4 * static_cast<size_t>(hd)), kf(kNk * static_cast<size_t>(hd)), vf(kf.size());
  std::vector<T> k(kf.size()), v(kf.size());
  for (auto& x : q) x = attn::round_f16(nd(rng));
  for (size_t i = 0; i < k.size(); ++i) {
    if constexpr (sizeof(T) == 2) {
      k[i] = fp32_to_fp16(nd(rng));
      v[i] = fp32_to_fp16(nd(rng));
    } else {
      k[i] = nd(rng);
      v[i] = nd(rng);
    }
  }
  const float* qh[4] = {q.data(), q.data() + hd, q.data() + 2 * hd, q.data() + 3 * hd};
  for (int nh = 1; nh <= attn::kHeadTile; ++nh) {
    for (int nk = 1; nk <= kNk; ++nk) {
      float S[4 * kNk];
      attn::scores_block(qh, nh, k.data(), nk, hd, 0.3f, exact, S, kNk);
      std::vector<float> acc(4 * static_cast<size_t>(hd), 0.25f), want = acc;
      float* ap[4] = {acc.data(), acc.data() + hd, acc.data() + 2 * hd, acc.data() + 3 * hd};
      attn::pv_block(S, kNk, nh, v.data(), nk, hd, ap);
      for (int h = 0; h < nh; ++h) {
        for (int j = 0; j < nk; ++j) {
          const float sc = 0.3f * attn::dot_row(qh[h], k.data() + static_cast<size_t>(j) * hd, hd, exact);
          ASSERT_EQ(S[h * kNk + j], sc) << "hd " << hd << " nh " << nh << " nk " << nk;
          attn::axpy_row(want.data() + static_cast<size_t>(h) * hd, sc, v.data() + static_cast<size_t>(j) * hd, hd);
        }
      }
      ASSERT_EQ(acc, want) << "hd " << hd << " nh " << nh << " nk " << nk;
    }
  }
}

TEST(DecodeAttention, TilesEqualTheRowHelpers) {
  for (const int hd : {8, 16, 24, 32, 40, 64, 72, 128, 256}) {
    check_tiles<uint16_t>(hd, false);
    check_tiles<uint16_t>(hd, true);
    check_tiles<float>(hd, false);
  }
}

#if SNAPKV_ATTN_AVX512
TEST(DecodeAttention, Exp16EqualsExp8) {
  std::vector<float> xs = {std::nanf(""), -INFINITY, INFINITY, -1000.0f, -87.34f, attn::kExpMinArg, -87.33f, -1.0f,
                           -0.0f,         0.0f,      1e-8f,    0.5f,     88.7f,   88.72283f,        88.8f,   1000.0f};
  for (float x = -100.0f; x < 100.0f; x += 0.0137f) xs.push_back(x);
  while (xs.size() % 16 != 0) xs.push_back(-3.0f);
  for (size_t i = 0; i < xs.size(); i += 16) {
    alignas(64) float a[16], b[16];
    _mm512_store_ps(a, attn::exp16(_mm512_loadu_ps(xs.data() + i)));
    _mm256_store_ps(b, attn::exp8(_mm256_loadu_ps(xs.data() + i)));
    _mm256_store_ps(b + 8, attn::exp8(_mm256_loadu_ps(xs.data() + i + 8)));
    ASSERT_EQ(std::memcmp(a, b, sizeof a), 0) << "at x = " << xs[i];
  }
}
#endif

TEST(DecodeAttention, ExpSumBlockMatchesTheRowHelper) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int n = 1; n <= 64; ++n) {
    std::vector<float> s(static_cast<size_t>(n));
    for (auto& x : s) x = nd(rng);
    const float m = *std::max_element(s.begin(), s.end());
    std::vector<float> e(s.size());
    const double want = attn::exp_sum_row(s.data(), n, m, e.data());
    const double got = attn::exp_sum_block(s.data(), n, m);
    EXPECT_EQ(s, e) << n;
    EXPECT_NEAR(got, want, 1e-12 * want) << n;
  }
}

}  // namespace
}  // namespace snapkv
