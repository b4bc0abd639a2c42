// dequantize_row, dot_row_f32 and the f16 row converters against references written from
// the ggml block specs (quant_test_util.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_context.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using qtest::kAllTypes;

class DequantizeTest : public ::testing::TestWithParam<GGMLType> {};

TEST_P(DequantizeTest, MatchesPerElementReference) {
  const GGMLType t = GetParam();
  const int64_t cols = 3 * 256;  // several blocks of every type
  const int64_t rows = 5;
  const auto data = qtest::random_rows(t, rows, cols, 1234u + static_cast<uint32_t>(t));
  const WeightView W{t, rows, cols, data.data()};
  std::vector<float> got(static_cast<size_t>(cols));
  size_t nonzero = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, W.row(r), got.data(), cols);
    const auto ref = qtest::ref_row(t, data.data(), cols, r);
    double row_max = 0.0;
    for (const double v : ref) row_max = std::max(row_max, std::fabs(v));
    for (int64_t c = 0; c < cols; ++c) {
      // The library evaluates in float: a few roundings of terms no larger than the row's max.
      const double tol = 8.0 * std::ldexp(1.0, -24) * row_max;
      ASSERT_NEAR(got[c], ref[c], tol) << ggml_type_name(static_cast<uint32_t>(t)) << " row " << r << " col " << c;
      nonzero += got[c] != 0.0f;
    }
  }
  EXPECT_GT(nonzero, static_cast<size_t>(rows * cols * 8 / 10));  // not a degenerate all-zero case
}

TEST_P(DequantizeTest, DotRowF32MatchesDoubleReference) {
  const GGMLType t = GetParam();
  const int64_t cols = 2 * 256;
  const auto data = qtest::random_rows(t, 3, cols, 99u);
  const WeightView W{t, 3, cols, data.data()};
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) x[c] = std::sin(0.37f * static_cast<float>(c)) + 0.1f;
  for (int64_t r = 0; r < 3; ++r) {
    const auto w = qtest::ref_row(t, data.data(), cols, r);
    double ref = 0.0, mag = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      ref += w[c] * x[c];
      mag += std::fabs(w[c] * x[c]);
    }
    EXPECT_NEAR(dot_row_f32(W, r, x.data()), ref, 1e-6 * mag + 1e-9);
  }
  EXPECT_THROW(dot_row_f32(W, 3, x.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& p) { return ggml_type_name(static_cast<uint32_t>(p.param)); });

TEST(Dequantize, KnownValuesQ8_0AndQ4_0) {
  // Q8_0: d = 0.5, q = -3, 0, 127 ...
  uint8_t b8[34] = {};
  qtest::wr16(b8, fp32_to_fp16(0.5f));
  b8[2] = static_cast<uint8_t>(-3);
  b8[3] = 0;
  b8[4] = 127;
  float y[32];
  dequantize_row(GGMLType::Q8_0, b8, y, 32);
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 63.5f);
  // Q4_0: byte 0x2F -> element 0 = (15-8)*d, element 16 = (2-8)*d.
  uint8_t b4[18] = {};
  qtest::wr16(b4, fp32_to_fp16(0.25f));
  for (int j = 0; j < 16; ++j) b4[2 + j] = 0x88;  // zeros
  b4[2] = 0x2F;
  dequantize_row(GGMLType::Q4_0, b4, y, 32);
  EXPECT_EQ(y[0], 1.75f);
  EXPECT_EQ(y[16], -1.5f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(Dequantize, UnsupportedTypeThrowsNamingIt) {
  uint8_t buf[256] = {};
  float y[256];
  try {
    dequantize_row(GGMLType::Q2_K, buf, y, 256);
    FAIL() << "expected snapkv::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(GGMLType::IQ4_NL, buf, y, 32), Error);
  EXPECT_THROW(dequantize_row(static_cast<GGMLType>(99), buf, y, 32), Error);
}

TEST(Dequantize, PartialBlockThrows) {
  uint8_t buf[64] = {};
  float y[64];
  try {
    dequantize_row(GGMLType::Q8_0, buf, y, 31);
    FAIL() << "expected snapkv::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(GGMLType::Q6_K, buf, y, 32), Error);
}

TEST(Fp16Rows, MatchScalarConversionsIncludingSpecials) {
  std::vector<float> x;
  for (int i = -2000; i <= 2000; ++i) x.push_back(static_cast<float>(i) * 0.0137f);
  const float specials[] = {0.0f,
                            -0.0f,
                            65504.0f,
                            65520.0f,
                            1e-8f,
                            -6.0e-8f,
                            5.96e-8f,
                            1e9f,
                            -1e9f,
                            3.0e-5f,
                            0.33333f,
                            1.0009765625f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  x.push_back(0.1f);  // odd length: exercises the scalar tail
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> h(x.size());
  fp32_to_fp16_row(x.data(), h.data(), n);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], fp32_to_fp16(x[i])) << "x = " << x[i];
  std::vector<float> back(x.size());
  fp16_to_fp32_row(h.data(), back.data(), n);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], fp16_to_fp32(h[i]));
  // Every half value converts exactly and round-trips.
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(65536);
  fp16_to_fp32_row(all.data(), f.data(), 65536);
  std::vector<uint16_t> again(65536);
  fp32_to_fp16_row(f.data(), again.data(), 65536);
  for (int i = 0; i < 65536; ++i) {
    if ((i & 0x7c00) == 0x7c00 && (i & 0x3ff) != 0) continue;  // NaN payloads may be quieted
    ASSERT_EQ(again[i], i) << "half 0x" << std::hex << i;
  }
}

// The decode kernels' scale table (quant/blocks.h) is exactly fp16_to_fp32 for every half,
// NaN payloads, subnormals and -0 included.
TEST(Fp16Table, EqualsConversionForEveryHalf) {
  const float* tab = quant::f16_f32_table();
  ASSERT_EQ(tab, quant::f16_f32_table());  // built once
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = fp16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(0, std::memcmp(&tab[h], &want, sizeof(float))) << "half 0x" << std::hex << h;
  }
}

TEST(ThreadContext, CountsScratchAndErrors) {
  ThreadContext one(1), three(3);
  EXPECT_EQ(one.n_threads(), 1);
  EXPECT_EQ(three.n_threads(), 3);
  EXPECT_THROW(ThreadContext(0), Error);
  EXPECT_THROW(ThreadContext(-2), Error);
  EXPECT_EQ(three.scratch_bytes(), 0u);  // nothing allocated up front
  uint8_t* a = three.scratch(0, 2, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(three.scratch_bytes(), 128u);       // rounded up to 64 bytes
  EXPECT_EQ(three.scratch(0, 2, 50), a);        // reused while it fits
  EXPECT_NE(three.scratch(1, 2, 50), a);        // slots are independent
  EXPECT_NE(three.scratch(0, 1, 50), a);        // so are threads
  EXPECT_THROW(three.scratch(0, 3, 8), Error);  // thread out of range
  EXPECT_THROW(three.scratch(ThreadContext::kSlots, 0, 8), Error);
}

}  // namespace
}  // namespace snapkv
