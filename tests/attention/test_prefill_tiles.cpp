// The prefill attention's register tiles and softmax rows: the wider AVX-512 tiles give exactly
// the bits of the 8-lane operations they replace (dot8's partial sums and hsum pairing, one FMA
// per key in ascending order, exp8 lane for lane), at odd sizes and tails. That keeps prefill
// results independent of the instruction set, the tile shapes and the prompt's chunking.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "attention/tiles.h"
#include "test_util.h"

namespace snapkv::attn {
namespace {

using test::randn;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The score of one (row, key) pair as the 8-lane tile computes it (the reference every tile matches).
float reference_dot(const float* a, const float* b, int n) {
#if SNAPKV_ATTN_AVX2
  if (n % 8 == 0) return dot8(a, b, n);
#endif
  return dot_f32(a, b, n);
}

TEST(PrefillTiles, QKTileEqualsTheEightLaneDotBitForBit) {
  for (const int hd : {8, 64, 72, 256}) {
    for (const int nr : {1, 2, 3, 5, 48}) {
      for (const int nk : {1, 7, 8, 9, 31, 64}) {
        const auto q = randn(static_cast<size_t>(nr * hd), 11u + static_cast<uint64_t>(hd * nr));
        const auto k = randn(static_cast<size_t>(nk * hd), 5u + static_cast<uint64_t>(nk));
        std::vector<const float*> rows(static_cast<size_t>(nr));
        for (int r = 0; r < nr; ++r) rows[static_cast<size_t>(r)] = q.data() + static_cast<size_t>(r) * hd;
        const int stride = nk + 3;
        std::vector<float> s(static_cast<size_t>(nr * stride), -1.0f);
        qk_tile(rows.data(), nr, k.data(), nk, hd, s.data(), stride);
        for (int r = 0; r < nr; ++r)
          for (int j = 0; j < nk; ++j) {
            const float want = reference_dot(rows[static_cast<size_t>(r)], k.data() + static_cast<size_t>(j) * hd, hd);
            ASSERT_TRUE(same_bits(s[static_cast<size_t>(r * stride + j)], want))
                << "hd " << hd << " rows " << nr << " keys " << nk << " at " << r << "," << j << ": "
                << s[static_cast<size_t>(r * stride + j)] << " vs " << want;
          }
        // Columns past nk are not written.
        for (int r = 0; r < nr; ++r)
          for (int j = nk; j < stride; ++j) EXPECT_EQ(s[static_cast<size_t>(r * stride + j)], -1.0f);
      }
    }
  }
}

TEST(PrefillTiles, PVTileIsOneFmaPerKeyInAscendingOrder) {
  for (const int hd : {32, 64, 256}) {
    for (const int nr : {1, 2, 3, 4, 5, 7, 48}) {
      for (const int nk : {1, 5, 64}) {
        const int p_stride = 64;
        const auto p = randn(static_cast<size_t>(nr * p_stride), 3u + static_cast<uint64_t>(nr), 0.1f);
        const auto v = randn(static_cast<size_t>(nk * hd), 17u + static_cast<uint64_t>(hd));
        const auto acc0 = randn(static_cast<size_t>(nr * hd), 23u);
        std::vector<float> acc = acc0;
        pv_tile(p.data(), p_stride, nr, v.data(), nk, hd, acc.data());
        for (int r = 0; r < nr; ++r)
          for (int d = 0; d < hd; ++d) {
            float want = acc0[static_cast<size_t>(r * hd + d)];
            for (int j = 0; j < nk; ++j)
              want = std::fma(p[static_cast<size_t>(r * p_stride + j)], v[static_cast<size_t>(j * hd + d)], want);
            const float got = acc[static_cast<size_t>(r * hd + d)];
#if SNAPKV_ATTN_AVX2
            ASSERT_TRUE(same_bits(got, want))
                << "hd " << hd << " rows " << nr << " keys " << nk << ": " << got << " vs " << want;
#else
            ASSERT_NEAR(got, want, 1e-4f * (1.0f + std::fabs(want)));
#endif
          }
      }
    }
  }
}

#if SNAPKV_ATTN_AVX512
TEST(PrefillTiles, Exp16IsExp8LaneForLane) {
  auto x = randn(4096, 99, 30.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            -87.3f,
                            -87.34f,
                            -90.0f,
                            88.7f,
                            89.0f,
                            1e-8f,
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  for (size_t i = 0; i < x.size(); i += 16) {
    alignas(64) float a[16], b[16];
    _mm512_store_ps(a, exp16(_mm512_loadu_ps(x.data() + i)));
    _mm256_store_ps(b, exp8(_mm256_loadu_ps(x.data() + i)));
    _mm256_store_ps(b + 8, exp8(_mm256_loadu_ps(x.data() + i + 8)));
    for (int l = 0; l < 16; ++l) ASSERT_TRUE(same_bits(a[l], b[l])) << "x = " << x[i + static_cast<size_t>(l)];
  }
}

// The softmax rows' exponential (arguments <= 0) against exp16: every x <= 0 the rows can produce,
// the underflow edge (results subnormal or 0 near kExpMinArg) swept finely.
TEST(PrefillTiles, Exp16NonPositiveIsExp16BitForBit) {
  std::vector<float> x = randn(1 << 16, 7, 30.0f);
  for (auto& v : x) v = -std::fabs(v);
  for (int i = 0; i < 4096; ++i) x.push_back(-86.0f - 2.0f * static_cast<float>(i) / 4096.0f);
  for (int i = 0; i < 4096; ++i) x.push_back(-1e-3f * static_cast<float>(i) / 4096.0f);
  for (const float v : {0.0f, -0.0f, kExpMinArg, std::nextafter(kExpMinArg, 0.0f), std::nextafter(kExpMinArg, -1e9f),
                        -1e30f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  while (x.size() % 16 != 0) x.push_back(-1.0f);
  for (size_t i = 0; i < x.size(); i += 16) {
    alignas(64) float a[16], b[16];
    _mm512_store_ps(a, exp16_nonpos(_mm512_loadu_ps(x.data() + i)));
    _mm512_store_ps(b, exp16(_mm512_loadu_ps(x.data() + i)));
    for (int l = 0; l < 16; ++l) ASSERT_TRUE(same_bits(a[l], b[l])) << "x = " << x[i + static_cast<size_t>(l)];
  }
}
#endif

#if SNAPKV_ATTN_AVX2
// exp_sum_row and softmax_f16_row against the 8-lane definition: each block of 8 (the tail padded
// with -inf) through exp8, lanes 0-3 and 4-7 summed in double in two accumulators, then hsum_pd.
TEST(PrefillTiles, SoftmaxRowsEqualTheEightLaneDefinition) {
  for (const int n : {1, 8, 15, 16, 17, 40, 64, 100}) {
    auto s = randn(static_cast<size_t>(n), 7u + static_cast<uint64_t>(n), 3.0f);
    if (n > 3) s[2] = -std::numeric_limits<float>::infinity();  // a masked key
    const float m = 2.5f, inv = 0.37f;
    double a0[4] = {0, 0, 0, 0}, a1[4] = {0, 0, 0, 0};
    std::vector<float> e_ref(static_cast<size_t>(n)), p_ref(static_cast<size_t>(n));
    for (int j = 0; j < n; j += 8) {
      alignas(32) float in[8], e[8];
      for (int l = 0; l < 8; ++l) in[l] = j + l < n ? s[static_cast<size_t>(j + l)] : kNegInf;
      _mm256_store_ps(e, exp8(_mm256_sub_ps(_mm256_load_ps(in), _mm256_set1_ps(m))));
      for (int l = 0; l < 4; ++l) a0[l] += static_cast<double>(e[l]), a1[l] += static_cast<double>(e[l + 4]);
      for (int l = 0; l < 8 && j + l < n; ++l) {
        e_ref[static_cast<size_t>(j + l)] = e[l];
        p_ref[static_cast<size_t>(j + l)] = round_f16(e[l] * inv);
      }
    }
    double c[4];
    for (int l = 0; l < 4; ++l) c[l] = a0[l] + a1[l];
    const double want = (c[0] + c[2]) + (c[1] + c[3]);
    std::vector<float> e(static_cast<size_t>(n)), p(static_cast<size_t>(n));
    EXPECT_EQ(exp_sum_row(s.data(), n, m, e.data()), want) << n;
    softmax_f16_row(s.data(), n, m, inv, p.data());
    for (int j = 0; j < n; ++j) {
      ASSERT_TRUE(same_bits(e[static_cast<size_t>(j)], e_ref[static_cast<size_t>(j)])) << n << " at " << j;
      ASSERT_TRUE(same_bits(p[static_cast<size_t>(j)], p_ref[static_cast<size_t>(j)])) << n << " at " << j;
    }
  }
}
#endif

}  // namespace
}  // namespace snapkv::attn
