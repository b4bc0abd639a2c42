// Positions and masks after compression (tests 3 and 5f):
//  - a decode step after compression equals a naive one-token forward pass (public building
//    blocks + double-precision attention) over exactly the kept (position, key, value) triples
//    plus the new token, the new token sitting at position L + t (never renumbered to the cache
//    length); negative controls show the reference would see a renumbering or a missing eviction;
//  - the attention kernel (decode and blocked prefill paths) over a compressed, ragged cache
//    equals a naive loop over the kept triples, masking on the original positions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <set>

#include "compression_util.h"

namespace snapkv {
namespace {

using ctest::CacheSnapshot;
using ctest::options;
using ctest::random_tokens;
using ctest::rel_err;

struct DecodeCase {
  std::string press;
  KVType kv;
  double tol;  // max |engine - reference| / max(1, max |reference|)
};

// Readable ctest names (gtest would otherwise print the struct's bytes).
void PrintTo(const DecodeCase& c, std::ostream* os) {
  *os << c.press << (c.kv == KVType::F16 ? " f16" : " f32") << " tol " << c.tol;
}

std::string decode_case_name(const testing::TestParamInfo<DecodeCase>& i) {
  return i.param.press + (i.param.kv == KVType::F16 ? "_f16" : "_f32");
}

class DecodeAfterCompression : public testing::TestWithParam<DecodeCase> {};

// Test 3 (snapkv) and 5f (adakv: ragged per-head lengths on a GQA model): stories260K, L = 300,
// budget 48, window 16; four greedy decode steps, each checked against the naive reference.
TEST_P(DecodeAfterCompression, MatchesNaiveForwardOverKeptTriples) {
  const DecodeCase& c = GetParam();
  const auto m = ctest::stories();
  const ModelConfig& cfg = m->config();
  const int64_t L = 300, C = 48;
  const auto prompt = random_tokens(L, cfg.n_vocab, 31);
  TestSession s(m, options(c.press, C, c.kv, 16));
  const auto l0 = s.prefill(prompt);
  std::vector<float> cur(l0.begin(), l0.end());
  ASSERT_EQ(s.n_past(), L);

  // The uncompressed cache, for the "no eviction" negative control.
  TestSession full(m, options("none", 0, c.kv));
  full.prefill(prompt);
  CacheSnapshot full_snap = ctest::snapshot(full.kv_cache());

  CacheSnapshot snap = ctest::snapshot(s.kv_cache());
  bool ragged = false;
  size_t grand_total = 0;
  for (int il = 0; il < cfg.n_layer; ++il) {
    size_t total = 0;
    for (const auto& hs : snap[static_cast<size_t>(il)]) {
      total += hs.pos.size();
      ragged |= hs.pos.size() != snap[static_cast<size_t>(il)][0].pos.size();
      ASSERT_TRUE(std::is_sorted(hs.pos.begin(), hs.pos.end()));
      ASSERT_TRUE(hs.pos.empty() || hs.pos.back() == L - 1) << "the last prompt token is in the window";
    }
    grand_total += total;
    if (c.press != "pyramidkv") {  // pyramidkv moves budget across layers (checked in total below)
      ASSERT_EQ(total, static_cast<size_t>(cfg.n_head_kv * C)) << "layer " << il;
    }
  }
  ASSERT_EQ(grand_total, static_cast<size_t>(cfg.n_layer * cfg.n_head_kv * C));
  if (c.press == "adakv") {
    EXPECT_TRUE(ragged) << "adakv should give the heads different lengths here";
  }

  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE(fmt::format("step {}", t));
    const int32_t tok = ctest::argmax(cur);
    const auto pos = static_cast<int32_t>(L + t);
    const auto ref = ctest::naive_llama_decode(*m, snap, tok, pos, c.kv);
    // What an engine that renumbered the kept entries (new token at the cache length) would give.
    const auto renum = ctest::naive_llama_decode(*m, snap, tok, static_cast<int32_t>(C + t), c.kv);
    // What an engine that still attended to the evicted entries would give.
    const auto noevict = ctest::naive_llama_decode(*m, full_snap, tok, pos, c.kv);
    const auto got = s.decode(tok);
    const double err = rel_err(got, ref);
    EXPECT_LE(err, c.tol);
    EXPECT_GT(rel_err(got, renum), 10 * c.tol) << "the reference cannot tell a renumbering apart";
    EXPECT_GT(rel_err(got, noevict), 10 * c.tol) << "the reference cannot tell a missing eviction apart";
    EXPECT_EQ(s.n_past(), pos + 1);
    cur.assign(got.begin(), got.end());

    // The cache: every head gained exactly one entry, at position L + t, after the untouched kept ones.
    CacheSnapshot next = ctest::snapshot(s.kv_cache());
    for (size_t il = 0; il < next.size(); ++il) {
      for (size_t g = 0; g < next[il].size(); ++g) {
        const auto& a = snap[il][g];
        const auto& b = next[il][g];
        ASSERT_EQ(b.pos.size(), a.pos.size() + 1);
        EXPECT_EQ(b.pos.back(), pos) << "layer " << il << " head " << g;
        EXPECT_TRUE(std::equal(a.pos.begin(), a.pos.end(), b.pos.begin()));
        EXPECT_EQ(std::memcmp(a.k.data(), b.k.data(), a.k.size() * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)), 0);
      }
    }
    // The no-eviction control advances with the same token.
    full.decode(tok);
    full_snap = ctest::snapshot(full.kv_cache());
    snap = std::move(next);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Presses, DecodeAfterCompression,
    testing::Values(DecodeCase{"snapkv", KVType::F32, 1e-5}, DecodeCase{"adakv", KVType::F32, 1e-5},
                    DecodeCase{"pyramidkv", KVType::F32, 1e-5}, DecodeCase{"streamingllm", KVType::F32, 1e-5},
                    DecodeCase{"snapkv", KVType::F16, 1e-4}, DecodeCase{"adakv", KVType::F16, 1e-4}),
    decode_case_name);

// Test 5f at the kernel level: snapkv::attention() on the real compressed (ragged, gapped) cache
// of the synthetic GQA 3:1 model vs the naive loop, for the decode path (one query) and the
// blocked prefill path (several queries), with queries at the next position, inside the prompt
// (some kept, some evicted positions), and with a sliding window that cuts through the gaps.
TEST(CompressedAttentionKernel, MatchesNaiveLoopOverKeptTriples) {
  const auto m = ctest::synthetic();
  const ModelConfig& cfg = m->config();
  const int64_t L = 600, C = 64;
  const auto prompt = random_tokens(L, cfg.n_vocab, 41);
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    for (const std::string press : {"adakv", "snapkv"}) {
      if (kv == KVType::F16 && press == "snapkv") continue;  // the F16 prefill is the slow one
      SCOPED_TRACE(press + (kv == KVType::F16 ? " f16" : " f32"));
      TestSession s(m, options(press, C, kv, 16, 1024));
      s.prefill(prompt);
      const CacheSnapshot snap = ctest::snapshot(s.kv_cache());
      bool ragged = false;
      for (const auto& layer : snap)
        for (const auto& hs : layer) ragged |= hs.pos.size() != layer[0].pos.size();
      if (press == "adakv") {
        EXPECT_TRUE(ragged);
      }

      std::mt19937_64 rng(5);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int hd = cfg.head_dim;
      const size_t qrow = static_cast<size_t>(cfg.n_head) * hd;
      // Query positions: past the prompt, at the last prompt token, at an evicted and a kept
      // position of head 0 (layer 0), and early in the prompt.
      const auto& h0 = snap[0][0].pos;
      std::set<int32_t> kept0(h0.begin(), h0.end());
      int32_t evicted = 1;
      while (kept0.count(evicted)) ++evicted;
      const std::vector<int32_t> qpos_list{static_cast<int32_t>(L),     static_cast<int32_t>(L + 7),
                                           static_cast<int32_t>(L - 1), evicted,
                                           h0[h0.size() / 2],           3};
      for (int il = 0; il < cfg.n_layer; ++il) {
        for (const int window : {0, 100}) {
          AttentionParams p = m->attention_params(il);
          p.window = window;
          AttentionWorkspace ws(p, 32);
          const size_t nq = qpos_list.size();
          std::vector<float> q(nq * qrow);
          for (auto& x : q) x = 2.0f * nd(rng);
          std::vector<float> ref(q.size()), ref_dec(q.size()), got(q.size()), one(qrow);
          const bool f16 = kv == KVType::F16;
          for (size_t i = 0; i < nq; ++i) {
            ctest::naive_attention(p, q.data() + i * qrow, qpos_list[i], snap[static_cast<size_t>(il)], nullptr,
                                   nullptr, f16 ? ctest::F16Semantics::Prefill : ctest::F16Semantics::None,
                                   ref.data() + i * qrow);
            ctest::naive_attention(p, q.data() + i * qrow, qpos_list[i], snap[static_cast<size_t>(il)], nullptr,
                                   nullptr, f16 ? ctest::F16Semantics::Decode : ctest::F16Semantics::None,
                                   ref_dec.data() + i * qrow);
          }
          const double tol = f16 ? 2e-3 : 2e-5;
          // Decode path: one query per call (F16: only the query is rounded, so f32 rounding only).
          for (size_t i = 0; i < nq; ++i) {
            attention(p, q.data() + i * qrow, &qpos_list[i], 1, s.kv_cache().layer(il), one.data(), ws, 2);
            EXPECT_LE(rel_err(one, {ref_dec.data() + i * qrow, qrow}), 2e-5)
                << "decode, layer " << il << " window " << window << " qpos " << qpos_list[i];
          }
          // Blocked prefill path: all queries in one call.
          attention(p, q.data(), qpos_list.data(), static_cast<int64_t>(nq), s.kv_cache().layer(il), got.data(), ws, 2);
          for (size_t i = 0; i < nq; ++i)
            EXPECT_LE(rel_err({got.data() + i * qrow, qrow}, {ref.data() + i * qrow, qrow}), tol)
                << "prefill, layer " << il << " window " << window << " qpos " << qpos_list[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace snapkv
