// The prefill attention's register tiles and softmax rows: the AVX2 tiles (3 rows x 4 keys,
// 6 rows x 16 dims) and the wider AVX-512 ones give exactly the bits of the 8-lane operations
// they replace (dot8's partial sums and hsum pairing, one FMA per key in ascending order, exp8
// lane for lane), at odd sizes and tails. That keeps prefill
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
    for (const int nr : {1, 2, 3, 4, 5, 6, 7, 8, 48, 64}) {
      for (const int nk : {1, 2, 6, 7, 8, 9, 31, 64}) {
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
#if SNAPKV_ATTN_AVX512
        // The same with the 4-row groups' queries packed (the prefill's path): the same bits.
        if (hd % 8 == 0) {
          std::vector<float> packed(static_cast<size_t>(nr / 4 * 4 * hd) + 1);
          pack_q_pairs(rows.data(), nr, hd, packed.data());
          std::vector<float> s2(s.size(), -1.0f);
          qk_tile(rows.data(), nr, k.data(), nk, hd, s2.data(), stride, packed.data());
          for (size_t i = 0; i < s.size(); ++i)
            ASSERT_TRUE(same_bits(s2[i], s[i]))
                << "packed: hd " << hd << " rows " << nr << " keys " << nk << " at " << i;
        }
#endif
      }
    }
  }
}

TEST(PrefillTiles, PVTileIsOneFmaPerKeyInAscendingOrder) {
  for (const int hd : {32, 64, 256}) {
    for (const int nr : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 48, 64}) {
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

#if SNAPKV_ATTN_AVX2
// Arguments for the softmax rows' exponentials: every x <= 0 the rows can produce, the underflow
// edge (results 0 below kExpMinArg) swept finely, and the positive range where the non-positive
// forms still agree with the general ones (x < 88.37: round(x log2 e) <= 127); padded with -1 to
// a multiple of `lanes`.
std::vector<float> softmax_exp_arguments(uint64_t seed, size_t lanes) {
  std::vector<float> x = randn(1 << 16, seed, 30.0f);
  for (auto& v : x) v = -std::fabs(v);
  for (int i = 0; i < 8192; ++i) x.push_back(88.37f * static_cast<float>(i) / 8192.0f);
  for (int i = 0; i < 4096; ++i) x.push_back(-86.0f - 2.0f * static_cast<float>(i) / 4096.0f);
  for (int i = 0; i < 4096; ++i) x.push_back(-1e-3f * static_cast<float>(i) / 4096.0f);
  for (const float v : {0.0f, -0.0f, kExpMinArg, std::nextafter(kExpMinArg, 0.0f), std::nextafter(kExpMinArg, -1e9f),
                        -1e30f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  while (x.size() % lanes != 0) x.push_back(-1.0f);
  return x;
}

// The softmax rows' 8-lane exponential against exp8 (AVX2 hosts' exp_sum_add).
TEST(PrefillTiles, Exp8NonPositiveIsExp8BitForBit) {
  const std::vector<float> x = softmax_exp_arguments(8, 8);
  for (size_t i = 0; i < x.size(); i += 8) {
    alignas(32) float a[8], b[8];
    _mm256_store_ps(a, exp8_nonpos(_mm256_loadu_ps(x.data() + i)));
    _mm256_store_ps(b, exp8(_mm256_loadu_ps(x.data() + i)));
    for (int l = 0; l < 8; ++l) ASSERT_TRUE(same_bits(a[l], b[l])) << "x = " << x[i + static_cast<size_t>(l)];
  }
}
#endif

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

// The softmax rows' 16-lane exponential against exp16.
TEST(PrefillTiles, Exp16NonPositiveIsExp16BitForBit) {
  const std::vector<float> x = softmax_exp_arguments(7, 16);
  for (size_t i = 0; i < x.size(); i += 16) {
    alignas(64) float a[16], b[16];
    _mm512_store_ps(a, exp16_nonpos(_mm512_loadu_ps(x.data() + i)));
    _mm512_store_ps(b, exp16(_mm512_loadu_ps(x.data() + i)));
    for (int l = 0; l < 16; ++l) ASSERT_TRUE(same_bits(a[l], b[l])) << "x = " << x[i + static_cast<size_t>(l)];
  }
}
#endif

// The one-sweep scale + mask + maximum of pass 1 against the two sweeps it replaces: the same row
// and the same maximum, for rows fully visible, straddling the causal or window edge, fully
// masked, with tails, and with NaN scores (treated as row_max treats them).
TEST(PrefillTiles, MaskScaleMaxRowIsMaskScaleThenRowMax) {
  for (const int n : {0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100}) {
    for (int c = 0; c < 6; ++c) {
      std::vector<float> a = randn(static_cast<size_t>(n), 31u + static_cast<uint64_t>(n * 7 + c), 4.0f);
      if (c == 4 && n > 0) a[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::quiet_NaN();
      if (c == 5 && n > 3) {
        a[0] = std::numeric_limits<float>::quiet_NaN();
        a[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
      }
      std::vector<int32_t> kpos(static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) kpos[static_cast<size_t>(j)] = 100 + j;
      // c = 0, 4, 5: all visible; 1: causal edge inside the row; 2: window edge; 3: all masked.
      const int64_t qp = c == 1 ? 100 + n / 2 : (c == 3 ? 99 : 100 + n + 5);
      const int window = c == 2 ? n / 2 + 3 : 0;
      std::vector<float> got = a, want = a;
      const float m = mask_scale_max_row(got.data(), n, kpos.data(), qp, window, 0.125f);
      mask_scale_row(want.data(), n, kpos.data(), qp, window, 0.125f);
      const float m_want = row_max(want.data(), n);
      ASSERT_TRUE(same_bits(m, m_want)) << "n " << n << " case " << c << ": " << m << " vs " << m_want;
      for (int j = 0; j < n; ++j)
        ASSERT_TRUE(same_bits(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)]))
            << "n " << n << " case " << c << " at " << j;
    }
  }
}

// The block conversion (16 lanes with AVX-512, 8 with AVX2, scalar tails) against the scalar
// conversion for every F16 bit pattern, at an odd length so every path runs.
TEST(PrefillTiles, F16ToF32RowEqualsScalarForEveryHalf) {
  std::vector<uint16_t> h(65536 + 13);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> got(h.size());
  f16_to_f32(h.data(), got.data(), static_cast<int>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const float want = fp16_to_fp32(h[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << "half " << h[i];
    } else {
      ASSERT_TRUE(same_bits(got[i], want)) << "half " << h[i];
    }
  }
}

#if SNAPKV_ATTN_AVX2
// exp_sum_row and softmax_f16_row against the 8-lane definition: each block of 8 (the tail padded
// with -inf) through exp8, lanes 0-3 and 4-7 summed in double in two accumulators, then hsum_pd.
TEST(PrefillTiles, SoftmaxRowsEqualTheEightLaneDefinition) {
  for (const int n : {1, 8, 15, 16, 17, 40, 64, 100}) {
    auto s = randn(static_cast<size_t>(n), 7u + static_cast<uint64_t>(n), 3.0f);
    if (n > 3) s[2] = -std::numeric_limits<float>::infinity();  // a masked key
    const float m = row_max(s.data(), n), inv = 0.37f;          // exp_sum_row's contract: m >= every s[j]
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
