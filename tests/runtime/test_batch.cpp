// Engine::step over many sequences: batched decode equals each sequence alone, a layer-major
// prefill advancing in row-budget slices between decode steps equals the same prefill alone, and
// bad batches are rejected before anything changes.
//
// Which results are bit-identical: with F32/F16/BF16 weights every matmul kernel computes each
// (row, token) with the same operations whatever the batch (src/quant/tiling.h), attention runs per
// sequence, and prefill attention does not depend on how a prompt is chunked (chunks >= 2 tokens),
// so stories260K (F32 weights) must match bit for bit. With quantized weights (AVX2 or AVX-512), a
// call of >= 8 rows (quant::lane_min_tokens: on AVX2 12 for the K-quants, 16 for Q8_0) uses the
// token-lane kernels instead of the decode kernels: logits then differ
// by f32 rounding only (Gemma below: greedy tokens equal, logits within a measured tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;
using rtest::run_alone;

using rtest::SeqCase;

// Different prompts, lengths and presses, stepped together, decode exactly as alone.
TEST(Batch, BatchedDecodeEqualsAloneBitForBit) {
  auto e = rtest::stories();
  const std::vector<SeqCase> cases = {{5, "none"},
                                      {300, "snapkv:budget=64,window=16"},
                                      {180, "tova:budget=48,window=8"},
                                      {120, "knorm:budget=40,window=8"},
                                      {260, "streamingllm:budget=70,window=16,sinks=4"},
                                      {90, "pyramidkv:budget=50,window=16"}};
  for (const KVType kv : {KVType::F32, KVType::F16}) rtest::expect_batched_equals_alone(*e, cases, 12, kv, 100);
}

// A long prefill advances a layer-chunk at a time while two other sequences keep decoding; both
// the decodes and the prefill (logits, compressed cache) equal their runs alone.
TEST(Batch, PrefillInSlicesBetweenDecodesEqualsAlone) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto pa = prompt(40, V, 7), pb = prompt(33, V, 8), pc = prompt(400, V, 9);
  const std::string press_c = "snapkv:budget=96,window=16";
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    const auto alone_a = run_alone(*e, pa, "none", 40, kv);
    const auto alone_b = run_alone(*e, pb, "adakv:budget=24,window=8", 40, kv);

    SequenceOptions so;
    so.kv_type = kv;
    so.n_ctx = 2048;
    WorkspaceOptions wo;
    wo.max_rows = 64;  // chunks of at most 62 prompt tokens next to the 2 decode rows
    Workspace ws(*e, wo);
    auto c_alone = e->new_sequence(so);
    PrefillOptions pco;
    pco.press = PressSpec::parse(press_c);
    const auto lc = e->prefill(*c_alone, pc, pco, ws);
    const std::vector<float> c_logits(lc.begin(), lc.end());

    auto a = e->new_sequence(so), b = e->new_sequence(so), c = e->new_sequence(so);
    PrefillOptions pbo;
    pbo.press = PressSpec::parse("adakv:budget=24,window=8");
    std::vector<int32_t> next = {argmax(e->prefill(*a, pa, {}, ws)), argmax(e->prefill(*b, pb, pbo, ws))};
    c->begin_prefill(pc, pco);
    Batch batch;
    int steps = 0;
    bool done = false;
    while (!done) {
      batch.clear();
      batch.add(*a, next[0]);
      batch.add(*b, next[1]);
      batch.add_prefill(*c, 150);  // token-layers per step: 400 tokens x 5 layers take 14 steps
      e->step(batch, ws);
      ASSERT_EQ(next[0], alone_a.tokens[static_cast<size_t>(steps)]);
      ASSERT_EQ(next[1], alone_b.tokens[static_cast<size_t>(steps)]);
      for (int r = 0; r < 2; ++r) {
        const auto l = batch.logits(r);
        const auto& ref = (r == 0 ? alone_a : alone_b).logits[static_cast<size_t>(steps) + 1];
        EXPECT_TRUE(std::equal(l.begin(), l.end(), ref.begin())) << "row " << r << " step " << steps;
        next[static_cast<size_t>(r)] = argmax(l);
      }
      done = batch.prefill_done(0);
      EXPECT_EQ(done, !c->prefilling());
      ++steps;
      ASSERT_LT(steps, 40);
    }
    EXPECT_EQ(steps, 14);  // ceil(400 * 5 / 150): decoding went on during the whole prefill
    const auto l = c->prefill_logits();
    EXPECT_TRUE(std::equal(l.begin(), l.end(), c_logits.begin()));
    rtest::expect_same_cache(c->kv_cache(), c_alone->kv_cache(), "sliced prefill");
    EXPECT_EQ(c->stats().kv_cache_bytes, c_alone->stats().kv_cache_bytes);
    EXPECT_EQ(c->stats().peak_kv_cache_bytes, c_alone->stats().peak_kv_cache_bytes);
    EXPECT_TRUE(c->stats().compressed);
    EXPECT_EQ(c->stats().budget, 96);
  }
}

// Row budgets and workspace sizes that would split a prompt into a chunk of one token (which the
// split-K decode kernel would run, with other rounding): the prefill still equals the one alone
// bit for bit (logits and cache), for every split, with both cache types and a compressing press.
TEST(Batch, PrefillSplitsNeverMakeOneTokenChunks) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(43, V, 31);
  for (const KVType kv : {KVType::F32, KVType::F16})
    for (const std::string press : {"none", "snapkv:budget=16,window=8"}) {
      SequenceOptions so;
      so.kv_type = kv;
      so.n_ctx = 256;
      PrefillOptions po;
      po.press = PressSpec::parse(press);
      Workspace big(*e);
      auto ref = e->new_sequence(so);
      const auto lr = e->prefill(*ref, p, po, big);
      const std::vector<float> ref_logits(lr.begin(), lr.end());
      for (const int64_t max_rows : {3, 4, 21, 42, 64}) {
        WorkspaceOptions wo;
        wo.max_rows = max_rows;
        Workspace ws(*e, wo);
        for (const int64_t budget : {0, 1, 2, 3, 20, 21, 42, 85}) {
          const std::string at = press + " max_rows " + std::to_string(max_rows) + " budget " + std::to_string(budget) +
                                 (kv == KVType::F16 ? " f16" : " f32");
          auto s = e->new_sequence(so);
          s->begin_prefill(p, po);
          Batch b;
          int steps = 0;
          while (s->prefilling()) {
            b.clear();
            b.add_prefill(*s, budget);
            e->step(b, ws);
            ASSERT_LT(++steps, 500) << at;
          }
          const auto l = s->prefill_logits();
          EXPECT_TRUE(std::equal(l.begin(), l.end(), ref_logits.begin())) << at;
          rtest::expect_same_cache(s->kv_cache(), ref->kv_cache(), at);
        }
      }
    }
}

// Two prefills in one step (one in slices, one whole) next to a decode row.
TEST(Batch, TwoPrefillsAndADecodeInOneStep) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p1 = prompt(70, V, 21), p2 = prompt(130, V, 22), p3 = prompt(20, V, 23);
  const auto r1 = run_alone(*e, p1, "h2o:budget=32,window=8", 0);
  const auto r2 = run_alone(*e, p2, "random:budget=40,window=8,seed=3", 0);
  const auto r3 = run_alone(*e, p3, "none", 8);
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = KVType::F32;
  auto s1 = e->new_sequence(so), s2 = e->new_sequence(so), s3 = e->new_sequence(so);
  int32_t t3 = argmax(e->prefill(*s3, p3, {}, ws));
  PrefillOptions o1, o2;
  o1.press = PressSpec::parse("h2o:budget=32,window=8");
  o2.press = PressSpec::parse("random:budget=40,window=8,seed=3");
  s1->begin_prefill(p1, o1);
  s2->begin_prefill(p2, o2);
  Batch b;
  for (int step = 0; step < 3 || s1->prefilling() || s2->prefilling(); ++step) {
    ASSERT_LT(step, 8);
    b.clear();
    b.add(*s3, t3);
    if (s1->prefilling()) b.add_prefill(*s1, 0);
    if (s2->prefilling()) b.add_prefill(*s2, 200);
    e->step(b, ws);
    EXPECT_TRUE(std::equal(b.logits(0).begin(), b.logits(0).end(), r3.logits[static_cast<size_t>(step) + 1].begin()));
    t3 = argmax(b.logits(0));
  }
  ASSERT_FALSE(s1->prefilling());
  ASSERT_FALSE(s2->prefilling());
  EXPECT_TRUE(std::equal(r1.logits[0].begin(), r1.logits[0].end(), s1->prefill_logits().begin()));
  EXPECT_TRUE(std::equal(r2.logits[0].begin(), r2.logits[0].end(), s2->prefill_logits().begin()));
}

// Quantized weights: 9 sequences (9 rows: the token-lane kernels for Gemma's Q5_0 matrices, and on
// AVX-512 VNNI for all of them; AVX2 keeps its K-quant and Q8_0 ones on the decode tiles) decode as alone up to f32
// rounding of the matmuls, amplified by the 8-bit activation quantization.
TEST(Batch, GemmaBatchedDecodeMatchesAlone) {
  auto e = rtest::gemma();
  if (!e) GTEST_SKIP() << "Gemma 3 270M not in the model cache (scripts/get-model.sh)";
  const int V = e->info().n_vocab;
  const int n = 9, steps = 6;
  // Real text (prefixes of the GPL-3 from different offsets): the model is confident on most steps.
  const std::string gpl = test::file_bytes("/usr/share/common-licenses/GPL-3");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    auto ids = e->tokenizer().encode(gpl.substr(static_cast<size_t>(1500 * i), 900), true, false);
    ids.resize(static_cast<size_t>(60 + 9 * i));
    prompts.push_back(ids);
  }
  std::vector<rtest::Trace> alone;
  for (int i = 0; i < n; ++i)
    alone.push_back(run_alone(*e, prompts[static_cast<size_t>(i)], i % 2 ? "snapkv:budget=40,window=8" : "none", steps,
                              KVType::F16));
  Workspace ws(*e);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<int32_t> next;
  for (int i = 0; i < n; ++i) {
    seqs.push_back(e->new_sequence({}));
    PrefillOptions po;
    po.press = PressSpec::parse(i % 2 ? "snapkv:budget=40,window=8" : "none");
    next.push_back(argmax(e->prefill(*seqs.back(), prompts[static_cast<size_t>(i)], po, ws)));
  }
  // Each batched sequence is fed the tokens of its run alone (teacher forcing), so that one
  // near-tie cannot send a sequence down another path; the greedy choice must agree wherever the
  // run alone is not near a tie: top-1/top-2 gap > 0.5 (measured 2026-12-01: of 54 steps the greedy
  // choice differed at gaps 0.09, 0.26 and 0.28 only; 30 steps have gaps above 0.5).
  double worst = 0, sq = 0;
  int64_t cnt = 0, compared = 0;
  Batch b;
  for (int s = 0; s < steps; ++s) {
    b.clear();
    for (int i = 0; i < n; ++i) b.add(*seqs[static_cast<size_t>(i)], next[static_cast<size_t>(i)]);
    e->step(b, ws);
    for (int i = 0; i < n; ++i) {
      const auto& ref = alone[static_cast<size_t>(i)];
      const auto& rl = ref.logits[static_cast<size_t>(s) + 1];
      const auto l = b.logits(i);
      for (int v = 0; v < V; ++v) {
        const double d = static_cast<double>(l[static_cast<size_t>(v)]) - rl[static_cast<size_t>(v)];
        worst = std::max(worst, std::fabs(d));
        sq += d * d;
        ++cnt;
      }
      std::vector<float> top(rl.begin(), rl.end());
      std::nth_element(top.begin(), top.begin() + 1, top.end(), std::greater<float>());
      if (top[0] - top[1] > 0.5f) {
        EXPECT_EQ(argmax(l), argmax(rl)) << "seq " << i << " step " << s;
        ++compared;
      }
      next[static_cast<size_t>(i)] = ref.tokens[static_cast<size_t>(std::min(s + 1, steps - 1))];
    }
  }
  EXPECT_GT(compared, n * steps / 3);  // the check above is not vacuous
  const double rms = std::sqrt(sq / static_cast<double>(cnt));
  RecordProperty("max_abs_logit_diff", std::to_string(worst));
  RecordProperty("rms_logit_diff", std::to_string(rms));
  // The activations are quantized to 8 bits before every matmul, so an f32 rounding difference
  // in one layer can flip a quantized value and grow: this model is chaotic at that scale
  // (llama.cpp's own f16-vs-f32 KV cache difference is RMS 0.28, max 1.36, tests/model/
  // test_gemma3.cpp). Measured here: max 1.53 over 9 x 6 steps; bound as the golden tests do.
  EXPECT_LT(rms, 0.45);
  EXPECT_LT(worst, 2.5);
}

TEST(Batch, BadBatchesAreRejectedBeforeAnythingChanges) {
  auto e = rtest::stories();
  auto other = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e), ws_other(*other);
  SequenceOptions so;
  so.n_ctx = 64;
  auto a = e->new_sequence(so), b = e->new_sequence(so), c = e->new_sequence(so), x = other->new_sequence(so);
  e->prefill(*a, prompt(10, V, 1), {}, ws);
  e->prefill(*b, prompt(10, V, 2), {}, ws);
  c->begin_prefill(prompt(10, V, 3), {});
  auto expect_rejected = [&](Batch& batch, Workspace& w, const std::string& needle) {
    const int64_t na = a->n_past(), nb = b->n_past();
    try {
      e->step(batch, w);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
    EXPECT_EQ(a->n_past(), na);
    EXPECT_EQ(b->n_past(), nb);
  };
  Batch batch;
  expect_rejected(batch, ws, "empty batch");
  batch.add(*a, 5);
  batch.add(*b, 5);
  batch.add(*a, 6);
  expect_rejected(batch, ws, "consecutive");
  batch.clear();
  batch.add(*a, V);
  expect_rejected(batch, ws, "outside the vocabulary");
  batch.clear();
  batch.add(*c, 5);
  expect_rejected(batch, ws, "still prefilling");
  batch.clear();
  batch.add(*a, 5);
  batch.add_prefill(*a);
  expect_rejected(batch, ws, "already in this batch");
  batch.clear();
  batch.add(*a, 5);
  batch.add_prefill(*b);
  expect_rejected(batch, ws, "no pending prefill");
  batch.clear();
  batch.add(*a, 5);
  batch.add(*x, 5);
  expect_rejected(batch, ws, "another model");
  batch.clear();
  batch.add(*a, 5);
  expect_rejected(batch, ws_other, "another engine");
  batch.clear();
  batch.add_prefill(*c);
  batch.add_prefill(*c);
  expect_rejected(batch, ws, "already in this batch");
  EXPECT_THROW(batch.add_prefill(*c, -1), Error);
  EXPECT_THROW(batch.logits(0), Error);
  EXPECT_THROW(batch.prefill_done(7), Error);
  // A full context: the 64-position sequence takes 54 more tokens, then refuses.
  Batch one;
  for (int i = 0; i < 54; ++i) {
    one.clear();
    one.add(*a, 7);
    e->step(one, ws);
  }
  EXPECT_EQ(a->n_past(), 64);
  one.clear();
  one.add(*a, 7);
  expect_rejected(one, ws, "is full");
  // More rows than the workspace holds.
  WorkspaceOptions small;
  small.max_rows = 1;
  Workspace ws1(*e, small);
  Batch two;
  two.add(*b, 1);
  auto d = e->new_sequence(so);
  two.add(*d, 1);
  expect_rejected(two, ws1, "max_rows");
}

TEST(Batch, RowsOfOneSequenceInOneStepEqualTwoSteps) {
  // Two consecutive rows of one sequence run as one span (causal inside it), like a 2-token prefill.
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(30, V, 5);
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = KVType::F32;
  auto one = e->new_sequence(so), two = e->new_sequence(so);
  e->prefill(*one, p, {}, ws);
  e->prefill(*two, p, {}, ws);
  Batch b;
  b.add(*one, 11);
  b.add(*one, 12);
  e->step(b, ws);
  std::vector<float> last(b.logits(1).begin(), b.logits(1).end());
  Batch s;
  s.add(*two, 11, false);
  e->step(s, ws);
  EXPECT_THROW(s.logits(0), Error);  // not asked for
  s.clear();
  s.add(*two, 12);
  e->step(s, ws);
  EXPECT_EQ(one->n_past(), two->n_past());
  for (int v = 0; v < V; ++v) EXPECT_NEAR(last[static_cast<size_t>(v)], s.logits(0)[static_cast<size_t>(v)], 1e-4);
}

}  // namespace
}  // namespace snapkv
