// Misuse and failure paths of the runtime: a rejected or failed step leaves no trace in the
// sequences it did not run, objects outlive what they were made from safely, and hostile values
// are refused with snapkv::Error instead of undefined behaviour.
#include <gtest/gtest.h>

#include <memory>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;

// Engine::prefill whose step is rejected (here: the sequence belongs to another engine) drops
// the prefill; the sequence must then be exactly as before: no press in its statistics and no
// claim to retained window queries that were never computed (compress() used to read them).
TEST(Robustness, RejectedPrefillLeavesTheSequenceAsItWas) {
  auto e = rtest::stories(), other = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(120, V, 31);
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=64,window=16");
  po.retain_window = 16;
  EXPECT_THROW(other->prefill(*seq, p, po, ws), Error);  // the workspace and sequence are e's
  EXPECT_FALSE(seq->prefilling());
  EXPECT_EQ(seq->n_past(), 0);
  EXPECT_EQ(seq->stats().press, "none");
  EXPECT_FALSE(seq->stats().compressed);
  EXPECT_EQ(seq->stats().budget, 0);
  EXPECT_EQ(seq->stats().n_prompt_tokens, 0);
  EXPECT_EQ(seq->stats().compression_note, "");

  // The same prompt again, without retained queries: compress() has nothing to work from.
  e->prefill(*seq, p, {}, ws);
  EXPECT_EQ(seq->n_past(), 120);
  EXPECT_THROW(seq->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws), Error);
  EXPECT_EQ(seq->n_past(), 120);

  // And with them the sequence compresses as a fresh one does.
  auto fresh = e->new_sequence({});
  PrefillOptions keep;
  keep.retain_window = 16;
  e->prefill(*fresh, p, keep, ws);
  fresh->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  EXPECT_TRUE(fresh->stats().compressed);
}

// compress() with a press that keeps the whole prompt (it fits the budget) compresses nothing,
// as a prefill with that press does: the sequence may still be compressed afterwards (a prefill
// with that press leaves the same freedom), and its statistics never claim a compression.
TEST(Robustness, CompressThatKeepsEverythingIsNotOneShot) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  PrefillOptions po;
  po.retain_window = 16;
  e->prefill(*seq, prompt(150, V, 4), po, ws);
  const size_t full = seq->stats().kv_cache_bytes;
  seq->compress(PressSpec::parse("snapkv:budget=4096,window=16"), ws);
  EXPECT_FALSE(seq->stats().compressed);
  EXPECT_FALSE(seq->stats().compression_note.empty());
  EXPECT_EQ(seq->stats().kv_cache_bytes, full);
  seq->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  EXPECT_TRUE(seq->stats().compressed);
  EXPECT_LT(seq->stats().kv_cache_bytes, full);
  EXPECT_THROW(seq->compress(PressSpec::parse("snapkv:budget=32,window=16"), ws), Error);
}

// A workspace keeps its engine's model alive: with a raw pointer, a model loaded later at the
// freed one's address would pass step()'s "made for this engine" check with buffers sized for
// another model.
TEST(Robustness, WorkspaceKeepsItsModelAlive) {
  auto e = rtest::stories();
  std::weak_ptr<const Model> model = e->model_ptr();
  auto ws = std::make_unique<Workspace>(*e);
  e.reset();
  EXPECT_FALSE(model.expired());
  auto e2 = rtest::stories();
  auto seq = e2->new_sequence({});
  Batch b;
  b.add(*seq, 1);
  EXPECT_THROW(e2->step(b, *ws), Error);
  EXPECT_EQ(seq->n_past(), 0);
  ws.reset();
  EXPECT_TRUE(model.expired());
}

}  // namespace
}  // namespace snapkv
