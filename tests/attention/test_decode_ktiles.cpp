// attention/decode_ktiles.h: the K^T-tile scores are, bit for bit, the scores the decode kernel's
// row tiles give for the same keys (scores_rows over F16 rows), for every head count of a head
// tile, several head_dims, magnitudes that make the summation order visible, and special values;
// the natural-order 64-key kernel (AVX-512) is exactly the std::fma chain in ascending d.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention/decode_ktiles.h"
#include "attention/decode_simd.h"
#include "core/fp16.h"

namespace snapkv::attn {
namespace {

TEST(DecodeKTiles, PackPutsElementDOfKeyIAtDTimes16PlusI) {
  const int hd = 32;
  const int n = 5;  // a partial tile: lanes 5.. are zero
  std::vector<uint16_t> rows(static_cast<size_t>(n) * hd);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint16_t>(i + 1);
  std::vector<uint16_t> tile(static_cast<size_t>(hd) * kKTileKeys, 0xFFFF);
  pack_ktile(rows.data(), n, hd, tile.data());
  for (int d = 0; d < hd; ++d)
    for (int i = 0; i < kKTileKeys; ++i)
      EXPECT_EQ(tile[static_cast<size_t>(d * kKTileKeys + i)], i < n ? rows[static_cast<size_t>(i * hd + d)] : 0)
          << "d " << d << " i " << i;
}

#if SNAPKV_ATTN_AVX2
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

/// Values spread over 2^-12 .. 2^12 with both signs, rounded to F16 (the decode kernel's queries
/// are F16-rounded too): sums in another order would round differently.
std::vector<float> spread(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> x(n);
  for (float& v : x) v = fp16_to_fp32(fp32_to_fp16(std::ldexp(mant(rng), expo(rng))));
  return x;
}

/// Scores of nh heads against 16 F16 key rows, by the row tiles and by the K^T tile; every pair's
/// bits must match.
void expect_same_scores(const std::vector<float>& q, int nh, const std::vector<uint16_t>& k_rows, int hd, float scale) {
  std::vector<const float*> qh(static_cast<size_t>(nh));
  for (int h = 0; h < nh; ++h) qh[static_cast<size_t>(h)] = q.data() + static_cast<size_t>(h) * hd;
  constexpr int kStride = 19;  // > 16: the tiles write only their own lanes
  std::vector<float> rows_s(static_cast<size_t>(nh) * kStride, -7.0f);
  std::vector<float> tile_s(rows_s);
  scores_rows(qh.data(), nh, DenseRows<uint16_t>{k_rows.data(), hd}, kKTileKeys, hd, scale, rows_s.data(), kStride);
  std::vector<uint16_t> tile(static_cast<size_t>(hd) * kKTileKeys);
  pack_ktile(k_rows.data(), kKTileKeys, hd, tile.data());
  scores_ktile_heads(qh.data(), nh, tile.data(), hd, scale, tile_s.data(), kStride);
  for (int h = 0; h < nh; ++h)
    for (int i = 0; i < kStride; ++i) {
      const size_t at = static_cast<size_t>(h * kStride + i);
      ASSERT_TRUE(same_bits(rows_s[at], tile_s[at]) || (std::isnan(rows_s[at]) && std::isnan(tile_s[at])))
          << "hd " << hd << " heads " << nh << " head " << h << " key " << i << ": rows " << rows_s[at] << " vs tile "
          << tile_s[at];
    }
}

std::vector<uint16_t> to_f16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
  return h;
}

TEST(DecodeKTiles, ScoresEqualTheRowTilesBitForBit) {
  for (const int hd : {16, 32, 64, 128, 256}) {
    for (int nh = 1; nh <= 4; ++nh) {
      for (uint32_t round = 0; round < 20; ++round) {
        const uint32_t seed = 1000u * static_cast<uint32_t>(hd) + 100u * static_cast<uint32_t>(nh) + round;
        const auto q = spread(static_cast<size_t>(nh) * hd, seed);
        const auto k = to_f16(spread(static_cast<size_t>(kKTileKeys) * hd, seed + 7u));
        expect_same_scores(q, nh, k, hd, 0.125f);
      }
    }
  }
}

TEST(DecodeKTiles, SpecialValuesPropagateAsInTheRowTiles) {
  const int hd = 64;
  const int nh = 3;
  auto q = spread(static_cast<size_t>(nh) * hd, 3);
  auto kf = spread(static_cast<size_t>(kKTileKeys) * hd, 4);
  kf[static_cast<size_t>(2 * hd + 5)] = std::numeric_limits<float>::infinity();   // key 2: +inf element
  kf[static_cast<size_t>(3 * hd + 9)] = std::numeric_limits<float>::quiet_NaN();  // key 3: NaN
  kf[static_cast<size_t>(4 * hd + 1)] = 65504.0f;                                 // key 4: F16 max
  for (int d = 0; d < hd; ++d) kf[static_cast<size_t>(5 * hd + d)] = -0.0f;       // key 5: all -0
  expect_same_scores(q, nh, to_f16(kf), hd, 0.125f);
}

#if SNAPKV_ATTN_AVX512
/// scores_ktile64 against std::fma in ascending d from 0, then the scale: the same bits.
void expect_natural_order(const std::vector<float>& q, int nh, const std::vector<uint16_t>& k_rows, int hd,
                          float scale) {
  constexpr int kKeys = kKTileKeys * kKTilesPerBlock;
  std::vector<const float*> qh(static_cast<size_t>(nh));
  for (int h = 0; h < nh; ++h) qh[static_cast<size_t>(h)] = q.data() + static_cast<size_t>(h) * hd;
  std::vector<uint16_t> tiles(static_cast<size_t>(kKeys) * hd);
  for (int t = 0; t < kKTilesPerBlock; ++t)
    pack_ktile(k_rows.data() + static_cast<size_t>(t) * kKTileKeys * hd, kKTileKeys, hd,
               tiles.data() + static_cast<size_t>(t) * kKTileKeys * hd);
  constexpr int kStride = 67;  // > 64: the kernel writes only its own keys
  std::vector<float> S(static_cast<size_t>(nh) * kStride, -7.0f);
  scores_ktile64_heads(qh.data(), nh, tiles.data(), hd, scale, S.data(), kStride);
  for (int h = 0; h < nh; ++h)
    for (int i = 0; i < kStride; ++i) {
      float want = -7.0f;
      if (i < kKeys) {
        float a = 0.0f;
        for (int d = 0; d < hd; ++d)
          a = std::fma(q[static_cast<size_t>(h * hd + d)], fp16_to_fp32(k_rows[static_cast<size_t>(i * hd + d)]), a);
        want = a * scale;
      }
      const float got = S[static_cast<size_t>(h * kStride + i)];
      ASSERT_TRUE(same_bits(want, got) || (std::isnan(want) && std::isnan(got)))
          << "hd " << hd << " heads " << nh << " head " << h << " key " << i << ": want " << want << " got " << got;
    }
}

TEST(DecodeKTiles, NaturalOrderScoresOf64KeysAreTheFmaChain) {
  for (const int hd : {1, 7, 16, 64, 256}) {
    for (int nh = 1; nh <= 4; ++nh) {
      for (uint32_t round = 0; round < 5; ++round) {
        const uint32_t seed = 5000u * static_cast<uint32_t>(hd) + 100u * static_cast<uint32_t>(nh) + round;
        const auto q = spread(static_cast<size_t>(nh) * hd, seed);
        const auto k = to_f16(spread(static_cast<size_t>(kKTileKeys * kKTilesPerBlock) * hd, seed + 7u));
        expect_natural_order(q, nh, k, hd, 0.125f);
      }
    }
  }
  // Special values: inf, NaN, F16 max, -0 rows.
  const int hd = 64;
  auto q = spread(static_cast<size_t>(3) * hd, 3);
  auto kf = spread(static_cast<size_t>(kKTileKeys * kKTilesPerBlock) * hd, 4);
  kf[static_cast<size_t>(2 * hd + 5)] = std::numeric_limits<float>::infinity();
  kf[static_cast<size_t>(33 * hd + 9)] = std::numeric_limits<float>::quiet_NaN();
  kf[static_cast<size_t>(50 * hd + 1)] = 65504.0f;
  for (int d = 0; d < hd; ++d) kf[static_cast<size_t>(63 * hd + d)] = -0.0f;
  expect_natural_order(q, 3, to_f16(kf), hd, 0.125f);
}
#endif

#else
TEST(DecodeKTiles, ScoresNeedAvx2) { GTEST_SKIP() << "the K^T score tiles need AVX2 or AVX-512"; }
#endif

}  // namespace
}  // namespace snapkv::attn
