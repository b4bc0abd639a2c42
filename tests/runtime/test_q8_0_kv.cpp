// A sequence with a Q8_0 KV cache (`--kv-type q8_0`) on a small synthetic llama model (head_dim 32):
// a press whose budget covers the prompt leaves it bit-for-bit the full Q8_0 cache; compression and
// quantization multiply (bytes = kept entries x Q8_0 row size); its logits stay close to an F32
// cache's; a saved session restores the same bits; batched decode equals alone; a model whose
// head_dim is not a multiple of 32 gets a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime_util.h"
#include "snapkv/session.h"
#include "support/synthetic_model.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;
using rtest::prompt;

/// support/synthetic_model.h's small_q8_kv_config(): head_dim 32, random Q8_0 weights (loaded once).
std::shared_ptr<const Engine> tiny() {
  static const std::shared_ptr<const Engine> e = load_synthetic_engine(small_q8_kv_config(), 2);
  return e;
}

TEST(Q8_0KV, BudgetCoveringThePromptEqualsTheFullCacheBitForBit) {
  auto e = tiny();
  const auto p = prompt(300, e->info().n_vocab, 7);
  const auto full = rtest::run_alone(*e, p, "none", 6, KVType::Q8_0);
  for (const std::string press : {"snapkv:budget=300,window=16", "snapkv:budget=1000,window=32"}) {
    const auto same = rtest::run_alone(*e, p, press, 6, KVType::Q8_0);
    EXPECT_EQ(same.tokens, full.tokens) << press;
    EXPECT_EQ(same.logits, full.logits) << press;
  }
}

TEST(Q8_0KV, CompressionAndQuantizationMultiply) {
  auto e = tiny();
  const auto p = prompt(600, e->info().n_vocab, 8);
  auto bytes = [&](KVType t, const std::string& press) {
    SequenceOptions so;
    so.kv_type = t;
    so.n_ctx = 2048;
    auto s = e->new_sequence(so);
    Workspace ws(*e);
    PrefillOptions po;
    po.press = PressSpec::parse(press);
    (void)e->prefill(*s, p, po, ws);
    EXPECT_EQ(s->kv_cache().type(), t);
    return s->stats().kv_cache_bytes;
  };
  const size_t f16_full = bytes(KVType::F16, "none"), q8_full = bytes(KVType::Q8_0, "none");
  const size_t f16_snap = bytes(KVType::F16, "snapkv:budget=128,window=16");
  const size_t q8_snap = bytes(KVType::Q8_0, "snapkv:budget=128,window=16");
  // 600 tokens x 2 layers x 2 KV heads x (K + V) x row bytes (64 for f16, 34 for q8_0 at head_dim 32).
  EXPECT_EQ(f16_full, size_t{600} * 2 * 2 * 2 * 64);
  EXPECT_EQ(q8_full, size_t{600} * 2 * 2 * 2 * 34);
  // The press keeps the same number of entries per head whatever the element type.
  EXPECT_LT(f16_snap, f16_full / 4);
  EXPECT_EQ(q8_snap * 64, f16_snap * 34);
}

TEST(Q8_0KV, LogitsStayCloseToAnF32Cache) {
  // Relative L2 error of the logits against an F32 cache, per step while the greedy tokens agree.
  // Random weights make this model sensitive: F16 itself errs by 1.1-1.9 % here, q8_0 by 1.9-2.4 %.
  auto e = tiny();
  const auto p = prompt(400, e->info().n_vocab, 9);
  const auto ref = rtest::run_alone(*e, p, "none", 4, KVType::F32);
  const auto f16 = rtest::run_alone(*e, p, "none", 4, KVType::F16);
  const auto q8 = rtest::run_alone(*e, p, "none", 4, KVType::Q8_0);
  auto rel = [&](const rtest::Trace& t, size_t s) {
    const auto& a = ref.logits[s];
    const auto& b = t.logits[s];
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
      den += static_cast<double>(a[i]) * a[i];
    }
    return std::sqrt(num / den);
  };
  for (size_t s = 0; s < ref.logits.size(); ++s) {
    if (s > 0 && (q8.tokens[s - 1] != ref.tokens[s - 1] || f16.tokens[s - 1] != ref.tokens[s - 1])) break;
    const double e8 = rel(q8, s), e16 = rel(f16, s);
    EXPECT_LT(e8, 0.04) << "step " << s;
    EXPECT_LT(e8, 3.0 * e16 + 0.005) << "step " << s;  // the same order as F16's rounding
    EXPECT_GT(e8, 0.0) << "step " << s;                // quantization did change something
  }
}

TEST(Q8_0KV, SavedSessionRestoresTheSameBits) {
  auto e = tiny();
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = KVType::Q8_0;
  so.n_ctx = 2048;
  auto s = e->new_sequence(so);
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=100,window=16");
  (void)e->prefill(*s, prompt(500, e->info().n_vocab, 10), po, ws);
  const fs::path file = fs::temp_directory_path() / ("snapkv_q8kv_" + std::to_string(::getpid()) + ".snkv");
  save_session(*e, *s, file.string());
  LoadedSession ls = load_session(*e, file.string());
  fs::remove(file);
  EXPECT_EQ(ls.sequence->kv_type(), KVType::Q8_0);
  rtest::expect_same_cache(s->kv_cache(), ls.sequence->kv_cache(), "restored");
  Batch a, b;
  a.add(*s, 5);
  e->step(a, ws);
  b.add(*ls.sequence, 5);
  e->step(b, ws);
  const auto la = a.logits(0), lb = b.logits(0);
  EXPECT_TRUE(std::equal(la.begin(), la.end(), lb.begin(), lb.end()));
}

// Q8_0 sequences of different lengths and presses stepped together decode exactly as alone (with
// 2 threads the long caches take split-K decode; this test also runs under ThreadSanitizer). Four
// rows per step keep the weight matmuls on their decode kernels, as alone (test_batch.cpp).
TEST(Q8_0KV, BatchedDecodeEqualsAloneBitForBit) {
  auto e = tiny();
  const int V = e->info().n_vocab;
  struct Case {
    size_t len;
    std::string press;
  };
  const std::vector<Case> cases = {
      {1700, "none"}, {900, "snapkv:budget=128,window=16"}, {450, "tova:budget=64,window=8"}, {37, "none"}};
  const int steps = 8;
  std::vector<rtest::Trace> alone;
  for (size_t i = 0; i < cases.size(); ++i)
    alone.push_back(rtest::run_alone(*e, prompt(cases[i].len, V, 40 + i), cases[i].press, steps, KVType::Q8_0));
  Workspace ws(*e);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<int32_t> next;
  for (size_t i = 0; i < cases.size(); ++i) {
    SequenceOptions so;
    so.kv_type = KVType::Q8_0;
    so.n_ctx = 2048;
    seqs.push_back(e->new_sequence(so));
    PrefillOptions po;
    po.press = PressSpec::parse(cases[i].press);
    const auto l = e->prefill(*seqs.back(), prompt(cases[i].len, V, 40 + i), po, ws);
    ASSERT_TRUE(std::equal(l.begin(), l.end(), alone[i].logits[0].begin())) << i;
    next.push_back(argmax(l));
  }
  Batch b;
  for (int s = 0; s < steps; ++s) {
    b.clear();
    for (size_t i = 0; i < seqs.size(); ++i) b.add(*seqs[i], next[i]);
    e->step(b, ws);
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ(next[i], alone[i].tokens[static_cast<size_t>(s)]) << "seq " << i << " step " << s;
      const auto l = b.logits(static_cast<int>(i));
      EXPECT_TRUE(std::equal(l.begin(), l.end(), alone[i].logits[static_cast<size_t>(s) + 1].begin()))
          << "seq " << i << " step " << s;
      next[i] = argmax(l);
    }
  }
}

TEST(Q8_0KV, HeadDimNotAMultipleOf32IsAClearError) {
  auto e = rtest::stories();  // head_dim 8
  SequenceOptions so;
  so.kv_type = KVType::Q8_0;
  try {
    (void)e->new_sequence(so);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("q8_0"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("head_dim"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace snapkv
