// Ragged KV cache: storage, compaction that releases memory, exact byte accounting, SWA trimming.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

std::vector<float> rows(int64_t n, int hd, float base) {
  std::vector<float> v(static_cast<size_t>(n * hd));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.001f * static_cast<float>(i) + 1.0f / 3.0f;
  return v;
}

TEST(KVHeadCache, AppendStoresRowsAndPositions) {
  for (const KVType t : {KVType::F32, KVType::F16}) {
    KVHeadCache h(t, 8);
    const auto k = rows(5, 8, 1.0f), v = rows(5, 8, -2.0f);
    const std::vector<int32_t> pos{0, 1, 2, 5, 9};
    h.append(5, pos.data(), k.data(), 8, v.data(), 8);
    ASSERT_EQ(h.size(), 5);
    EXPECT_EQ(std::vector<int32_t>(h.positions().begin(), h.positions().end()), pos);
    std::vector<float> r(8);
    for (int64_t i = 0; i < 5; ++i) {
      h.key_row(i, r.data());
      for (int d = 0; d < 8; ++d) {
        const float want = k[static_cast<size_t>(i * 8 + d)];
        EXPECT_EQ(r[static_cast<size_t>(d)], t == KVType::F32 ? want : fp16_to_fp32(fp32_to_fp16(want)));
      }
      h.value_row(i, r.data());
      const float want_v = v[static_cast<size_t>(i * 8)];
      EXPECT_EQ(r[0], t == KVType::F32 ? want_v : fp16_to_fp32(fp32_to_fp16(want_v)));
    }
    EXPECT_EQ(h.bytes(), 5u * 2 * kv_row_bytes(t, 8));
    EXPECT_EQ(h.keys().n, 5);
    EXPECT_EQ(h.values().head_dim, 8);
  }
}

// Q8_0 keys with Q4_0 values: each array is rounded by its own type, and every operation that moves
// rows (keep, drop_front, clone, assign) moves both with their own row sizes.
TEST(KVHeadCache, MixedKeyAndValueTypes) {
  const int hd = 64;
  KVHeadCache h(KVType::Q8_0, KVType::Q4_0, hd);
  EXPECT_EQ(h.k_row_bytes(), 68u);
  EXPECT_EQ(h.v_row_bytes(), 36u);
  const auto k = rows(6, hd, 1.0f), v = rows(6, hd, -2.0f);
  const std::vector<int32_t> pos{0, 2, 3, 4, 7, 8};
  h.append(6, pos.data(), k.data(), hd, v.data(), hd);
  EXPECT_EQ(h.bytes(), 6u * (68 + 36));
  EXPECT_EQ(h.keys().type, KVType::Q8_0);
  EXPECT_EQ(h.values().type, KVType::Q4_0);
  // The same rows through single-type caches: keys as Q8_0 rounds them, values as Q4_0.
  KVHeadCache hk(KVType::Q8_0, hd), hv(KVType::Q4_0, hd);
  hk.append(6, pos.data(), k.data(), hd, v.data(), hd);
  hv.append(6, pos.data(), k.data(), hd, v.data(), hd);
  auto expect_rows = [&](const KVHeadCache& c, const std::vector<int64_t>& from) {
    std::vector<float> got(hd), want(hd);
    ASSERT_EQ(c.size(), static_cast<int64_t>(from.size()));
    for (size_t i = 0; i < from.size(); ++i) {
      EXPECT_EQ(c.positions()[i], pos[static_cast<size_t>(from[i])]);
      c.key_row(static_cast<int64_t>(i), got.data());
      hk.key_row(from[i], want.data());
      EXPECT_EQ(got, want) << "key " << i;
      c.value_row(static_cast<int64_t>(i), got.data());
      hv.value_row(from[i], want.data());
      EXPECT_EQ(got, want) << "value " << i;
    }
  };
  expect_rows(h, {0, 1, 2, 3, 4, 5});
  KVHeadCache c = h.clone();
  expect_rows(c, {0, 1, 2, 3, 4, 5});
  const std::vector<int32_t> keep{1, 3, 4};
  h.keep(keep);
  expect_rows(h, {1, 3, 4});
  EXPECT_EQ(h.capacity_bytes(), 3u * (68 + 36));
  h.drop_front(1);
  expect_rows(h, {3, 4});
  KVHeadCache r(KVType::Q8_0, KVType::Q4_0, hd);
  r.assign(c.size(), c.pos_data(), c.k_data(), c.v_data());
  expect_rows(r, {0, 1, 2, 3, 4, 5});
  KVHeadCache moved = std::move(r);
  expect_rows(moved, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(moved.v_type(), KVType::Q4_0);
}

TEST(KVHeadCache, StridedAppendAndPositionOrder) {
  KVHeadCache h(KVType::F32, 2);
  // rows of 2 heads x 2 dims: take head 1 (offset 2, stride 4)
  const std::vector<float> kv{0, 1, 2, 3, 4, 5, 6, 7};
  const int32_t pos[2] = {3, 4};
  h.append(2, pos, kv.data() + 2, 4, kv.data() + 2, 4);
  std::vector<float> r(2);
  h.key_row(1, r.data());
  EXPECT_EQ(r, (std::vector<float>{6, 7}));
  const int32_t bad[1] = {4};  // not after the last stored position
  EXPECT_THROW(h.append(1, bad, kv.data(), 2, kv.data(), 2), Error);
  EXPECT_THROW(h.key_row(2, r.data()), Error);
}

TEST(KVHeadCache, ReserveIsExactAndAppendGrowsInBlocks) {
  KVHeadCache h(KVType::F16, 4);
  h.reserve(10);
  EXPECT_EQ(h.capacity(), 10);
  EXPECT_EQ(h.capacity_bytes(), 10u * 2 * 4 * 2);
  const auto k = rows(11, 4, 0.0f);
  std::vector<int32_t> pos(11);
  std::iota(pos.begin(), pos.end(), 0);
  h.append(10, pos.data(), k.data(), 4, k.data(), 4);
  EXPECT_EQ(h.capacity(), 10);
  h.append(1, pos.data() + 10, k.data(), 4, k.data(), 4);  // past capacity: one block more, not doubling
  EXPECT_EQ(h.capacity(), 10 + KVHeadCache::kGrowEntries);
  EXPECT_EQ(h.bytes(), 11u * 2 * 4 * 2);
}

TEST(KVHeadCache, KeepCompactsAndReleases) {
  for (const KVType t : {KVType::F32, KVType::F16}) {
    KVHeadCache h(t, 4);
    const int64_t n = 100;
    const auto k = rows(n, 4, 1.0f), v = rows(n, 4, 5.0f);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), 0);
    h.reserve(n + 50);
    h.append(n, pos.data(), k.data(), 4, v.data(), 4);
    std::vector<float> before_k(4), after_k(4), before_v(4), after_v(4);
    const std::vector<int32_t> idx{0, 3, 4, 50, 98, 99};
    h.key_row(50, before_k.data());
    h.value_row(50, before_v.data());
    h.keep(idx);
    EXPECT_EQ(h.size(), 6);
    EXPECT_EQ(h.capacity(), 6);  // buffers reallocated to exactly what is kept
    EXPECT_EQ(h.bytes(), 6u * 2 * kv_row_bytes(t, 4));
    EXPECT_EQ(h.capacity_bytes(), h.bytes());
    EXPECT_EQ(std::vector<int32_t>(h.positions().begin(), h.positions().end()), idx);
    h.key_row(3, after_k.data());
    h.value_row(3, after_v.data());
    EXPECT_EQ(before_k, after_k);
    EXPECT_EQ(before_v, after_v);
    // Appending continues after the last kept position.
    const int32_t next[1] = {100};
    h.append(1, next, k.data(), 4, v.data(), 4);
    EXPECT_EQ(h.positions().back(), 100);
    // Bad index lists are rejected without changing anything.
    EXPECT_THROW(h.keep(std::vector<int32_t>{1, 1}), Error);
    EXPECT_THROW(h.keep(std::vector<int32_t>{2, 1}), Error);
    EXPECT_THROW(h.keep(std::vector<int32_t>{0, 7}), Error);
    EXPECT_THROW(h.keep(std::vector<int32_t>{-1}), Error);
    EXPECT_EQ(h.size(), 7);
    h.keep({});
    EXPECT_EQ(h.size(), 0);
    EXPECT_EQ(h.capacity_bytes(), 0u);
  }
}

TEST(KVHeadCache, LargeBuffersGrowKeepCloneAndAssignExactly) {
  // Rows of 256 f32 (1 KiB) or f16: from 256 / 512 entries on the K and V buffers are memory
  // mappings resized by mremap (kv/row_buffer.h), not copies; every operation must still give
  // exactly the rows it gave before, F32 (bit for bit what was appended) and F16 (rounded rows).
  for (const KVType t : {KVType::F32, KVType::F16}) {
    const int hd = 256;
    const int64_t n = 3000;
    const auto k = rows(n, hd, 1.0f), v = rows(n, hd, 7.0f);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), 0);
    KVHeadCache ref(t, hd);  // one exact reservation: never resized
    ref.reserve(n);
    ref.append(n, pos.data(), k.data(), hd, v.data(), hd);
    KVHeadCache h(t, hd);  // grown one entry at a time, kGrowEntries per resize
    for (int64_t i = 0; i < n; ++i) h.append(1, pos.data() + i, k.data() + i * hd, hd, v.data() + i * hd, hd);
    auto expect_rows = [&](const KVHeadCache& c, const std::vector<int64_t>& from) {
      ASSERT_EQ(c.size(), static_cast<int64_t>(from.size()));
      std::vector<float> got(hd), want(hd);
      for (size_t i = 0; i < from.size(); ++i) {
        ASSERT_EQ(c.positions()[i], pos[static_cast<size_t>(from[i])]);
        c.key_row(static_cast<int64_t>(i), got.data());
        ref.key_row(from[i], want.data());
        ASSERT_EQ(got, want) << "key " << i;
        c.value_row(static_cast<int64_t>(i), got.data());
        ref.value_row(from[i], want.data());
        ASSERT_EQ(got, want) << "value " << i;
      }
    };
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    expect_rows(h, all);
    EXPECT_EQ(h.capacity(), 128 * ((n + 127) / 128));
    const KVHeadCache c = h.clone();
    expect_rows(c, all);
    // Keep every third entry and the last 100: compacted in place, then shrunk to exactly that.
    std::vector<int32_t> idx;
    std::vector<int64_t> from;
    for (int64_t i = 0; i < n; ++i)
      if (i % 3 == 0 || i >= n - 100) {
        idx.push_back(static_cast<int32_t>(i));
        from.push_back(i);
      }
    h.keep(idx);
    expect_rows(h, from);
    EXPECT_EQ(h.capacity(), static_cast<int64_t>(idx.size()));
    EXPECT_EQ(h.capacity_bytes(), h.bytes());
    // Down to heap-sized buffers (under 256 KiB), then grown back past that.
    const std::vector<int32_t> few{0, 5, 7};
    h.keep(few);
    expect_rows(h, {0, 15, 21});
    h.append(600, pos.data() + 2400, k.data() + 2400 * hd, hd, v.data() + 2400 * hd, hd);
    std::vector<int64_t> grown{0, 15, 21};
    for (int64_t i = 2400; i < 3000; ++i) grown.push_back(i);
    expect_rows(h, grown);
    KVHeadCache r(t, hd);
    r.assign(c.size(), c.pos_data(), c.k_data(), c.v_data());
    expect_rows(r, all);
    r.clear();
    EXPECT_EQ(r.capacity(), 0);
    EXPECT_EQ(r.k_data(), nullptr);
  }
}

TEST(KVHeadCache, DropFrontAndClear) {
  KVHeadCache h(KVType::F32, 2);
  const auto k = rows(6, 2, 0.0f);
  std::vector<int32_t> pos{0, 1, 2, 3, 4, 5};
  h.append(6, pos.data(), k.data(), 2, k.data(), 2);
  h.drop_front(4);
  EXPECT_EQ(h.size(), 2);
  EXPECT_EQ(h.positions()[0], 4);
  std::vector<float> r(2);
  h.key_row(0, r.data());
  EXPECT_EQ(r[0], k[8]);
  EXPECT_THROW(h.drop_front(3), Error);
  h.clear();
  EXPECT_EQ(h.size(), 0);
  EXPECT_EQ(h.capacity(), 0);
}

TEST(KVCache, MakeRoomFullAndSlidingWindowLayers) {
  // layer 0: full attention; layer 1: sliding window of 8.
  KVCache c(2, 2, 4, KVType::F16, {0, 8});
  EXPECT_EQ(c.layer(0).window, 0);
  EXPECT_TRUE(c.layer(1).is_swa());
  const int64_t n = 20;
  const auto k = rows(n, 8, 0.0f);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::iota(pos.begin(), pos.end(), 0);
  c.make_room(0, n);
  for (auto& h : c.layer(0).heads) {
    EXPECT_EQ(h.capacity(), n);  // exactly the batch
    h.append(n, pos.data(), k.data(), 8, k.data(), 8);
  }
  // SWA layer fed in chunks of 5: trims to window-1 entries before appending when full.
  for (int64_t s = 0; s < n; s += 5) {
    c.make_room(1, 5);
    for (auto& h : c.layer(1).heads) {
      h.append(5, pos.data() + s, k.data(), 8, k.data(), 8);
      EXPECT_LE(h.size(), 8 - 1 + 5);
      EXPECT_GE(h.positions().front(), std::max<int64_t>(0, s + 5 - (8 - 1 + 5)));
    }
  }
  const size_t entry = 2 * 4 * 2;
  EXPECT_EQ(c.layer(0).bytes(), 2 * n * entry);
  EXPECT_EQ(c.bytes(), c.layer(0).bytes() + c.layer(1).bytes());
  EXPECT_DOUBLE_EQ(c.layer(0).mean_entries(), static_cast<double>(n));
  // Decode: single tokens grow full layers by blocks, and SWA layers stay bounded.
  for (int32_t p = static_cast<int32_t>(n); p < n + 300; ++p) {
    for (int il = 0; il < 2; ++il) {
      c.make_room(il, 1);
      for (auto& h : c.layer(il).heads) h.append(1, &p, k.data(), 8, k.data(), 8);
    }
    for (auto& h : c.layer(1).heads) {
      EXPECT_LE(h.size(), 8 - 1 + KVCache::kSwaSlack + 1);
      EXPECT_LE(h.capacity(), 8 - 1 + KVCache::kSwaSlack);
      EXPECT_GE(h.size(), 8);  // the current query's window is always there
    }
  }
  EXPECT_LE(c.layer(0).heads[0].capacity(), n + 300 + KVHeadCache::kGrowEntries);
  c.clear();
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.capacity_bytes(), 0u);
  EXPECT_THROW(KVCache(2, 1, 4, KVType::F32, {0}), Error);
}

}  // namespace
}  // namespace snapkv
