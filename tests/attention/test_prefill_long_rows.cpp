// Query rows whose visible keys do not fit the prefill's per-thread score cache
// (attn::kScoreCacheMaxKeys) take the path that computes the scores again: its softmax sum must
// have the same bits as the cached path's, so a query's output does not depend on which other
// queries share its chunk (and so on how a prompt is cut into chunks). (The sums are in double and
// 1 / sum is rounded to float, so a differently rounded sum shows only now and then: this checks
// the property on one case, the exact-order argument is in softmax_simd.h's exp_sum_add.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "attention/attention.h"
#include "attention/prefill.h"

namespace snapkv {
namespace {

TEST(PrefillLongRows, UncachedRowsEqualCachedRowsBitForBit) {
  const AttentionParams p{2, 1, 64, 0.125f, 0};  // 2 query heads on 1 KV head, head_dim 64
  const int64_t n_keys = attn::kScoreCacheMaxKeys + 600;
  std::vector<int32_t> pos(static_cast<size_t>(n_keys));
  for (int64_t j = 0; j < n_keys; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n_keys) * 64), v(k.size());
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  KVLayerCache cache;
  KVHeadCache h(KVType::F16, 64);
  h.append(n_keys, pos.data(), k.data(), 64, v.data(), 64);
  cache.heads.push_back(std::move(h));

  // Query A sees 65,000 keys (within the score cache). Alone with a neighbour its block is cached;
  // with a query that sees every key in the same block, the block's range exceeds the cache.
  const int32_t a = 64999, b = static_cast<int32_t>(n_keys - 1);
  std::vector<float> q(2 * 2 * 64);
  for (auto& x : q) x = nd(rng);
  std::vector<float> out_cached(q.size()), out_long(q.size());
  AttentionWorkspace ws(p, 2);
  const int32_t pos_cached[2] = {a, a - 1};
  attention(p, q.data(), pos_cached, 2, cache, out_cached.data(), ws, 1);
  const int32_t pos_long[2] = {a, b};
  attention(p, q.data(), pos_long, 2, cache, out_long.data(), ws, 1);
  // Query A's two heads: the first 2 x 64 floats of both outputs.
  EXPECT_EQ(std::memcmp(out_cached.data(), out_long.data(), 2 * 64 * sizeof(float)), 0);
  bool any = false;
  for (int i = 0; i < 2 * 64; ++i) any = any || out_long[static_cast<size_t>(i)] != 0.0f;
  EXPECT_TRUE(any);
}

}  // namespace
}  // namespace snapkv
