// A sequence with a block-quantized KV cache (`--kv-type q8_0` / `q4_0`, and q8_0 keys with q4_0
// values, `--kv-type-v q4_0`) on a small synthetic llama model (head_dim 32): a press whose budget covers the prompt
// leaves it bit-for-bit the full quantized cache; compression and quantization multiply (bytes = kept entries x
// quantized row size); its logits stay close to an F32 cache's; a saved session restores the same bits; batched decode
// equals alone; a model whose head_dim is not a multiple of 32 gets a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime_util.h"
#include "snapkv/cold_tier.h"
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

/// The quantized cache types under test: keys `k`, values `v`.
struct KVTypes {
  KVType k, v;
  bool mixed() const { return k != v; }
  std::optional<KVType> v_opt() const { return mixed() ? std::optional<KVType>(v) : std::nullopt; }
  /// Bytes of one entry of one head at head_dim 32 (key row + value row).
  size_t entry_bytes() const { return kv_entry_bytes(k, v, 32); }
};

class QuantizedKV : public testing::TestWithParam<KVTypes> {};

TEST_P(QuantizedKV, BudgetCoveringThePromptEqualsTheFullCacheBitForBit) {
  const KVTypes kv = GetParam();
  auto e = tiny();
  const auto p = prompt(300, e->info().n_vocab, 7);
  const auto full = rtest::run_alone(*e, p, "none", 6, kv.k, 0, kv.v_opt());
  for (const std::string press : {"snapkv:budget=300,window=16", "snapkv:budget=1000,window=32"}) {
    const auto same = rtest::run_alone(*e, p, press, 6, kv.k, 0, kv.v_opt());
    EXPECT_EQ(same.tokens, full.tokens) << press;
    EXPECT_EQ(same.logits, full.logits) << press;
  }
}

TEST_P(QuantizedKV, CompressionAndQuantizationMultiply) {
  const KVTypes kv = GetParam();
  const size_t eb = kv.entry_bytes();  // 68 (q8_0), 36 (q4_0), 52 (q8_0 keys, q4_0 values)
  auto e = tiny();
  const auto p = prompt(600, e->info().n_vocab, 8);
  auto bytes = [&](KVTypes t, const std::string& press) {
    SequenceOptions so;
    so.kv_type = t.k;
    so.kv_type_v = t.v_opt();
    so.n_ctx = 2048;
    auto s = e->new_sequence(so);
    Workspace ws(*e);
    PrefillOptions po;
    po.press = PressSpec::parse(press);
    (void)e->prefill(*s, p, po, ws);
    EXPECT_EQ(s->kv_cache().k_type(), t.k);
    EXPECT_EQ(s->kv_cache().v_type(), t.v);
    EXPECT_EQ(s->kv_type(), t.k);
    EXPECT_EQ(s->kv_type_v(), t.v);
    EXPECT_EQ(s->stats().kv_cache_bytes_full, e->info().kv_bytes_per_token(t.k, t.v) * p.size());
    return s->stats().kv_cache_bytes;
  };
  const KVTypes f16{KVType::F16, KVType::F16};
  const size_t f16_full = bytes(f16, "none"), q_full = bytes(kv, "none");
  const size_t f16_snap = bytes(f16, "snapkv:budget=128,window=16");
  const size_t q_snap = bytes(kv, "snapkv:budget=128,window=16");
  // 600 tokens x 2 layers x 2 KV heads x (K row + V row) (128 bytes for f16 at head_dim 32).
  EXPECT_EQ(f16_full, size_t{600} * 2 * 2 * 128);
  EXPECT_EQ(q_full, size_t{600} * 2 * 2 * eb);
  // The press keeps the same number of entries per head whatever the element types.
  EXPECT_LT(f16_snap, f16_full / 4);
  EXPECT_EQ(q_snap * 128, f16_snap * eb);
}

TEST_P(QuantizedKV, LogitsStayCloseToAnF32Cache) {
  // Relative L2 error of the logits against an F32 cache, per step while the greedy tokens agree.
  // Random weights make this model sensitive: F16 itself errs by 1.1-1.9 % here, q8_0 by 1.9-2.4 %,
  // q4_0 (16x coarser steps) by 10-12 %, q8_0 keys with q4_0 values by 8-11 % (on these random
  // weights the values' rounding dominates; on the real models the keys' does: docs/quality.md).
  const KVTypes kv = GetParam();
  const bool q4 = kv.k == KVType::Q4_0 || kv.v == KVType::Q4_0;
  auto e = tiny();
  const auto p = prompt(400, e->info().n_vocab, 9);
  const auto ref = rtest::run_alone(*e, p, "none", 4, KVType::F32);
  const auto f16 = rtest::run_alone(*e, p, "none", 4, KVType::F16);
  const auto qk = rtest::run_alone(*e, p, "none", 4, kv.k, 0, kv.v_opt());
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
    if (s > 0 && (qk.tokens[s - 1] != ref.tokens[s - 1] || f16.tokens[s - 1] != ref.tokens[s - 1])) break;
    const double eq = rel(qk, s), e16 = rel(f16, s);
    std::printf("%s/%s step %zu: relative logit error %.4f (f16 %.4f)\n", kv_type_name(kv.k), kv_type_name(kv.v), s, eq,
                e16);
    EXPECT_LT(eq, q4 ? 0.2 : 0.04) << "step " << s;
    if (!q4) {
      EXPECT_LT(eq, 3.0 * e16 + 0.005) << "step " << s;  // the same order as F16's rounding
    }
    EXPECT_GT(eq, 0.0) << "step " << s;  // quantization did change something
  }
}

TEST_P(QuantizedKV, SavedSessionRestoresTheSameBits) {
  auto e = tiny();
  Workspace ws(*e);
  const KVTypes kv = GetParam();
  SequenceOptions so;
  so.kv_type = kv.k;
  so.kv_type_v = kv.v_opt();
  so.n_ctx = 2048;
  auto s = e->new_sequence(so);
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=100,window=16");
  (void)e->prefill(*s, prompt(500, e->info().n_vocab, 10), po, ws);
  const fs::path file = fs::temp_directory_path() / ("snapkv_kv_" + std::string(kv_type_name(kv.k)) + "_" +
                                                     kv_type_name(kv.v) + "_" + std::to_string(::getpid()) + ".snkv");
  save_session(*e, *s, file.string());
  {
    // Format version 1 for one type (older builds read it), 2 when the values' type differs.
    std::ifstream f(file, std::ios::binary);
    char head[12] = {};
    f.read(head, sizeof head);
    uint32_t ver = 0;
    std::memcpy(&ver, head + 8, sizeof ver);
    EXPECT_EQ(ver, kv.mixed() ? 2u : 1u);
  }
  LoadedSession ls = load_session(*e, file.string());
  fs::remove(file);
  EXPECT_EQ(ls.sequence->kv_type(), kv.k);
  EXPECT_EQ(ls.sequence->kv_type_v(), kv.v);
  rtest::expect_same_cache(s->kv_cache(), ls.sequence->kv_cache(), "restored");
  Batch a, b;
  a.add(*s, 5);
  e->step(a, ws);
  b.add(*ls.sequence, 5);
  e->step(b, ws);
  const auto la = a.logits(0), lb = b.logits(0);
  EXPECT_TRUE(std::equal(la.begin(), la.end(), lb.begin(), lb.end()));
}

// A follow-up question re-selects from the cold tier (restoring a compressed layer re-stores each
// hot row in its own type), and a session saved with its cold layers answers it the same way.
TEST_P(QuantizedKV, ColdTierFollowUpAndItsSessionAgree) {
  const KVTypes kv = GetParam();
  auto e = tiny();
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = kv.k;
  so.kv_type_v = kv.v_opt();
  so.n_ctx = 2048;
  so.cold_tier = parse_cold_tier("int8");
  auto s = e->new_sequence(so);
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=64,window=16");
  (void)e->prefill(*s, prompt(400, e->info().n_vocab, 12), po, ws);
  ASSERT_TRUE(s->stats().compressed);
  EXPECT_GT(s->stats().kv_cold_bytes, 0u);
  const fs::path file = fs::temp_directory_path() / ("snapkv_kv_cold_" + std::string(kv_type_name(kv.k)) + "_" +
                                                     kv_type_name(kv.v) + "_" + std::to_string(::getpid()) + ".snkv");
  save_session(*e, *s, file.string());
  LoadedSession ls = load_session(*e, file.string());
  fs::remove(file);
  const auto question = prompt(12, e->info().n_vocab, 13, -1);
  PrefillOptions re;
  re.reselect = true;
  const auto la = e->prefill(*s, question, re, ws);
  const std::vector<float> a(la.begin(), la.end());
  const auto lb = e->prefill(*ls.sequence, question, re, ws);
  EXPECT_EQ(s->stats().n_reselections, 1);
  EXPECT_EQ(ls.sequence->stats().n_reselections, 1);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), lb.begin(), lb.end()));
  EXPECT_EQ(ls.sequence->kv_cache().k_type(), kv.k);
  EXPECT_EQ(ls.sequence->kv_cache().v_type(), kv.v);
  rtest::expect_same_cache(s->kv_cache(), ls.sequence->kv_cache(), "re-selected after a restore");
  // Each head kept as many entries as the press gave it, at the quantized entry size.
  EXPECT_EQ(s->stats().kv_cache_bytes % kv.entry_bytes(), 0u);
}

// Quantized sequences of different lengths and presses stepped together decode exactly as alone
// (with 2 threads the long caches take split-K decode; this test also runs under ThreadSanitizer).
// Four rows per step keep the weight matmuls on their decode kernels, as alone (test_batch.cpp).
TEST_P(QuantizedKV, BatchedDecodeEqualsAloneBitForBit) {
  rtest::expect_batched_equals_alone(
      *tiny(), {{1700, "none"}, {900, "snapkv:budget=128,window=16"}, {450, "tova:budget=64,window=8"}, {37, "none"}},
      8, GetParam().k, 40, GetParam().v_opt());
}

TEST_P(QuantizedKV, HeadDimNotAMultipleOf32IsAClearError) {
  auto e = rtest::stories();  // head_dim 8
  SequenceOptions so;
  so.kv_type = GetParam().k;
  so.kv_type_v = GetParam().v_opt();
  try {
    (void)e->new_sequence(so);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(kv_type_name(GetParam().k)), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("head_dim"), std::string::npos) << err.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedKV,
                         testing::Values(KVTypes{KVType::Q8_0, KVType::Q8_0}, KVTypes{KVType::Q4_0, KVType::Q4_0},
                                         KVTypes{KVType::Q8_0, KVType::Q4_0}),
                         [](const testing::TestParamInfo<KVTypes>& i) {
                           return std::string(kv_type_name(i.param.k)) + (i.param.mixed() ? "_" : "") +
                                  (i.param.mixed() ? kv_type_name(i.param.v) : "");
                         });

// Mixed key / value types that are not both quantized are refused when the sequence is made.
TEST(QuantizedKVMixed, UnquantizedMixIsAClearError) {
  SequenceOptions so;
  so.kv_type = KVType::F16;
  so.kv_type_v = KVType::Q4_0;
  try {
    (void)tiny()->new_sequence(so);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("both be quantized"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace snapkv
