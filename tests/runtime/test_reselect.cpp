// Re-selection from the cold tier (issue 10, PrefillOptions::reselect): a document compressed
// once, then a follow-up question prefilled with reselect brings back the prompt entries that
// question needs. Proved here on stories260K:
//  - a question whose tokens are the observation window reproduces exactly the one-shot SnapKV
//    selection of document + question (F16 cold tier: the restored rows are exact), cache and logits;
//  - a budget covering the prompt (nothing compressed) leaves nothing to re-select: bit-identical
//    to the full cache;
//  - each head keeps as many prompt entries as before, everything after the prompt stays, evicted
//    entries come back as their int8 cold copies, kv_cold_bytes is the formula;
//  - forks share the cold tier and re-select independently; a disk tier equals the RAM tier;
//  - misuse is a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "runtime/runtime_util.h"
#include "runtime/sequence_state.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using rtest::prompt;

SequenceOptions cold_opts(const std::string& tier, KVType kv = KVType::F16) {
  SequenceOptions so;
  so.kv_type = kv;
  so.log_kept = true;
  so.cold_tier = parse_cold_tier(tier);
  return so;
}

std::vector<float> prefill(const Engine& e, Sequence& s, const std::vector<int32_t>& t, const std::string& press,
                           bool reselect, Workspace& ws) {
  PrefillOptions po;
  po.press = PressSpec::parse(press);
  po.reselect = reselect;
  const auto l = e.prefill(s, t, po, ws);
  return {l.begin(), l.end()};
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Reselect, QuestionAsTheWindowReproducesTheOneShotSelection) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const int64_t L = 300, Q = 16, C = 64;
  const auto doc = prompt(L, V, 11);
  const auto question = prompt(Q, V, 12, -1);
  Workspace ws(*e);
  // Document compressed alone (its own window of 16), then the question re-selects with W = 16.
  auto a = e->new_sequence(cold_opts("f16"));
  prefill(*e, *a, doc, "snapkv:budget=64,window=16", false, ws);
  ASSERT_TRUE(a->stats().compressed);
  const auto la = prefill(*e, *a, question, "none", true, ws);
  EXPECT_EQ(a->stats().n_reselections, 1);
  EXPECT_EQ(a->stats().reselect_window, Q);
  // One shot: document + question with the question as SnapKV's window and C + W kept, so the
  // document part keeps C positions as the re-selection does.
  SequenceOptions so;
  so.kv_type = KVType::F16;
  so.log_kept = true;
  auto b = e->new_sequence(so);
  const auto lb = prefill(*e, *b, concat(doc, question), "snapkv:budget=80,window=16", false, ws);
  EXPECT_TRUE(std::equal(la.begin(), la.end(), lb.begin())) << "question logits";
  rtest::expect_same_cache(a->kv_cache(), b->kv_cache(), "re-selected vs one-shot");
  EXPECT_EQ(a->stats().kv_cache_bytes, b->stats().kv_cache_bytes);
  // The log holds the document's compression and then the re-selection, layer by layer.
  ASSERT_EQ(a->kept().size(), 2 * b->kept().size());
  for (size_t k = 0; k < b->kept().size(); ++k) {
    const KeptLayer& re = a->kept()[b->kept().size() + k];
    const KeptLayer& one = b->kept()[k];
    for (size_t h = 0; h < one.positions.size(); ++h) {
      std::vector<int32_t> doc_part;
      for (int32_t p : one.positions[h])
        if (p < L) doc_part.push_back(p);
      EXPECT_EQ(re.positions[h], doc_part) << "layer " << one.layer << " head " << h;
      EXPECT_EQ(static_cast<int64_t>(re.positions[h].size()), C);
    }
  }
  // Decoding continues identically.
  Batch bt;
  int32_t t = argmax(la);
  for (int s = 0; s < 5; ++s) {
    bt.clear();
    bt.add(*a, t);
    bt.add(*b, t);
    e->step(bt, ws);
    ASSERT_TRUE(std::equal(bt.logits(0).begin(), bt.logits(0).end(), bt.logits(1).begin())) << "step " << s;
    t = argmax(bt.logits(0));
  }
}

TEST(Reselect, BudgetCoveringThePromptIsTheFullCache) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto doc = prompt(200, V, 21);
  const auto question = prompt(10, V, 22, -1);
  Workspace ws(*e);
  auto a = e->new_sequence(cold_opts("int8"));
  prefill(*e, *a, doc, "snapkv:budget=256,window=16", false, ws);
  EXPECT_FALSE(a->stats().compressed);
  const auto la = prefill(*e, *a, question, "none", true, ws);
  EXPECT_EQ(a->stats().kv_cold_bytes, 0u);
  EXPECT_EQ(a->stats().n_reselections, 0);
  SequenceOptions so;
  so.kv_type = KVType::F16;
  auto full = e->new_sequence(so);
  prefill(*e, *full, doc, "none", false, ws);
  const auto lf = prefill(*e, *full, question, "none", false, ws);
  EXPECT_TRUE(std::equal(la.begin(), la.end(), lf.begin()));
  rtest::expect_same_cache(a->kv_cache(), full->kv_cache(), "budget >= prompt");
}

TEST(Reselect, EvictedEntriesComeBackFromTheInt8ColdTier) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const int64_t L = 320, C = 48;
  const auto doc = prompt(L, V, 31);
  const auto q1 = prompt(12, V, 32, -1);
  const auto q2 = prompt(20, V, 33, -1);
  Workspace ws(*e);
  auto a = e->new_sequence(cold_opts("int8"));
  prefill(*e, *a, doc, "snapkv:budget=48,window=8", false, ws);
  const KVCache before = a->kv_cache().clone();
  // Cold bytes: every layer (stories260K: 5 full-attention layers) x KV heads x (K + V) x L rows.
  const auto& cfg = e->info();
  const size_t row = cold_row_bytes(ColdFormat::Int8, cfg.head_dim);
  EXPECT_EQ(a->stats().kv_cold_bytes,
            static_cast<size_t>(cfg.n_layer) * static_cast<size_t>(cfg.n_head_kv) * 2 * static_cast<size_t>(L) * row);
  const size_t hot_bytes = a->stats().kv_cache_bytes;
  prefill(*e, *a, q1, "none", true, ws);
  // A full reference of the same prompt, for the values of re-admitted entries.
  SequenceOptions so;
  so.kv_type = KVType::F16;
  auto full = e->new_sequence(so);
  prefill(*e, *full, doc, "none", false, ws);
  int came_back = 0;
  std::vector<float> x(static_cast<size_t>(cfg.head_dim)), y(x.size());
  for (int il = 0; il < cfg.n_layer; ++il)
    for (size_t h = 0; h < before.layer(il).heads.size(); ++h) {
      const KVHeadCache& old_h = before.layer(il).heads[h];
      const KVHeadCache& new_h = a->kv_cache().layer(il).heads[h];
      const auto np = new_h.positions();
      ASSERT_EQ(new_h.size(), C + 12) << "layer " << il << " head " << h;  // C prompt entries + the question
      for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(np[static_cast<size_t>(C + j)], L + j);
      const std::set<int32_t> old_set(old_h.positions().begin(), old_h.positions().end());
      for (int64_t i = 0; i < C; ++i) {
        const int32_t p = np[static_cast<size_t>(i)];
        if (old_set.count(p)) continue;
        ++came_back;
        // An evicted entry came back as its int8 copy: within max|x| / 254 (+ the F16 rounding).
        full->kv_cache().layer(il).heads[h].key_row(p, x.data());
        new_h.key_row(i, y.data());
        float amax = 0;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        for (size_t d = 0; d < x.size(); ++d)
          EXPECT_LE(std::fabs(x[d] - y[d]), amax / 254 + 1e-3f * std::fabs(x[d]) + 1e-6f);
      }
    }
  EXPECT_GT(came_back, 0) << "a different question should bring back some evicted entries";
  // The hot cache grew by the question only.
  EXPECT_EQ(a->stats().kv_cache_bytes,
            hot_bytes + static_cast<size_t>(cfg.n_layer * cfg.n_head_kv) * 12 * 2 * cfg.head_dim * 2);
  // A second question: the first question (and its position) stays hot.
  prefill(*e, *a, q2, "none", true, ws);
  EXPECT_EQ(a->stats().n_reselections, 2);
  for (int il = 0; il < cfg.n_layer; ++il)
    for (const KVHeadCache& hc : a->kv_cache().layer(il).heads) {
      ASSERT_EQ(hc.size(), C + 12 + 20);
      EXPECT_EQ(hc.positions()[static_cast<size_t>(C)], L);
      EXPECT_EQ(hc.positions().back(), L + 31);
    }
}

TEST(Reselect, ForksShareTheColdTierAndDiskEqualsRam) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto doc = prompt(260, V, 41);
  const auto q1 = prompt(9, V, 42, -1);
  const auto q2 = prompt(14, V, 43, -1);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("snapkv_cold_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Workspace ws(*e);
  auto ram = e->new_sequence(cold_opts("int8"));
  auto disk = e->new_sequence(cold_opts("disk:" + dir.string()));
  prefill(*e, *ram, doc, "snapkv:budget=40,window=8", false, ws);
  prefill(*e, *disk, doc, "snapkv:budget=40,window=8", false, ws);
  EXPECT_EQ(ram->stats().kv_cold_bytes, disk->stats().kv_cold_bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0) << "unlinked at creation";
  auto fork = ram->fork();
  EXPECT_EQ(fork->state().cold.get(), ram->state().cold.get()) << "forks share the store";
  EXPECT_EQ(fork->stats().kv_cold_bytes, ram->stats().kv_cold_bytes);
  const auto l_ram = prefill(*e, *ram, q1, "none", true, ws);
  const auto l_disk = prefill(*e, *disk, q1, "none", true, ws);
  EXPECT_TRUE(std::equal(l_ram.begin(), l_ram.end(), l_disk.begin()));
  rtest::expect_same_cache(ram->kv_cache(), disk->kv_cache(), "disk vs RAM");
  // The fork re-selects for its own question from the shared store; a fresh copy agrees.
  const auto l_fork = prefill(*e, *fork, q2, "none", true, ws);
  auto again = e->new_sequence(cold_opts("int8"));
  prefill(*e, *again, doc, "snapkv:budget=40,window=8", false, ws);
  const auto l_again = prefill(*e, *again, q2, "none", true, ws);
  EXPECT_TRUE(std::equal(l_fork.begin(), l_fork.end(), l_again.begin()));
  rtest::expect_same_cache(fork->kv_cache(), again->kv_cache(), "fork vs fresh");
  disk.reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
  fs::remove_all(dir);
}

// The hooks in Engine::step: a re-selecting question prefilled in slices of a small row budget,
// in the same steps as another sequence's decode rows, equals the question prefilled in one go.
TEST(Reselect, SlicedAndBatchedEqualsInOneGo) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto doc = prompt(280, V, 61);
  const auto q = prompt(23, V, 62, -1);
  Workspace ws(*e);
  auto once = e->new_sequence(cold_opts("int8"));
  prefill(*e, *once, doc, "snapkv:budget=48,window=8", false, ws);
  auto sliced = once->fork();
  auto other = e->new_sequence({});
  prefill(*e, *other, prompt(40, V, 63), "none", false, ws);
  const auto l_once = prefill(*e, *once, q, "none", true, ws);
  PrefillOptions po;
  po.reselect = true;
  sliced->begin_prefill(q, po);
  Batch b;
  int steps = 0;
  int32_t t = 5;
  while (sliced->prefilling()) {
    b.clear();
    b.add(*other, t);
    b.add_prefill(*sliced, 7);  // 7 token-layers per step: the question crosses layers mid-step
    e->step(b, ws);
    t = argmax(b.logits(0));
    ++steps;
  }
  EXPECT_GT(steps, 10);
  const auto l_sliced = sliced->prefill_logits();
  EXPECT_TRUE(std::equal(l_once.begin(), l_once.end(), l_sliced.begin()));
  rtest::expect_same_cache(once->kv_cache(), sliced->kv_cache(), "sliced vs in one go");
  EXPECT_EQ(sliced->stats().n_reselections, 1);
}

// Each head keeps its own share (AdaKV gives heads different budgets), the sinks stay, with an F32
// cache and a one-token question (W = 1).
TEST(Reselect, EachHeadKeepsItsShareAndItsSinks) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const int64_t L = 300;
  const auto doc = prompt(L, V, 71);
  Workspace ws(*e);
  for (const std::vector<int32_t>& q : {prompt(1, V, 72, -1), prompt(17, V, 73, -1)}) {
    auto s = e->new_sequence(cold_opts("int8", KVType::F32));
    prefill(*e, *s, doc, "adakv:budget=40,window=8,sinks=4", false, ws);
    const KVCache before = s->kv_cache().clone();
    prefill(*e, *s, q, "none", true, ws);
    EXPECT_EQ(s->stats().reselect_window, std::min<int>(8, static_cast<int>(q.size())));
    bool unequal_shares = false;
    for (int il = 0; il < e->info().n_layer; ++il)
      for (size_t h = 0; h < before.layer(il).heads.size(); ++h) {
        const auto& hb = before.layer(il).heads[h];
        const auto& ha = s->kv_cache().layer(il).heads[h];
        ASSERT_EQ(ha.size(), hb.size() + static_cast<int64_t>(q.size())) << "layer " << il << " head " << h;
        unequal_shares = unequal_shares || hb.size() != before.layer(il).heads[0].size();
        for (int32_t p = 0; p < 4; ++p) EXPECT_EQ(ha.positions()[static_cast<size_t>(p)], p) << "sink " << p;
      }
    EXPECT_TRUE(unequal_shares) << "adakv should give heads different budgets here";
  }
}

// Gemma 3 (5 of every 6 layers sliding-window, never compressed): only the full-attention layers
// go cold and are re-selected; the sliding-window layers hold what they would without the tier.
TEST(Reselect, GemmaOnlyTheFullAttentionLayersGoCold) {
  auto e = rtest::gemma();
  if (!e) GTEST_SKIP() << "Gemma 3 not in the model cache (scripts/get-model.sh)";
  const ModelInfo& info = e->info();
  const int64_t L = 700;
  const auto doc = prompt(L, info.n_vocab, 81, 2);
  const auto q = prompt(12, info.n_vocab, 82, -1);
  Workspace ws(*e);
  auto cold = e->new_sequence(cold_opts("int8"));
  auto plain = e->new_sequence(cold_opts("int8"));
  prefill(*e, *cold, doc, "snapkv:budget=128,window=16", false, ws);
  prefill(*e, *plain, doc, "snapkv:budget=128,window=16", false, ws);
  int n_full = 0;
  for (int w : info.layer_window) n_full += w == 0 ? 1 : 0;
  ASSERT_GT(n_full, 0);
  ASSERT_LT(n_full, info.n_layer);
  EXPECT_EQ(cold->stats().kv_cold_bytes, static_cast<size_t>(n_full) * static_cast<size_t>(info.n_head_kv) * 2 *
                                             static_cast<size_t>(L) * cold_row_bytes(ColdFormat::Int8, info.head_dim));
  prefill(*e, *cold, q, "none", true, ws);
  PrefillOptions po;
  e->prefill(*plain, q, po, ws);  // the same question without re-selection
  EXPECT_EQ(cold->stats().n_reselections, 1);
  for (int il = 0; il < info.n_layer; ++il) {
    const auto& a = cold->kv_cache().layer(il).heads;
    const auto& b = plain->kv_cache().layer(il).heads;
    for (size_t h = 0; h < a.size(); ++h) {
      ASSERT_EQ(a[h].size(), b[h].size()) << "layer " << il;  // same hot size, re-selected or not
      if (info.layer_window[static_cast<size_t>(il)] > 0) {
        EXPECT_TRUE(std::equal(a[h].positions().begin(), a[h].positions().end(), b[h].positions().begin()))
            << "sliding-window layer " << il << " is untouched";
      }
    }
  }
}

TEST(Reselect, MisuseIsAClearError) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto doc = prompt(200, V, 51);
  const auto q = prompt(8, V, 52, -1);
  Workspace ws(*e);
  auto plain = e->new_sequence({});
  prefill(*e, *plain, doc, "snapkv:budget=40,window=8", false, ws);
  EXPECT_THROW(prefill(*e, *plain, q, "none", true, ws), Error);
  auto cold = e->new_sequence(cold_opts("int8"));
  EXPECT_THROW(prefill(*e, *cold, q, "none", true, ws), Error) << "nothing held yet";
  prefill(*e, *cold, doc, "snapkv:budget=40,window=8", false, ws);
  EXPECT_THROW(prefill(*e, *cold, q, "snapkv:budget=40", true, ws), Error);
  EXPECT_EQ(cold->n_past(), 200) << "a refused prefill changes nothing";
  EXPECT_THROW(parse_cold_tier("int4"), Error);
  EXPECT_THROW(parse_cold_tier("disk:"), Error);
  // A cold directory that does not exist fails before anything changes, naming it: in a
  // compressing prefill, and in compress() of a held prompt (which stays as it was).
  auto bad = e->new_sequence(cold_opts("disk:/nonexistent/snapkv-cold"));
  try {
    prefill(*e, *bad, doc, "snapkv:budget=40,window=8", false, ws);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("/nonexistent/snapkv-cold"), std::string::npos) << err.what();
  }
  EXPECT_EQ(bad->n_past(), 0);
  PrefillOptions keep;
  keep.retain_window = 8;
  e->prefill(*bad, doc, keep, ws);
  EXPECT_THROW(bad->compress(PressSpec::parse("snapkv:budget=40,window=8"), ws), Error);
  EXPECT_EQ(bad->n_past(), 200);
  EXPECT_FALSE(bad->stats().compressed);
  EXPECT_EQ(bad->kv_cache().layer(0).heads[0].size(), 200) << "the prompt is still held whole";
}

}  // namespace
}  // namespace snapkv
