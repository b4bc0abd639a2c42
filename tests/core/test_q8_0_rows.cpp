// The KV cache's Q8_0 codec (core/q8_0_rows.h): known blocks, ggml's rounding (roundf: ties away
// from zero), the error bound, all-zero blocks, and RowsView over Q8_0 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "core/kv_rows.h"
#include "core/q8_0_rows.h"
#include "core/rows_view.h"
#include "snapkv/error.h"
#include "test_util.h"

namespace snapkv {
namespace {

TEST(Q8_0Rows, KnownBlock) {
  // max |x| = 127 * 0.25, so d = 0.25 exactly and q = x / 0.25 with ties rounded away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 31.75f;   // 127
  x[1] = -31.75f;  // -127
  x[2] = 0.125f;   // 0.5 -> 1
  x[3] = -0.125f;  // -0.5 -> -1
  x[4] = 15.875f;  // 63.5 -> 64
  x[5] = 0.3f;     // 1.2 -> 1
  std::vector<uint8_t> b(34);
  quantize_q8_0_row(x.data(), b.data(), 32);
  uint16_t dh;
  std::memcpy(&dh, b.data(), 2);
  EXPECT_EQ(fp16_to_fp32(dh), 0.25f);
  const auto* q = reinterpret_cast<const int8_t*>(b.data() + 2);
  const int8_t want[6] = {127, -127, 1, -1, 64, 1};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(q[j], want[j]) << j;
  for (int j = 6; j < 32; ++j) EXPECT_EQ(q[j], 0) << j;
  std::vector<float> y(32);
  dequantize_q8_0_row(b.data(), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.25f * q[j]) << j;
}

TEST(Q8_0Rows, ZeroBlockStaysZero) {
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  x[40] = 3.0f;  // second block non-zero, first all zero
  std::vector<uint8_t> b(68, 0xAB);
  quantize_q8_0_row(x.data(), b.data(), 64);
  dequantize_q8_0_row(b.data(), y.data(), 64);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.0f);
  EXPECT_NEAR(y[40], 3.0f, 3.0f * 0x1p-11f);  // q = 127, d = 3 / 127 rounded to f16
}

TEST(Q8_0Rows, NonFiniteBlocksDecodeAsNaNTinyBlocksAsZero) {
  std::vector<float> x(96, 1.0f), y(96);
  x[3] = std::numeric_limits<float>::quiet_NaN();                                                 // block 0
  x[40] = std::numeric_limits<float>::infinity();                                                 // block 1
  for (int j = 64; j < 96; ++j) x[static_cast<size_t>(j)] = 1e-38f * static_cast<float>(j - 63);  // block 2: tiny
  std::vector<uint8_t> b(3 * 34);
  quantize_q8_0_row(x.data(), b.data(), 96);
  dequantize_q8_0_row(b.data(), y.data(), 96);
  for (int j = 0; j < 64; ++j) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(j)])) << j;
  for (int j = 64; j < 96; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.0f) << j;
  EXPECT_THROW((void)kv_row_bytes(KVType::Q8_0, 80), Error);
}

TEST(Q8_0Rows, ErrorWithinHalfAStepAndSimdEqualsScalar) {
  const int n = 256;
  const std::vector<float> x = test::randn(static_cast<size_t>(n) * 7, 5, 3.0f);
  std::vector<uint8_t> b(7 * static_cast<size_t>(n) / 32 * 34);
  for (int r = 0; r < 7; ++r) quantize_q8_0_row(x.data() + r * n, b.data() + static_cast<size_t>(r) * n / 32 * 34, n);
  std::vector<float> y(x.size());
  dequantize_kv_rows(KVType::Q8_0, b.data(), y.data(), 7, n);
  for (size_t blk = 0; blk < x.size() / 32; ++blk) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + static_cast<size_t>(j)]));
    const uint8_t* bb = b.data() + blk * 34;
    uint16_t dh;
    std::memcpy(&dh, bb, 2);
    const float d = fp16_to_fp32(dh);
    for (int j = 0; j < 32; ++j) {
      const size_t i = blk * 32 + static_cast<size_t>(j);
      // Half a step of the exact scale, plus the f16 rounding of the scale (<= 2^-11 relative) on |q| <= 127.
      EXPECT_LE(std::fabs(y[i] - x[i]), amax / 127.0f * 0.5f + 127.0f * amax / 127.0f * 0x1p-11f + 1e-6f) << i;
      // The SIMD dequantization has the bits of the scalar formula d * q.
      EXPECT_EQ(y[i], d * static_cast<float>(reinterpret_cast<const int8_t*>(bb + 2)[j])) << i;
    }
  }
}

TEST(Q8_0Rows, RowsViewDequantizes) {
  const int hd = 64;
  const std::vector<float> x = test::randn(3 * hd, 9);
  std::vector<uint8_t> b(3 * 68);
  for (int r = 0; r < 3; ++r) quantize_q8_0_row(x.data() + r * hd, b.data() + r * 68, hd);
  const RowsView view{b.data(), KVType::Q8_0, 3, hd};
  std::vector<float> all(3 * hd), one(hd), want(hd);
  view.rows(0, 3, all.data());
  view.row(2, one.data());
  dequantize_q8_0_row(b.data() + 2 * 68, want.data(), hd);
  EXPECT_EQ(one, want);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin() + 2 * hd));
  EXPECT_THROW(view.row(3, one.data()), Error);
  EXPECT_THROW(view.rows(2, 2, all.data()), Error);
  EXPECT_EQ(kv_row_bytes(KVType::Q8_0, 256), 272u);
  EXPECT_EQ(kv_row_bytes(KVType::F16, 64), 128u);
  EXPECT_FALSE(kv_type_supports(KVType::Q8_0, 72));
  EXPECT_EQ(kv_type_from_name("q8_0"), KVType::Q8_0);
  EXPECT_FALSE(kv_type_from_name("q4_1").has_value());
}

}  // namespace
}  // namespace snapkv
