// The KV cache's Q4_0 codec (core/q4_0_rows.h): a known block (ggml's scale m / -8, truncation of
// x / d + 8.5, the cap at 15, the nibble layout), the error bound, all-zero, non-finite and tiny
// blocks, the SIMD dequantization against the scalar formula, and RowsView over Q4_0 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "core/kv_rows.h"
#include "core/q4_0_rows.h"
#include "core/rows_view.h"
#include "snapkv/error.h"
#include "test_util.h"

namespace snapkv {
namespace {

float scale_of(const uint8_t* block) {
  uint16_t dh;
  std::memcpy(&dh, block, 2);
  return fp16_to_fp32(dh);
}

/// The 4-bit code of element j of a block (low nibbles hold 0..15, high nibbles 16..31).
int code_of(const uint8_t* block, int j) {
  const uint8_t b = block[2 + (j % 16)];
  return j < 16 ? (b & 0xF) : (b >> 4);
}

TEST(Q4_0Rows, KnownBlock) {
  // m = -4 (the largest magnitude), so d = 0.5 and 1 / d = 2: q = min(15, trunc(2 x + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -4.0f;   // 0.5 -> 0: decodes as -4
  x[1] = 1.0f;    // 10.5 -> 10: 1
  x[2] = 0.25f;   // 9 -> 9: 0.5 (halfway rounds up)
  x[3] = -0.25f;  // 8 -> 8: 0
  x[4] = 3.9f;    // 16.3 -> 16, capped at 15: 3.5
  x[16] = 2.0f;   // 12.5 -> 12: 2 (the high nibble of byte 0)
  std::vector<uint8_t> b(18);
  quantize_q4_0_row(x.data(), b.data(), 32);
  EXPECT_EQ(scale_of(b.data()), 0.5f);
  const int want[5] = {0, 10, 9, 8, 15};
  for (int j = 0; j < 5; ++j) EXPECT_EQ(code_of(b.data(), j), want[j]) << j;
  EXPECT_EQ(code_of(b.data(), 16), 12);
  EXPECT_EQ(b[2], 0xC0);
  for (int j = 5; j < 32; ++j) EXPECT_EQ(code_of(b.data(), j), j == 16 ? 12 : 8) << j;
  std::vector<float> y(32);
  dequantize_q4_0_row(b.data(), y.data(), 32);
  const float back[5] = {-4.0f, 1.0f, 0.5f, 0.0f, 3.5f};
  for (int j = 0; j < 5; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], back[j]) << j;
  EXPECT_EQ(y[16], 2.0f);
}

TEST(Q4_0Rows, PositiveMaximumGetsANegativeScale) {
  // m = 4: d = -0.5. The maximum maps to code 0 exactly; -4 maps to 16.5 -> 15, i.e. -3.5.
  std::vector<float> x(32, 0.0f);
  x[7] = 4.0f;
  x[8] = -4.0f;
  std::vector<uint8_t> b(18);
  quantize_q4_0_row(x.data(), b.data(), 32);
  EXPECT_EQ(scale_of(b.data()), -0.5f);
  std::vector<float> y(32);
  dequantize_q4_0_row(b.data(), y.data(), 32);
  EXPECT_EQ(y[7], 4.0f);
  EXPECT_EQ(y[8], -3.5f);
}

TEST(Q4_0Rows, ZeroNonFiniteAndTinyBlocks) {
  std::vector<float> x(160, 1.0f), y(160, 5.0f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = 0.0f;                                   // block 0: zeros
  x[40] = std::numeric_limits<float>::quiet_NaN();                                                 // block 1
  x[70] = -std::numeric_limits<float>::infinity();                                                 // block 2
  for (int j = 96; j < 128; ++j) x[static_cast<size_t>(j)] = 1e-38f * static_cast<float>(j - 95);  // block 3
  // Block 4: subnormal, so 1 / d overflows to inf (the id = 0 branch).
  for (int j = 128; j < 160; ++j) x[static_cast<size_t>(j)] = -1e-40f * static_cast<float>(j - 127);
  std::vector<uint8_t> b(5 * 18);
  quantize_q4_0_row(x.data(), b.data(), 160);
  dequantize_q4_0_row(b.data(), y.data(), 160);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.0f) << j;
  for (int j = 32; j < 96; ++j) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(j)])) << j;
  for (int j = 96; j < 160; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.0f) << j;
  EXPECT_THROW((void)kv_row_bytes(KVType::Q4_0, 80), Error);
}

TEST(Q4_0Rows, ErrorWithinHalfAStepAndSimdEqualsScalar) {
  const int n = 256;
  const std::vector<float> x = test::randn(static_cast<size_t>(n) * 7, 5, 3.0f);
  const size_t rb = kv_row_bytes(KVType::Q4_0, n);
  ASSERT_EQ(rb, 144u);
  std::vector<uint8_t> b(7 * rb);
  for (int r = 0; r < 7; ++r) quantize_kv_row(KVType::Q4_0, x.data() + r * n, b.data() + r * rb, n);
  std::vector<float> y(x.size());
  dequantize_kv_rows(KVType::Q4_0, b.data(), y.data(), 7, n);
  for (size_t blk = 0; blk < x.size() / 32; ++blk) {
    const uint8_t* bb = b.data() + blk * 18;
    const float d = scale_of(bb);
    float m = 0.0f;
    for (int j = 0; j < 32; ++j) m = std::max(m, std::fabs(x[blk * 32 + static_cast<size_t>(j)]));
    const float step = m / 8.0f;  // |exact d|
    for (int j = 0; j < 32; ++j) {
      const size_t i = blk * 32 + static_cast<size_t>(j);
      // Half a step, plus the f16 rounding of the scale (<= 2^-11 relative) on |q - 8| <= 8; the
      // one code the cap moves (x = -m, the opposite of the maximum) errs by a whole step.
      const bool capped = x[i] / d >= 7.5f;
      EXPECT_LE(std::fabs(y[i] - x[i]), step * (capped ? 1.0f : 0.5f) + 8.0f * step * 0x1p-11f + 1e-6f) << i;
      // The SIMD dequantization has the bits of the scalar formula d * (q - 8).
      EXPECT_EQ(y[i], d * static_cast<float>(code_of(bb, j) - 8)) << i;
    }
  }
}

TEST(Q4_0Rows, RowsViewDequantizes) {
  const int hd = 64;
  const std::vector<float> x = test::randn(3 * hd, 9);
  std::vector<uint8_t> b(3 * 36);
  for (int r = 0; r < 3; ++r) quantize_q4_0_row(x.data() + r * hd, b.data() + r * 36, hd);
  const RowsView view{b.data(), KVType::Q4_0, 3, hd};
  std::vector<float> all(3 * hd), one(hd), want(hd);
  view.rows(0, 3, all.data());
  view.row(2, one.data());
  dequantize_q4_0_row(b.data() + 2 * 36, want.data(), hd);
  EXPECT_EQ(one, want);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin() + 2 * hd));
  EXPECT_THROW(view.row(3, one.data()), Error);
  EXPECT_EQ(kv_row_bytes(KVType::Q4_0, 256), 144u);
  EXPECT_FALSE(kv_type_supports(KVType::Q4_0, 72));
  EXPECT_TRUE(kv_type_quantized(KVType::Q4_0));
  EXPECT_FALSE(kv_type_quantized(KVType::F16));
  EXPECT_EQ(kv_type_from_name("q4_0"), KVType::Q4_0);
  EXPECT_STREQ(kv_type_name(KVType::Q4_0), "q4_0");
}

}  // namespace
}  // namespace snapkv
