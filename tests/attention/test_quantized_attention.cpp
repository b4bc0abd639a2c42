// A Q8_0 or Q4_0 KV cache (keys and values of one type, or q8_0 keys with q4_0 values and the
// converse) is attended exactly as an F32 cache holding its dequantized values: prefill
// (blocked, several queries) and decode (split-K) give the same bits, for GQA / MQA shapes, sliding
// windows, ragged heads and 1 or 2 threads. (Prefill dequantizes a key block into f32, AVX-512
// and AVX2 decode dequantize both types in registers (attn::Q8Rows / Q4Rows; scalar builds into
// a per-thread tile), and all run the F32 arithmetic; this pins that contract, so the accuracy of
// q8_0 / q4_0 is only the quantization's. Decode at head_dim 32 and 96 covers tiles that start in
// the middle of a 32-element block and the 64- plus 16-wide V tiles.) One exception: decode over
// Q8_0 keys with AVX512-VNNI scores an int16-rounded query (attention/decode_q8_keys.h); there the
// F32 twin gets that rounded query and the two agree to f32 rounding (< 2e-6), not bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "attention/attention.h"
#include "attention/decode_q8_keys.h"
#include "kv/kv_cache.h"
#include "snapkv/error.h"
#include "test_util.h"

namespace snapkv {
namespace {

struct Q8Case {
  int n_head, n_head_kv, head_dim;
  int64_t n_q;    // queries at the last n_q positions (1 = decode kernel)
  int64_t n_pos;  // positions 0..n_pos-1, each kept in a head with probability 0.85 (the last always)
  int window;     // 0 = full attention
};

void PrintTo(const Q8Case& c, std::ostream* os) {
  *os << "n_head " << c.n_head << " n_head_kv " << c.n_head_kv << " head_dim " << c.head_dim << " n_q " << c.n_q
      << " n_pos " << c.n_pos << " window " << c.window;
}

class QuantizedAttentionEqualsDequantizedF32 : public testing::TestWithParam<std::tuple<KVType, KVType, Q8Case>> {};

size_t block_bytes(KVType t) { return t == KVType::Q8_0 ? kKVQ8BlockBytes : kKVQ4BlockBytes; }

TEST_P(QuantizedAttentionEqualsDequantizedF32, BitForBit) {
  const KVType k_type = std::get<0>(GetParam());
  const KVType v_type = std::get<1>(GetParam());
  const Q8Case& c = std::get<2>(GetParam());
  std::mt19937_64 rng(11 + static_cast<uint64_t>(c.n_q));
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  KVLayerCache q8, f32;
  q8.window = f32.window = c.window;
  for (int g = 0; g < c.n_head_kv; ++g) {
    std::vector<int32_t> pos;
    for (int32_t p = 0; p < c.n_pos; ++p)
      if (ud(rng) < 0.85 || p == c.n_pos - 1) pos.push_back(p);
    const auto n = static_cast<int64_t>(pos.size());
    const std::vector<float> k = test::randn(static_cast<size_t>(n * c.head_dim), rng(), 2.0f);
    const std::vector<float> v = test::randn(k.size(), rng());
    KVHeadCache hq(k_type, v_type, c.head_dim);
    hq.append(n, pos.data(), k.data(), c.head_dim, v.data(), c.head_dim);
    // The F32 twin holds exactly the dequantized rows.
    std::vector<float> kd(k.size()), vd(v.size());
    hq.keys().rows(0, n, kd.data());
    hq.values().rows(0, n, vd.data());
    KVHeadCache hf(KVType::F32, c.head_dim);
    hf.append(n, pos.data(), kd.data(), c.head_dim, vd.data(), c.head_dim);
    EXPECT_EQ(hq.bytes(), static_cast<size_t>(n) *
                              (static_cast<size_t>(c.head_dim) / 32 * (block_bytes(k_type) + block_bytes(v_type))));
    q8.heads.push_back(std::move(hq));
    f32.heads.push_back(std::move(hf));
  }
  const std::vector<float> q = test::randn(static_cast<size_t>(c.n_q * c.n_head * c.head_dim), rng());
  std::vector<int32_t> qpos;
  for (int64_t t = 0; t < c.n_q; ++t) qpos.push_back(static_cast<int32_t>(c.n_pos - c.n_q + t));
  const AttentionParams p{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                          c.window};
  // Decode over Q8_0 keys may score with an int16 query (attention/decode_q8_keys.h): the F32 twin
  // then gets that query, and the two sum their products in another order (int32 per 64-dim chunk,
  // or f32), so they agree to f32 rounding, not bit for bit.
  std::vector<float> q_f32 = q;
  bool i16 = false;
  if (c.n_q == 1 && k_type == KVType::Q8_0)
    for (int h = 0; h < c.n_head; ++h) {
      const size_t o = static_cast<size_t>(h) * static_cast<size_t>(c.head_dim);
      i16 = attn::query_i16_values(q.data() + o, c.head_dim, q_f32.data() + o) || i16;
    }
  EXPECT_EQ(i16, attn::decode_q8_keys_i16() && c.n_q == 1 && k_type == KVType::Q8_0);
  AttentionWorkspace ws(p, c.n_q);
  std::vector<float> first;
  for (const int threads : {1, 2}) {
    std::vector<float> out_q8(q.size(), -7.0f), out_f32(q.size(), -5.0f);
    attention(p, q.data(), qpos.data(), c.n_q, q8, out_q8.data(), ws, threads);
    attention(p, q_f32.data(), qpos.data(), c.n_q, f32, out_f32.data(), ws, threads);
    if (!i16) {
      EXPECT_EQ(out_q8, out_f32) << "threads " << threads;
    } else {
      // Outputs are weighted means of N(0, 1) values; the two score sums differ by f32 rounding
      // (~1e-7 relative), so 2e-6 leaves a margin of ~10x over the largest difference seen.
      float worst = 0.0f;
      for (size_t i = 0; i < out_q8.size(); ++i) {
        ASSERT_FALSE(std::isnan(out_q8[i])) << i;
        worst = std::max(worst, std::fabs(out_q8[i] - out_f32[i]));
      }
      EXPECT_LT(worst, 2e-6f) << "threads " << threads;
    }
    if (first.empty()) first = out_q8;
    EXPECT_EQ(out_q8, first) << "threads " << threads;
    bool any = false;
    for (const float x : out_q8) any = any || x != 0.0f;
    EXPECT_TRUE(any);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantizedAttentionEqualsDequantizedF32,
                         testing::Combine(testing::Values(KVType::Q8_0, KVType::Q4_0),
                                          testing::Values(KVType::Q8_0, KVType::Q4_0),
                                          testing::Values(Q8Case{9, 3, 64, 1, 1500, 0}, Q8Case{4, 1, 256, 1, 900, 512},
                                                          Q8Case{9, 3, 64, 45, 700, 0}, Q8Case{4, 1, 256, 33, 300, 0},
                                                          Q8Case{8, 2, 32, 20, 260, 40}, Q8Case{4, 4, 96, 3, 129, 0},
                                                          Q8Case{8, 2, 32, 1, 1700, 0},
                                                          Q8Case{4, 4, 96, 1, 1300, 40})));

TEST(QuantizedAttentionEqualsDequantizedF32, HeadDimNotAMultipleOf32IsRejected) {
  for (const KVType t : {KVType::Q8_0, KVType::Q4_0}) {
    EXPECT_THROW(KVHeadCache(t, 72), Error);
    EXPECT_THROW(KVCache(2, 1, 48, t, {0, 0}), Error);
    EXPECT_NO_THROW(KVHeadCache(t, 96));
    EXPECT_THROW(KVHeadCache(t, t == KVType::Q8_0 ? KVType::Q4_0 : KVType::Q8_0, 72), Error);
  }
}

// Mixed key / value types must both be quantized: F16 / F32 do not mix with another type.
TEST(QuantizedAttentionEqualsDequantizedF32, UnquantizedTypesDoNotMix) {
  const KVType all[] = {KVType::F16, KVType::F32, KVType::Q8_0, KVType::Q4_0};
  for (const KVType k : all)
    for (const KVType v : all) {
      const bool ok = k == v || (kv_type_quantized(k) && kv_type_quantized(v));
      EXPECT_EQ(kv_types_combine(k, v), ok) << kv_type_name(k) << "/" << kv_type_name(v);
      EXPECT_EQ(kv_types_problem(k, v, 64).empty(), ok);
      if (ok) {
        const KVHeadCache h(k, v, 64);
        EXPECT_EQ(h.k_type(), k);
        EXPECT_EQ(h.v_type(), v);
        EXPECT_EQ(h.k_row_bytes(), kv_row_bytes(k, 64));
        EXPECT_EQ(h.v_row_bytes(), kv_row_bytes(v, 64));
      } else {
        EXPECT_THROW(KVHeadCache(k, v, 64), Error);
        EXPECT_THROW(KVCache(1, 1, 64, k, v, {0}), Error);
      }
    }
}

}  // namespace
}  // namespace snapkv
