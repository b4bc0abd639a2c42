// The --question protocol at the engine level (test 7): prefill(context, compress=true), then
// prefill(question, compress=false) appends the question uncompressed at positions L.., and
// its (blocked, multi-query) prefill over the compressed cache equals decoding the question
// token by token; a second compressing prefill on a non-empty session is an error that leaves
// the session as it was.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "compression_util.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using ctest::options;
using ctest::random_tokens;
using ctest::rel_err;

TEST(CompressionQuestion, QuestionAppendedUncompressedAfterCompressedContext) {
  const auto m = ctest::stories();
  const ModelConfig& cfg = m->config();
  const int64_t L = 300, C = 48, Q = 20;
  const auto context = random_tokens(L, cfg.n_vocab, 71);
  const auto question = random_tokens(Q, cfg.n_vocab, 72);
  for (const std::string name : {"snapkv", "adakv"}) {
    SCOPED_TRACE(name);
    const TestSessionOptions o = options(name, C, KVType::F32, 16);
    TestSession s(m, o);
    s.prefill(context, true);
    const auto before = ctest::snapshot(s.kv_cache());
    ASSERT_EQ(s.kept().size(), 5u);
    std::vector<float> q_all;
    const auto ql = s.prefill(question, false, &q_all);
    const std::vector<float> q_last(ql.begin(), ql.end());
    EXPECT_EQ(s.n_past(), L + Q);
    EXPECT_EQ(s.kept().size(), 5u) << "the question must not be compressed";

    // Every head: the kept context entries untouched, then the Q question entries at L..L+Q-1.
    const auto after = ctest::snapshot(s.kv_cache());
    for (size_t il = 0; il < after.size(); ++il) {
      for (size_t g = 0; g < after[il].size(); ++g) {
        const auto& a = before[il][g];
        const auto& b = after[il][g];
        ASSERT_EQ(b.pos.size(), a.pos.size() + static_cast<size_t>(Q));
        EXPECT_TRUE(std::equal(a.pos.begin(), a.pos.end(), b.pos.begin()));
        EXPECT_EQ(std::memcmp(a.k.data(), b.k.data(), a.k.size() * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)), 0);
        for (int64_t j = 0; j < Q; ++j) EXPECT_EQ(b.pos[a.pos.size() + static_cast<size_t>(j)], L + j);
      }
    }
    EXPECT_EQ(s.stats().kv_cache_bytes, ctest::formula_bytes(s.kv_cache()));

    // The same question decoded token by token on an identically compressed session: same
    // logits for every question position (blocked prefill vs decode kernels: f32 rounding only).
    TestSession d(m, o);
    d.prefill(context, true);
    double worst = 0;
    for (int64_t j = 0; j < Q; ++j) {
      const auto dl = d.decode(question[static_cast<size_t>(j)]);
      worst = std::max(worst, rel_err(dl, {q_all.data() + j * cfg.n_vocab, static_cast<size_t>(cfg.n_vocab)}));
    }
    EXPECT_LE(worst, 1e-5);
    EXPECT_EQ(ctest::argmax(d.decode(ctest::argmax(q_last))), ctest::argmax(s.decode(ctest::argmax(q_last))));
    // Both caches hold the same triples.
    const auto da = ctest::snapshot(d.kv_cache());
    const auto sa = ctest::snapshot(s.kv_cache());
    for (size_t il = 0; il < da.size(); ++il)
      for (size_t g = 0; g < da[il].size(); ++g) {
        EXPECT_EQ(da[il][g].pos, sa[il][g].pos);
        ASSERT_EQ(da[il][g].k.size(), sa[il][g].k.size());
        for (size_t i = 0; i < da[il][g].k.size(); ++i) ASSERT_NEAR(da[il][g].k[i], sa[il][g].k[i], 1e-4f);
      }
  }
}

TEST(CompressionQuestion, SecondCompressingPrefillIsAnError) {
  const auto m = ctest::stories();
  const int64_t L = 300, C = 48;
  const auto context = random_tokens(L, m->config().n_vocab, 73);
  const auto more = random_tokens(100, m->config().n_vocab, 74);  // 100 > C: compression would apply
  TestSession s(m, options("snapkv", C, KVType::F16, 16));
  s.prefill(context, true);
  const auto snap = ctest::snapshot(s.kv_cache());
  const size_t bytes = s.stats().kv_cache_bytes;
  try {
    s.prefill(more, true);
    ADD_FAILURE() << "a second compressing prefill must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one-shot"), std::string::npos) << e.what();
  }
  // Nothing changed: the check comes before the cache is touched.
  EXPECT_EQ(s.n_past(), L);
  EXPECT_EQ(s.stats().kv_cache_bytes, bytes);
  EXPECT_EQ(s.kept().size(), 5u);
  const auto snap2 = ctest::snapshot(s.kv_cache());
  for (size_t il = 0; il < snap.size(); ++il)
    for (size_t g = 0; g < snap[il].size(); ++g) EXPECT_EQ(snap2[il][g].pos, snap[il][g].pos);
  // ... and the uncompressed continuation still works.
  s.prefill(more, false);
  EXPECT_EQ(s.n_past(), L + 100);
  EXPECT_EQ(s.kv_cache().layer(0).heads[0].size(), C + 100);

  // With press none, compress=true on a non-empty session is harmless (nothing to compress).
  TestSession n(m, options("none", 0, KVType::F16, 16));
  n.prefill(context, true);
  EXPECT_NO_THROW(n.prefill(more, true));
  EXPECT_EQ(n.kv_cache().layer(0).heads[0].size(), L + 100);
}

}  // namespace
}  // namespace snapkv
