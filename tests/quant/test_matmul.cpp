// matmul against double-precision references, thread-count and batch invariance, errors.
//
// Two references per output Y[t][r]:
//  (a) exact:     sum_c W[r][c] * X[t][c] (W dequantized by the spec reference, X as given).
//      |Y - exact| <= sum_c |W[r][c]| * e_c + float slack, where e_c bounds the activation
//      quantization error of ggml's vec_dot_type: Q8_0/Q8_1: (0.5 + 127*2^-11) * amax/127 per
//      32-block (rounding to the grid + the f16 scale); Q8_K: amax/254 per 256-block;
//      F16: |x|*2^-11; BF16: |x|*2^-8; F32: 0. Q4_1/Q5_1 add |m| * 32*amax * 2^-10 per block
//      for the f16-rounded Q8_1 sum `s`.
//  (b) simulated: the same sum with X replaced by its quantized value (what ggml computes);
//      only float rounding separates it from Y: (cols/8 + 16) * 2^-24 * max|W| * sum|Xq|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "snapkv/error.h"
#include "support/threads.h"

namespace snapkv {
namespace {

using qtest::kAllTypes;

int64_t test_cols(GGMLType t) {
  switch (qtest::block_of(t)) {
    case 1:
      return 100;  // not a multiple of the 16-wide vectors: exercises the tail
    case 32:
      return 7 * 32;
    default:
      return 3 * 256;
  }
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 6.0f;  // a few activation outliers
  return x;
}

struct RefResult {
  double exact = 0, simulated = 0, bound_a = 0, tol_b = 0;
};

RefResult reference(GGMLType t, const std::vector<double>& w, const uint8_t* row_bytes, const float* x, int64_t cols) {
  std::vector<double> err;
  const auto xq = qtest::quantized_activation(t, x, cols, &err);
  RefResult r;
  double wmax = 0, xq_abs = 0;
  for (int64_t c = 0; c < cols; ++c) {
    r.exact += w[c] * x[c];
    r.simulated += w[c] * xq[c];
    r.bound_a += std::fabs(w[c]) * err[c];
    wmax = std::max(wmax, std::fabs(w[c]));
    xq_abs += std::fabs(xq[c]);
  }
  double slack = (static_cast<double>(cols) / 8 + 16) * std::ldexp(1.0, -24) * wmax * xq_abs + 1e-12;
  if (t == GGMLType::Q4_1 || t == GGMLType::Q5_1) {
    const size_t bb = qtest::bytes_of(t);
    for (int64_t b = 0; b < cols / 32; ++b) {
      double amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, static_cast<double>(std::fabs(x[b * 32 + j])));
      slack += std::fabs(qtest::h2d(row_bytes + b * bb + 2)) * 32 * amax * std::ldexp(1.0, -10);
    }
  }
  r.tol_b = slack;
  r.bound_a += slack;
  return r;
}

class MatmulTest : public ::testing::TestWithParam<GGMLType> {};

TEST_P(MatmulTest, MatchesReferencesWithinBounds) {
  const GGMLType t = GetParam();
  const int64_t cols = test_cols(t);
  const size_t row_bytes = ggml_row_bytes(t, cols);
  double worst_ratio = 0;  // max |Y - exact| / bound_a
  for (const int64_t rows : {1, 7, 33}) {
    const auto data = qtest::random_rows(t, rows, cols, 7u * static_cast<uint32_t>(rows) + static_cast<uint32_t>(t));
    const WeightView W{t, rows, cols, data.data()};
    std::vector<std::vector<double>> wd;
    for (int64_t r = 0; r < rows; ++r) wd.push_back(qtest::ref_row(t, data.data(), cols, r));
    for (const int64_t n : {1, 2, 3, 5, 8, 17, 40}) {
      const auto X = random_x(n * cols, 1000u + static_cast<uint32_t>(n));
      std::vector<float> Y(static_cast<size_t>(n * rows), -1.0f);
      matmul(W, X.data(), n, Y.data(), test::threads());
      for (int64_t tok = 0; tok < n; ++tok) {
        for (int64_t r = 0; r < rows; ++r) {
          const auto ref = reference(t, wd[r], data.data() + r * row_bytes, X.data() + tok * cols, cols);
          const double y = Y[tok * rows + r];
          ASSERT_NEAR(y, ref.simulated, ref.tol_b)
              << "simulated ggml, rows=" << rows << " n=" << n << " t=" << tok << " r=" << r;
          ASSERT_NEAR(y, ref.exact, ref.bound_a) << "exact, rows=" << rows << " n=" << n << " t=" << tok << " r=" << r;
          worst_ratio = std::max(worst_ratio, std::fabs(y - ref.exact) / ref.bound_a);
        }
      }
    }
  }
  if (t != GGMLType::F32) {
    // The activations really are quantized / rounded (the bound is not vacuous).
    EXPECT_GT(worst_ratio, 1e-3) << "no sign of ggml's activation quantization";
  }
  RecordProperty("worst_error_over_bound", std::to_string(worst_ratio));
}

TEST_P(MatmulTest, BitwiseSameAcrossThreadCounts) {
  const GGMLType t = GetParam();
  const int64_t cols = test_cols(t);
  const int64_t rows = 1031;  // not a multiple of any tile or row block
  const auto data = qtest::random_rows(t, rows, cols, 42u);
  const WeightView W{t, rows, cols, data.data()};
  for (const int64_t n : {1, 17}) {
    const auto X = random_x(n * cols, 5u);
    std::vector<float> y1(static_cast<size_t>(n * rows)), y2(y1.size()), y3(y1.size()), y40(y1.size());
    matmul(W, X.data(), n, y1.data(), test::threads(1));
    matmul(W, X.data(), n, y2.data(), test::threads(2));
    matmul(W, X.data(), n, y3.data(), test::threads(3));
    matmul(W, X.data(), n, y40.data(), test::threads(40));  // > WorkSplit::kMaxParts: static schedule
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float))) << "1 vs 2 threads, n=" << n;
    EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float))) << "1 vs 3 threads, n=" << n;
    EXPECT_EQ(0, std::memcmp(y1.data(), y40.data(), y1.size() * sizeof(float))) << "1 vs 40 threads, n=" << n;
  }
}

// A token's result depends only on its own activations and on which kernel family serves the
// call: small batches (< 8 tokens) use the decode-style kernels, larger ones the token-lane
// prefill kernels (AVX-512). Within a family results are bitwise identical whatever the
// batch size or the token's position; across families they differ by f32 rounding only.
TEST_P(MatmulTest, DecodeAndBatchesAgree) {
  const GGMLType t = GetParam();
  const int64_t cols = test_cols(t);
  const int64_t rows = 45;
  const size_t row_bytes = ggml_row_bytes(t, cols);
  const auto data = qtest::random_rows(t, rows, cols, 77u);
  const WeightView W{t, rows, cols, data.data()};
  const int64_t n = 40, shift = 3;
  const auto X = random_x(n * cols, 6u);
  auto run = [&](int64_t first, int64_t count) {
    std::vector<float> y(static_cast<size_t>(count * rows));
    matmul(W, X.data() + first * cols, count, y.data(), test::threads());
    return y;
  };
  const auto y40 = run(0, n);       // lane kernel (AVX-512), 3 tiles
  const auto y17 = run(shift, 17);  // same tokens shifted by 3 lanes
  const auto y5 = run(shift, 5);    // decode-style kernel
  for (int64_t k = 0; k < 17; ++k) {
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(0, std::memcmp(&y17[k * rows + r], &y40[(k + shift) * rows + r], sizeof(float)))
          << "token position changed the result, k=" << k;
    }
  }
  std::vector<double> wd_abs_max(static_cast<size_t>(rows));
  for (int64_t tok = 0; tok < 5; ++tok) {
    const auto y1 = run(shift + tok, 1);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(0, std::memcmp(&y1[r], &y5[tok * rows + r], sizeof(float)))  // bitwise, -0 included
          << "decode vs 5-token batch, t=" << tok << " r=" << r;
      const auto w = qtest::ref_row(t, data.data(), cols, r);
      const auto ref = reference(t, w, data.data() + r * row_bytes, X.data() + (shift + tok) * cols, cols);
      // Both kernel families are within ref.tol_b of the simulated ggml value.
      ASSERT_NEAR(y1[r], y17[tok * rows + r], 2 * ref.tol_b) << "decode vs 17-token batch, t=" << tok << " r=" << r;
    }
  }
}

// One token fewer than the token-lane kernels take (quant::lane_min_tokens: 7, or on AVX2 11 for
// the K-quants and 15 for Q8_0) still runs the decode-family kernels: every token's row is bitwise
// the one-token call's.
TEST_P(MatmulTest, BelowTheLaneThresholdEqualsDecode) {
  const GGMLType t = GetParam();
  const int64_t cols = test_cols(t);
  const int64_t rows = 21;
  const auto data = qtest::random_rows(t, rows, cols, 91u);
  const WeightView W{t, rows, cols, data.data()};
  const int64_t n = quant::lane_min_tokens(t) - 1;
  const auto X = random_x(n * cols, 8u);
  std::vector<float> y(static_cast<size_t>(n * rows)), y1(static_cast<size_t>(rows));
  matmul(W, X.data(), n, y.data(), test::threads());
  for (int64_t tok = 0; tok < n; ++tok) {
    matmul(W, X.data() + tok * cols, 1, y1.data(), test::threads());
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(0, std::memcmp(&y1[static_cast<size_t>(r)], &y[static_cast<size_t>(tok * rows + r)], sizeof(float)))
          << n << "-token call vs decode, t=" << tok << " r=" << r;
  }
}

// The 32-element block types at 1, 2, 7 and 20 blocks per row (odd and even counts: the AVX2
// tiles walk blocks by pairs, then a lone last one), over 45 rows (the 2-row decode tiles of
// Q4_0 / Q4_1 / Q5_0 end on a single row): one token against the references, and bitwise equal
// to the same token inside a 5-token call (decode-style tiles of another shape).
TEST_P(MatmulTest, DecodeTilesAtEveryBlockCount) {
  const GGMLType t = GetParam();
  if (qtest::block_of(t) != 32) GTEST_SKIP() << "32-element block types only";
  const int64_t rows = 45;
  for (const int64_t cols : {32, 64, 224, 640}) {
    const size_t row_bytes = ggml_row_bytes(t, cols);
    const auto data = qtest::random_rows(t, rows, cols, 91u + static_cast<uint32_t>(cols));
    const WeightView W{t, rows, cols, data.data()};
    const auto X = random_x(5 * cols, 17u + static_cast<uint32_t>(cols));
    std::vector<float> y5(static_cast<size_t>(5 * rows));
    matmul(W, X.data(), 5, y5.data(), test::threads());
    for (int64_t tok = 0; tok < 5; ++tok) {
      std::vector<float> y1(static_cast<size_t>(rows), -1.0f);
      matmul(W, X.data() + tok * cols, 1, y1.data(), test::threads());
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(0, std::memcmp(&y1[r], &y5[tok * rows + r], sizeof(float)))
            << "cols " << cols << ": decode vs 5-token call, t=" << tok << " r=" << r;
        const auto ref = reference(t, qtest::ref_row(t, data.data(), cols, r), data.data() + r * row_bytes,
                                   X.data() + tok * cols, cols);
        ASSERT_NEAR(y1[r], ref.simulated, ref.tol_b) << "cols " << cols << " t=" << tok << " r=" << r;
        ASSERT_NEAR(y1[r], ref.exact, ref.bound_a) << "cols " << cols << " t=" << tok << " r=" << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& p) { return ggml_type_name(static_cast<uint32_t>(p.param)); });

// Many tokens: several token chunks (the activations of 300 tokens exceed one chunk); a
// token's result does not depend on the chunk it falls in.
TEST(Matmul, LongPrefillChunks) {
  for (const GGMLType t : {GGMLType::Q8_0, GGMLType::Q5_0, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::F32}) {
    const int64_t cols = qtest::block_of(t) == 256 ? 768 : 640;
    const int64_t rows = 40, n = 300, half = 150;
    const auto data = qtest::random_rows(t, rows, cols, 3u);
    const WeightView W{t, rows, cols, data.data()};
    const auto X = random_x(n * cols, 8u);
    std::vector<float> Y(static_cast<size_t>(n * rows)), Yh(static_cast<size_t>(half * rows));
    matmul(W, X.data(), n, Y.data(), test::threads());
    matmul(W, X.data() + half * cols, half, Yh.data(), test::threads());
    EXPECT_EQ(0, std::memcmp(Y.data() + half * rows, Yh.data(), Yh.size() * sizeof(float)))
        << ggml_type_name(static_cast<uint32_t>(t));
    const auto w0 = qtest::ref_row(t, data.data(), cols, 0);
    for (const int64_t tok : {0L, 1L, 133L, 150L, 299L}) {
      const auto ref = reference(t, w0, data.data(), X.data() + tok * cols, cols);
      EXPECT_NEAR(Y[tok * rows], ref.simulated, ref.tol_b) << ggml_type_name(static_cast<uint32_t>(t));
      EXPECT_NEAR(Y[tok * rows], ref.exact, ref.bound_a);
    }
  }
}

// Called from inside a parallel region (e.g. one matmul per attention head), each call runs
// on its own thread and still gives the serial results. Its inner region then has one thread
// while the product's row blocks were shared out for two or more (core/work_split.h): that
// thread takes its own range and every other range from the back.
TEST(Matmul, InsideParallelRegionMatchesSerial) {
  for (const int64_t n : {1, 5, 40}) {  // decode tile, 4 x 4 tiles, token lanes (AVX2 / AVX-512 VNNI)
    const GGMLType t = GGMLType::Q8_0;
    const int64_t rows = 300, cols = 256;  // enough multiply-adds for a parallel region at n = 1
    const auto data = qtest::random_rows(t, rows, cols, 11u);
    const WeightView W{t, rows, cols, data.data()};
    std::vector<std::vector<float>> X, Yser, Ypar;
    ThreadContext one(1);
    for (int k = 0; k < 4; ++k) {
      X.push_back(random_x(n * cols, 20u + static_cast<uint32_t>(k)));
      Yser.emplace_back(static_cast<size_t>(n * rows));
      Ypar.emplace_back(static_cast<size_t>(n * rows));
      matmul(W, X[k].data(), n, Yser[k].data(), one);
    }
#pragma omp parallel for num_threads(2)
    for (int k = 0; k < 4; ++k) {
      ThreadContext three(3);
      matmul(W, X[k].data(), n, Ypar[k].data(), three);
    }
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(0, std::memcmp(Yser[k].data(), Ypar[k].data(), Yser[k].size() * 4)) << "n " << n << " call " << k;
  }
}

TEST(Matmul, KernelIsaIsNamed) {
  const std::string isa = kernel_isa();
  EXPECT_TRUE(isa == "avx512-vnni" || isa == "avx2" || isa == "scalar") << isa;
}

TEST(Matmul, UnsupportedTypeThrowsNamingIt) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> x(256), y(4);
  for (const GGMLType t : {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS, GGMLType::Q8_K}) {
    const WeightView W{t, 1, 256, buf.data()};
    try {
      matmul(W, x.data(), 1, y.data(), test::threads());
      FAIL() << "expected snapkv::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(ggml_type_name(static_cast<uint32_t>(t))), std::string::npos) << e.what();
    }
  }
  const WeightView bad{static_cast<GGMLType>(77), 1, 32, buf.data()};
  EXPECT_THROW(matmul(bad, x.data(), 1, y.data(), test::threads()), Error);
}

TEST(Matmul, ColsNotMultipleOfBlockThrows) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(1024), y(4);
  const WeightView q8{GGMLType::Q8_0, 1, 48, buf.data()};
  try {
    matmul(q8, x.data(), 1, y.data(), test::threads());
    FAIL() << "expected snapkv::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
  }
  const WeightView q4k{GGMLType::Q4_K, 1, 640, buf.data()};
  EXPECT_THROW(matmul(q4k, x.data(), 1, y.data(), test::threads()), Error);
  const WeightView neg{GGMLType::F32, 1, -4, buf.data()};
  EXPECT_THROW(matmul(neg, x.data(), 1, y.data(), test::threads()), Error);
}

TEST(Matmul, EmptyShapes) {
  std::vector<float> x(64, 1.0f), y(8, 5.0f);
  const WeightView none{GGMLType::F32, 0, 64, nullptr};
  matmul(none, x.data(), 3, y.data(), test::threads());  // no rows: nothing to do
  EXPECT_EQ(y[0], 5.0f);
  const WeightView nocols{GGMLType::Q8_0, 4, 0, nullptr};
  matmul(nocols, x.data(), 2, y.data(), test::threads());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 0.0f);
  std::vector<uint8_t> w(34 * 2);
  const WeightView q8{GGMLType::Q8_0, 1, 64, w.data()};
  EXPECT_THROW(matmul(q8, x.data(), -1, y.data(), test::threads()), Error);
  EXPECT_THROW(matmul(q8, nullptr, 1, y.data(), test::threads()), Error);
}

}  // namespace
}  // namespace snapkv
