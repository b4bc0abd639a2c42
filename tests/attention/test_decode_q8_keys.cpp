// Decode scores over Q8_0 keys with an int16 query (attention/decode_q8_keys.h): query_i16_set
// rounds exactly as its scalar statement query_i16_round (every element, every layout position,
// head_dim 32-512; one scale per 32-dim block, zero blocks to zeros), both refuse the same rows
// (NaN, inf, beyond 3e38, head_dim > 512), the tiles' scores match a double reference over the same rounded query and
// the dequantized keys to f32 rounding (1-4 heads, tiles and single keys, 32-dim tails, extreme quants -128 / 127 with
// the largest query), and a decode whose query the int16 path refuses gives the bits of the F32 path over the
// dequantized keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention/attention.h"
#include "attention/decode_q8_keys.h"
#include "attention/decode_simd.h"
#include "core/fp16.h"
#include "core/q8_0_rows.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace snapkv {
namespace {

std::vector<float> random_row(std::mt19937_64& rng, int hd, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(hd));
  for (float& v : x) v = nd(rng);
  return x;
}

TEST(QueryI16Values, RefusesRowsTheF32PathMustTake) {
  std::vector<float> out(600, -1.0f);
  std::vector<float> q(64, 0.5f);
  EXPECT_TRUE(attn::query_i16_round(q.data(), 64, out.data()));
  EXPECT_EQ(attn::query_i16_values(q.data(), 64, out.data()), attn::decode_q8_keys_i16());
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 3.2e38f}) {
    std::vector<float> r = q;
    r[17] = bad;
    std::fill(out.begin(), out.end(), -1.0f);
    EXPECT_FALSE(attn::query_i16_round(r.data(), 64, out.data())) << bad;
    EXPECT_EQ(out[0], -1.0f);  // left alone
  }
  std::vector<float> wide(544, 1.0f), odd(48, 1.0f);
  EXPECT_FALSE(attn::query_i16_round(wide.data(), 544, out.data()));
  EXPECT_FALSE(attn::query_i16_round(odd.data(), 48, out.data()));
}

TEST(QueryI16Values, ZeroAndTinyBlocksGiveZeros) {
  std::vector<float> q(96, 0.0f), out(96, -1.0f);
  for (int d = 32; d < 64; ++d) q[static_cast<size_t>(d)] = 1e-31f;  // block 1: below 1e-30
  for (int d = 64; d < 96; ++d) q[static_cast<size_t>(d)] = static_cast<float>(d);
  ASSERT_TRUE(attn::query_i16_round(q.data(), 96, out.data()));
  for (int d = 0; d < 64; ++d) EXPECT_EQ(out[static_cast<size_t>(d)], 0.0f) << d;
  EXPECT_EQ(out[95], 95.0f);  // here the block's largest element comes back exactly
}

TEST(QueryI16Values, RoundsToEachBlocksGrid) {
  std::mt19937_64 rng(3);
  for (const float scale : {1e-3f, 1.0f, 700.0f}) {
    std::vector<float> q = random_row(rng, 96, scale), out(96);
    q[40] *= 300.0f;  // an outlier channel costs only its block
    ASSERT_TRUE(attn::query_i16_round(q.data(), 96, out.data()));
    for (int d = 0; d < 96; ++d) {
      float amax = 0.0f;
      for (int e = d / 32 * 32; e < d / 32 * 32 + 32; ++e) amax = std::max(amax, std::fabs(q[static_cast<size_t>(e)]));
      const double step = static_cast<double>(amax) / 32767.0;
      EXPECT_LE(std::fabs(static_cast<double>(out[d]) - q[d]), 0.5 * step * (1 + 1e-5) + 1e-7 * std::fabs(q[d]));
      const double v = static_cast<double>(out[d]) / (static_cast<double>(amax) / 32767.0);
      EXPECT_NEAR(v, std::nearbyint(v), 2e-7 * std::fabs(v) + 1e-6);  // on the grid (to f32 rounding)
    }
  }
}

#if defined(SNAPKV_DECODE_Q8_KEYS_I16)

// Position of element d in QueryI16's row layout (see the struct's comment).
int layout_pos(int d, int hd) {
  const int c = d / 64, w = d % 64;
  if (64 * c + 64 > hd) return d;  // the last 32-dim block, in order
  if (w < 16) return 64 * c + w;
  if (w < 32) return 64 * c + 32 + (w - 16);
  if (w < 48) return 64 * c + 16 + (w - 32);
  return 64 * c + 48 + (w - 48);
}

TEST(QueryI16Set, EqualsTheScalarStatementAtEveryPosition) {
  std::mt19937_64 rng(5);
  for (const int hd : {32, 64, 96, 128, 160, 256, 512}) {
    for (int nh = 1; nh <= attn::kQueryI16Heads; ++nh) {
      std::vector<std::vector<float>> rows;
      std::vector<const float*> ptr;
      for (int h = 0; h < nh; ++h) rows.push_back(random_row(rng, hd, h == 2 ? 1e4f : 1.0f));
      rows[0][static_cast<size_t>(hd - 1)] = -rows[0][0] * 50.0f;  // the largest at the end, negative
      for (auto& r : rows) ptr.push_back(r.data());
      attn::QueryI16 qi;
      ASSERT_EQ(attn::query_i16_set(ptr.data(), nh, hd, qi), (1u << nh) - 1);
      for (int h = 0; h < nh; ++h) {
        std::vector<float> want(static_cast<size_t>(hd));
        ASSERT_TRUE(attn::query_i16_round(ptr[static_cast<size_t>(h)], hd, want.data()));
        for (int d = 0; d < hd; ++d) {
          const int c = d / 64, lane = (d % 64 < 32 || 64 * c + 64 > hd) ? 0 : 8;
          const float got = static_cast<float>(qi.v[h][layout_pos(d, hd)]) * qi.bscale[h][c][lane];
          ASSERT_EQ(got, want[static_cast<size_t>(d)]) << "hd " << hd << " h " << h << " d " << d;
        }
      }
    }
  }
}

TEST(QueryI16Set, RefusesWhatTheScalarStatementRefuses) {
  std::vector<float> ok(64, 1.0f), bad(64, 1.0f), inf(64, 1.0f), zero(64, 0.0f);
  bad[40] = std::numeric_limits<float>::quiet_NaN();
  inf[3] = -std::numeric_limits<float>::infinity();
  attn::QueryI16 qi;
  const float* two[2] = {ok.data(), bad.data()};
  EXPECT_EQ(attn::query_i16_set(two, 2, 64, qi), 1u);  // row 0 taken, row 1 (NaN) left out
  const float* i1[1] = {inf.data()};
  EXPECT_EQ(attn::query_i16_set(i1, 1, 64, qi), 0u);
  const float* z[1] = {zero.data()};
  EXPECT_EQ(attn::query_i16_set(z, 1, 64, qi), 1u);  // zeros, scale 0
  std::vector<float> wide(544, 1.0f);
  const float* w[1] = {wide.data()};
  EXPECT_EQ(attn::query_i16_set(w, 1, 544, qi), 0u);
  const float* o[1] = {ok.data()};
  EXPECT_EQ(attn::query_i16_set(o, 1, 64, qi), 1u);
}

// Q8_0 rows of nk random keys (or every quant at `fill` with scale 1 when fill != 0).
std::vector<uint8_t> q8_rows(std::mt19937_64& rng, int nk, int hd, int fill = 0) {
  const size_t rb = static_cast<size_t>(hd / kKVQ8Block) * kKVQ8BlockBytes;
  std::vector<uint8_t> k(static_cast<size_t>(nk) * rb);
  for (int j = 0; j < nk; ++j) {
    uint8_t* row = k.data() + static_cast<size_t>(j) * rb;
    if (fill == 0) {
      const std::vector<float> x = random_row(rng, hd, 2.0f);
      quantize_q8_0_row(x.data(), row, hd);
    } else {
      for (int b = 0; b < hd / kKVQ8Block; ++b) {
        const uint16_t one = fp32_to_fp16(1.0f);
        std::memcpy(row + static_cast<size_t>(b) * kKVQ8BlockBytes, &one, 2);
        std::memset(row + static_cast<size_t>(b) * kKVQ8BlockBytes + 2, static_cast<uint8_t>(static_cast<int8_t>(fill)),
                    kKVQ8Block);
      }
    }
  }
  return k;
}

void expect_scores_match(const std::vector<std::vector<float>>& rows, const std::vector<uint8_t>& K, int nk, int hd,
                         float scale, const char* what) {
  const int nh = static_cast<int>(rows.size());
  const size_t rb = static_cast<size_t>(hd / kKVQ8Block) * kKVQ8BlockBytes;
  std::vector<const float*> ptr;
  for (const auto& r : rows) ptr.push_back(r.data());
  attn::QueryI16 qi;
  ASSERT_EQ(attn::query_i16_set(ptr.data(), nh, hd, qi), (1u << nh) - 1);
  constexpr int kStride = 80;
  std::vector<float> S(static_cast<size_t>(nh) * kStride, -9.0f);
  attn::scores_rows_q8_i16(qi, 0, nh, K.data(), rb, nk, hd, scale, S.data(), kStride, nullptr);
  // Row h alone (the per-row fallback's call) gives row h's scores of the tile, bit for bit.
  for (int h = 0; h < nh; ++h) {
    std::vector<float> one(kStride, -9.0f);
    attn::scores_rows_q8_i16(qi, h, 1, K.data(), rb, nk, hd, scale, one.data(), kStride, nullptr);
    for (int j = 0; j < nk; ++j)
      ASSERT_EQ(one[static_cast<size_t>(j)], S[static_cast<size_t>(h) * kStride + static_cast<size_t>(j)])
          << what << " hd " << hd << " nh " << nh << " h " << h << " j " << j;
  }
  std::vector<float> kd(static_cast<size_t>(hd)), qv(static_cast<size_t>(hd));
  for (int h = 0; h < nh; ++h) {
    ASSERT_TRUE(attn::query_i16_round(ptr[static_cast<size_t>(h)], hd, qv.data()));
    for (int j = 0; j < nk; ++j) {
      dequantize_q8_0_row(K.data() + static_cast<size_t>(j) * rb, kd.data(), hd);
      double ref = 0.0, mag = 0.0;
      for (int d = 0; d < hd; ++d) {
        ref += static_cast<double>(qv[static_cast<size_t>(d)]) * kd[static_cast<size_t>(d)];
        mag += std::fabs(static_cast<double>(qv[static_cast<size_t>(d)]) * kd[static_cast<size_t>(d)]);
      }
      ref *= scale;
      // f32 rounding: the chunk sums' conversion and scaling, the 16-lane sum, the two scales.
      const double tol = 1e-6 * scale * mag + 1e-30;
      ASSERT_NEAR(S[static_cast<size_t>(h) * kStride + static_cast<size_t>(j)], ref, tol)
          << what << " hd " << hd << " nh " << nh << " nk " << nk << " h " << h << " j " << j;
    }
    for (int j = nk; j < kStride; ++j) ASSERT_EQ(S[static_cast<size_t>(h) * kStride + static_cast<size_t>(j)], -9.0f);
  }
}

TEST(ScoresQ8I16, MatchDoubleReferenceOverTheRoundedQuery) {
  std::mt19937_64 rng(9);
  for (const int hd : {32, 64, 96, 128, 160, 256, 512})
    for (int nh = 1; nh <= 4; ++nh)
      for (const int nk : {1, 3, 4, 5, 8, 16, 17, 64}) {
        std::vector<std::vector<float>> rows;
        for (int h = 0; h < nh; ++h) rows.push_back(random_row(rng, hd, 1.0f + static_cast<float>(h)));
        expect_scores_match(rows, q8_rows(rng, nk, hd), nk, hd, 0.125f, "random");
      }
}

TEST(ScoresQ8I16, ExtremeQuantsAndTheLargestQueryStayExact) {
  std::mt19937_64 rng(1);
  for (const int fill : {-128, 127})
    for (const int hd : {64, 512}) {
      // Every query element at its row's maximum (v = +-32767) against quants -128 or 127: the
      // largest int32 sums the tiles form (4 products per lane and chunk).
      std::vector<std::vector<float>> rows{std::vector<float>(static_cast<size_t>(hd), 3.0f),
                                           std::vector<float>(static_cast<size_t>(hd), -1e-3f)};
      expect_scores_match(rows, q8_rows(rng, 5, hd, fill), 5, hd, 1.0f, "extreme");
    }
}

#endif  // SNAPKV_DECODE_Q8_KEYS_I16

// A query row the int16 path refuses (NaN, above 3e38) is scored by the f32 tiles on its own: its
// output has the bits of an F32 cache holding the dequantized keys and values, and its neighbour
// in the head tile keeps the int16 path (the F32 cache's result for its rounded query, to f32
// rounding). An all-zero query takes the int16 path with exact zero scores: the same bits.
TEST(DecodeQ8Keys, RefusedRowsTakeTheF32PathAlone) {
  std::mt19937_64 rng(21);
  const int hd = 64, n = 300, nh = 3;
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
  const std::vector<float> k = test::randn(static_cast<size_t>(n * hd), rng(), 2.0f);
  const std::vector<float> v = test::randn(k.size(), rng());
  KVLayerCache q8, f32;
  KVHeadCache hq(KVType::Q8_0, hd);
  hq.append(n, pos.data(), k.data(), hd, v.data(), hd);
  std::vector<float> kd(k.size()), vd(v.size());
  hq.keys().rows(0, n, kd.data());
  hq.values().rows(0, n, vd.data());
  KVHeadCache hf(KVType::F32, hd);
  hf.append(n, pos.data(), kd.data(), hd, vd.data(), hd);
  q8.heads.push_back(std::move(hq));
  f32.heads.push_back(std::move(hf));
  const AttentionParams p{nh, 1, hd, 0.125f, 0};
  const int32_t qpos = n - 1;
  AttentionWorkspace ws(p, 1);
  for (const int which : {0, 1, 2}) {
    std::vector<float> q = test::randn(static_cast<size_t>(nh * hd), rng());
    if (which == 0) q[5] = std::numeric_limits<float>::quiet_NaN();  // head 0 NaN
    if (which == 1) q[static_cast<size_t>(hd) + 9] = 3.3e38f;        // head 1 beyond 3e38
    if (which == 2) std::fill(q.begin(), q.end(), 0.0f);             // taken: exact zero scores
    // The F32 twin's query: the rounded rows where the int16 path takes them.
    std::vector<float> q_f32 = q;
    std::vector<bool> taken(nh, false);
    for (int h = 0; h < nh; ++h)
      taken[static_cast<size_t>(h)] = attn::query_i16_values(q.data() + h * hd, hd, q_f32.data() + h * hd);
    std::vector<float> out_q8(q.size(), -7.0f), out_f32(q.size(), -5.0f);
    attention(p, q.data(), &qpos, 1, q8, out_q8.data(), ws, 1);
    attention(p, q_f32.data(), &qpos, 1, f32, out_f32.data(), ws, 1);
    for (int h = 0; h < nh; ++h)
      for (int d = 0; d < hd; ++d) {
        const size_t i = static_cast<size_t>(h * hd + d);
        if (std::isnan(out_f32[i])) {
          EXPECT_TRUE(std::isnan(out_q8[i])) << "case " << which << " h " << h;
        } else if (!taken[static_cast<size_t>(h)] || which == 2) {
          EXPECT_EQ(out_q8[i], out_f32[i]) << "case " << which << " h " << h << " d " << d;
        } else {
          ASSERT_FALSE(std::isnan(out_q8[i]));
          EXPECT_NEAR(out_q8[i], out_f32[i], 2e-6f) << "case " << which << " h " << h << " d " << d;
        }
      }
    if (attn::decode_q8_keys_i16() && which < 2) {
      EXPECT_TRUE(taken[which == 0 ? 1 : 0]);  // the neighbour keeps the int16 path
    }
  }
}

}  // namespace
}  // namespace snapkv
