// Sequence::fork and Sequence::compress: a prompt prefilled once, forked, and each copy compressed
// with a different press equals fresh runs with those presses (kept sets, cache bytes, decoding);
// copies are independent; the query-agnostic protocol works on a compressed fork.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;

TEST(Fork, CompressedForksEqualFreshRuns) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(360, V, 42);
  const std::vector<std::string> presses = {"snapkv:budget=64,window=16", "tova:budget=48,window=8",
                                            "adakv:budget=80,window=32", "knorm:budget=50,window=4",
                                            "pyramidkv:budget=60,window=16,beta=4"};
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    SequenceOptions so;
    so.kv_type = kv;
    so.log_kept = true;
    Workspace ws(*e);
    auto base = e->new_sequence(so);
    PrefillOptions po;
    po.retain_window = 32;
    const auto l0 = e->prefill(*base, p, po, ws);
    const std::vector<float> base_logits(l0.begin(), l0.end());
    const size_t full_bytes = base->stats().kv_cache_bytes;

    std::vector<std::unique_ptr<Sequence>> forks;
    for (size_t i = 0; i < presses.size(); ++i) forks.push_back(base->fork());
    for (size_t i = 0; i < presses.size(); ++i) {
      Sequence& f = *forks[i];
      f.compress(PressSpec::parse(presses[i]), ws);
      // Fresh run with that press in the prefill.
      auto fresh = e->new_sequence(so);
      PrefillOptions fo;
      fo.press = PressSpec::parse(presses[i]);
      const auto lf = e->prefill(*fresh, p, fo, ws);
      EXPECT_TRUE(std::equal(lf.begin(), lf.end(), base_logits.begin())) << presses[i];
      rtest::expect_same_cache(f.kv_cache(), fresh->kv_cache(), presses[i]);
      EXPECT_EQ(f.stats().kv_cache_bytes, fresh->stats().kv_cache_bytes) << presses[i];
      EXPECT_LT(f.stats().kv_cache_bytes, full_bytes) << presses[i];
      ASSERT_EQ(f.kept().size(), fresh->kept().size()) << presses[i];
      for (size_t k = 0; k < f.kept().size(); ++k) EXPECT_EQ(f.kept()[k].positions, fresh->kept()[k].positions);
      // Decoding from both gives the same tokens and logits.
      Batch b;
      int32_t t = argmax(base_logits);
      for (int s = 0; s < 6; ++s) {
        b.clear();
        b.add(f, t);
        b.add(*fresh, t);
        e->step(b, ws);
        ASSERT_TRUE(std::equal(b.logits(0).begin(), b.logits(0).end(), b.logits(1).begin())) << presses[i];
        t = argmax(b.logits(0));
      }
    }
    // The original is untouched by its forks' compression and decoding.
    EXPECT_EQ(base->stats().kv_cache_bytes, full_bytes);
    EXPECT_EQ(base->n_past(), static_cast<int64_t>(p.size()));
    base->compress(PressSpec::parse("snapkv:budget=100,window=32"), ws);
    EXPECT_LT(base->stats().kv_cache_bytes, full_bytes);
  }
}

TEST(Fork, QuestionAfterCompressedForkEqualsFreshQueryAgnosticRun) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto ctx = prompt(300, V, 5);
  const auto q = prompt(12, V, 6, -1);
  Workspace ws(*e);
  auto base = e->new_sequence({});
  PrefillOptions po;
  po.retain_window = 16;
  e->prefill(*base, ctx, po, ws);
  auto f = base->fork();
  f->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  const auto lf = e->prefill(*f, q, {}, ws);
  const std::vector<float> fork_logits(lf.begin(), lf.end());

  auto fresh = e->new_sequence({});
  PrefillOptions fo;
  fo.press = PressSpec::parse("snapkv:budget=64,window=16");
  e->prefill(*fresh, ctx, fo, ws);
  const auto lq = e->prefill(*fresh, q, {}, ws);
  EXPECT_TRUE(std::equal(lq.begin(), lq.end(), fork_logits.begin()));
  rtest::expect_same_cache(f->kv_cache(), fresh->kv_cache(), "question after compression");
}

TEST(Fork, CompressNeedsTheRetainedPromptAndIsOneShot) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(200, V, 3);
  Workspace ws(*e);
  const auto snap = PressSpec::parse("snapkv:budget=64,window=16");
  auto plain = e->new_sequence({});
  e->prefill(*plain, p, {}, ws);
  EXPECT_THROW(plain->compress(snap, ws), Error);  // no retained queries

  auto kept = e->new_sequence({});
  PrefillOptions po;
  po.retain_window = 8;
  e->prefill(*kept, p, po, ws);
  EXPECT_THROW(kept->compress(snap, ws), Error);                                        // window 16 > 8 retained
  EXPECT_THROW(kept->compress(PressSpec::parse("h2o:budget=64,window=8"), ws), Error);  // needs every query
  EXPECT_THROW(kept->compress(PressSpec::parse("nosuch"), ws), Error);
  auto decoded = kept->fork();
  Batch b;
  b.add(*decoded, 5);
  e->step(b, ws);
  EXPECT_THROW(decoded->compress(PressSpec::parse("snapkv:budget=64,window=8"), ws),
               Error);  // holds more than the prompt
  kept->compress(PressSpec::parse("snapkv:budget=64,window=8"), ws);
  EXPECT_TRUE(kept->stats().compressed);
  EXPECT_THROW(kept->compress(PressSpec::parse("snapkv:budget=32,window=8"), ws), Error);  // one-shot

  auto pending = e->new_sequence({});
  pending->begin_prefill(p, {});
  EXPECT_THROW(pending->fork(), Error);
}

TEST(Fork, ForkCostsItsKVBytesAndCopiesAreIndependent) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e);
  auto a = e->new_sequence({});
  e->prefill(*a, prompt(150, V, 9), {}, ws);
  auto b = a->fork();
  EXPECT_EQ(b->stats().kv_cache_bytes, a->stats().kv_cache_bytes);
  EXPECT_EQ(b->kv_cache().capacity_bytes(), b->stats().kv_cache_bytes);  // exactly sized copy
  Batch batch;
  batch.add(*b, 17);
  e->step(batch, ws);
  EXPECT_EQ(a->n_past(), 150);
  EXPECT_EQ(b->n_past(), 151);
  a->reset();
  EXPECT_EQ(a->stats().kv_cache_bytes, 0u);
  EXPECT_EQ(b->n_past(), 151);
}

// What an idle sequence holds besides its KV entries: the prefill logits (n_vocab floats) until it
// decodes, the retained window queries until compress(); after both, only the records.
TEST(Fork, CompressFreesTheRetainedQueriesAndDecodingFreesThePrefillLogits) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto& c = e->info();
  Workspace ws(*e);
  auto plain = e->new_sequence({});
  e->prefill(*plain, prompt(200, V, 3), {}, ws);
  auto s = e->new_sequence({});
  PrefillOptions po;
  po.retain_window = 16;
  e->prefill(*s, prompt(200, V, 3), po, ws);
  const size_t logits_bytes = static_cast<size_t>(V) * sizeof(float);
  const size_t queries_bytes = static_cast<size_t>(c.n_layer) * c.n_head * 16 * c.head_dim * sizeof(float);
  EXPECT_GE(plain->constant_bytes(), logits_bytes);
  EXPECT_GE(s->constant_bytes(), plain->constant_bytes() + queries_bytes);
  s->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  ASSERT_TRUE(s->stats().compressed);
  // The queries are gone (the records differ only by the per-layer kept statistics).
  EXPECT_LT(s->constant_bytes(), plain->constant_bytes() + 256);
  EXPECT_EQ(s->prefill_logits().size(), static_cast<size_t>(V));
  const size_t s_before = s->constant_bytes(), plain_before = plain->constant_bytes();
  Batch b;
  b.add(*s, 5);
  b.add(*plain, 5);
  e->step(b, ws);
  EXPECT_TRUE(s->prefill_logits().empty());
  EXPECT_TRUE(plain->prefill_logits().empty());
  EXPECT_EQ(s_before - s->constant_bytes(), logits_bytes);
  EXPECT_EQ(plain_before - plain->constant_bytes(), logits_bytes);
}

}  // namespace
}  // namespace snapkv

namespace snapkv {
namespace {

// window=question (issue 11): the prompt's question span, given as PrefillOptions::question_tokens,
// is the observation window: the cache equals a fixed window of that size, in the prefill and on a
// compressed fork, and stats() reports the window used.
TEST(Fork, QuestionWindowEqualsTheFixedWindowOfItsSpan) {
  auto e = rtest::stories();
  const auto p = rtest::prompt(300, e->info().n_vocab, 9);
  Workspace ws(*e);
  SequenceOptions so;
  so.log_kept = true;
  for (const int64_t span : {int64_t{3}, int64_t{20}, int64_t{100}}) {
    const int W = static_cast<int>(std::clamp<int64_t>(span, 8, 40));
    auto fixed = e->new_sequence(so);
    PrefillOptions fo;
    fo.press = PressSpec::parse("snapkv:budget=90,window=" + std::to_string(W));
    e->prefill(*fixed, p, fo, ws);

    auto q = e->new_sequence(so);
    PrefillOptions qo;
    qo.press = PressSpec::parse("snapkv:budget=90,window=question,window_max=40");
    qo.question_tokens = span;
    e->prefill(*q, p, qo, ws);
    rtest::expect_same_cache(q->kv_cache(), fixed->kv_cache(), "prefill span " + std::to_string(span));
    EXPECT_EQ(q->stats().window, W);
    EXPECT_EQ(fixed->stats().window, W);

    auto base = e->new_sequence(so);
    PrefillOptions bo;
    bo.retain_window = 40;
    bo.question_tokens = span;
    e->prefill(*base, p, bo, ws);
    auto f = base->fork();
    f->compress(qo.press, ws);
    rtest::expect_same_cache(f->kv_cache(), fixed->kv_cache(), "fork span " + std::to_string(span));
    EXPECT_EQ(f->stats().window, W);
  }
  // A span longer than the prompt is refused before anything runs.
  auto bad = e->new_sequence(so);
  PrefillOptions po;
  po.question_tokens = 301;
  EXPECT_THROW(e->prefill(*bad, p, po, ws), Error);
  EXPECT_EQ(bad->n_past(), 0);
}

}  // namespace
}  // namespace snapkv
