// The token-lane prefill kernels (src/quant/kern_lanes.h) of the 32-element block types compute,
// for every (row, token), exactly the lane arithmetic written out below in scalar code: per
// block in order, isum = sum q_w * q_x (exact), acc = fma(float(isum), d_w * d_x, acc), then
// + fma(m_w, s_x, acc) for the types with a minimum. The AVX2 policy and the AVX-512 VNNI one
// both meet it bit for bit, so a prefill gives the same floats on either kind of host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_context.h"
#include "quant/act_quant.h"
#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "quant/simd.h"
#include "quant_test_util.h"

namespace snapkv {
namespace {

#if defined(SNAPKV_AVX2)
/// Signed quants v[32], scale d and minimum m of one weight block, read from the ggml block
/// specs: Q4_0 nib - 8, Q4_1 nib, Q5_0 (nib | bit 4) - 16, Q5_1 nib | bit 4, Q8_0 int8.
void read_block(GGMLType t, const uint8_t* b, int (&v)[32], float& d, float& m) {
  d = static_cast<float>(qtest::h2d(b));
  m = 0.0f;
  auto nibbles = [&](const uint8_t* qs, uint32_t qh, int bias) {
    for (int j = 0; j < 16; ++j) {
      v[j] = (qs[j] & 0x0F) + static_cast<int>(((qh >> j) & 1u) << 4) - bias;
      v[j + 16] = (qs[j] >> 4) + static_cast<int>(((qh >> (j + 16)) & 1u) << 4) - bias;
    }
  };
  uint32_t qh = 0;
  switch (t) {
    case GGMLType::Q4_0:
      return nibbles(b + 2, 0, 8);
    case GGMLType::Q4_1:
      m = static_cast<float>(qtest::h2d(b + 2));
      return nibbles(b + 4, 0, 0);
    case GGMLType::Q5_0:
      std::memcpy(&qh, b + 2, 4);
      return nibbles(b + 6, qh, 16);
    case GGMLType::Q5_1:
      m = static_cast<float>(qtest::h2d(b + 2));
      std::memcpy(&qh, b + 4, 4);
      return nibbles(b + 8, qh, 0);
    default:  // Q8_0
      for (int j = 0; j < 32; ++j) v[j] = static_cast<int8_t>(b[2 + j]);
  }
}

/// Runs matmul on n tokens x and compares every output with the lane arithmetic (see the top).
void expect_lane_arithmetic(GGMLType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                            const std::vector<float>& x, int64_t n, const std::string& what) {
  const bool with_min = t == GGMLType::Q4_1 || t == GGMLType::Q5_1;
  const WeightView W{t, rows, cols, w.data()};
  std::vector<float> y(static_cast<size_t>(n * rows));
  ThreadContext tc(2);
  matmul(W, x.data(), n, y.data(), tc);
  const int64_t nb = cols / 32;
  std::vector<uint8_t> xq(quant::q8_row_stride(cols));
  for (int64_t tok = 0; tok < n; ++tok) {
    quant::quantize_q8_row(x.data() + tok * cols, cols, 0, with_min, xq.data());
    const auto* s = reinterpret_cast<const float*>(xq.data() + quant::q8_s_offset(cols));
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int v[32];
        float d = 0.0f, m = 0.0f;
        read_block(t, W.row(r) + static_cast<size_t>(b) * W.row_bytes() / static_cast<size_t>(nb), v, d, m);
        const uint8_t* xb = xq.data() + quant::q8_block_offset(b);
        const auto* q = reinterpret_cast<const int8_t*>(xb);
        float dx = 0.0f;
        std::memcpy(&dx, xb + quant::kQ8Dv, 4);
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += v[j] * q[j];
        acc = std::fma(static_cast<float>(isum), d * dx, acc);
        if (with_min) acc = std::fma(m, s[b], acc);
      }
      ASSERT_EQ(y[static_cast<size_t>(tok * rows + r)], acc) << what << " token " << tok << " row " << r;
    }
  }
}

const GGMLType kLegacyTypes[] = {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0};
#endif

TEST(TokenLanes, EqualTheLaneArithmeticBitForBit) {
#if !defined(SNAPKV_AVX2)
  GTEST_SKIP() << "the scalar build has no token-lane kernels";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  for (const GGMLType t : kLegacyTypes) {
    for (const int64_t rows : {13, 40}) {
      for (const int64_t cols : {64, 96, 640}) {
        for (const int64_t n : {8, 17, 33}) {  // >= 8 tokens: the token-lane kernel; partial tiles
          const std::string what = std::string(ggml_type_name(static_cast<uint32_t>(t))) + " rows " +
                                   std::to_string(rows) + " cols " + std::to_string(cols) + " n " + std::to_string(n);
          const auto seed = static_cast<uint32_t>(rows * 1000 + cols + n);
          const auto w = qtest::random_rows(t, rows, cols, seed);
          std::mt19937 rng(seed);
          std::normal_distribution<float> nd(0.0f, 1.0f);
          std::vector<float> x(static_cast<size_t>(n * cols));
          for (auto& e : x) e = nd(rng);
          x[3] = -30.0f;  // an outlier, as real activations have
          expect_lane_arithmetic(t, w, rows, cols, x, n, what);
        }
      }
    }
  }
#endif
}

// The int16 sums of the AVX2 policy at their limits: every quant at its largest magnitude (4-bit
// 15, 5-bit 31, Q8_0 -128 and 127) against activations of +-127 of one sign per token, so each
// int16 lane holds kGroupSum pair sums of 2 x kMaxU x 127 (30480 / 31496 / 32512 of 32767).
TEST(TokenLanes, LargestQuantsStayExact) {
#if !defined(SNAPKV_AVX2)
  GTEST_SKIP() << "the scalar build has no token-lane kernels";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  const int64_t rows = 9, cols = 96, n = 16;
  for (const GGMLType t : kLegacyTypes) {
    for (const uint8_t q8 : {uint8_t{0x80}, uint8_t{0x7F}}) {  // Q8_0: -128, 127 (others: all bits set)
      const size_t bs = qtest::bytes_of(t);
      std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 32) * bs, 0xFF);
      for (size_t i = 0; i < w.size(); i += bs) {
        // d, then m for the types with a minimum; every quant bit set (Q8_0: q8).
        qtest::wr16(w.data() + i, fp32_to_fp16(0.01f));
        if (t == GGMLType::Q4_1 || t == GGMLType::Q5_1) qtest::wr16(w.data() + i + 2, fp32_to_fp16(-0.02f));
        if (t == GGMLType::Q8_0) std::memset(w.data() + i + 2, q8, 32);
      }
      std::vector<float> x(static_cast<size_t>(n * cols));
      for (int64_t tok = 0; tok < n; ++tok)
        for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(tok * cols + c)] = tok % 2 == 0 ? 1.5f : -1.5f;
      expect_lane_arithmetic(t, w, rows, cols, x, n,
                             std::string(ggml_type_name(static_cast<uint32_t>(t))) + " q8 " + std::to_string(q8));
    }
  }
#endif
}

}  // namespace
}  // namespace snapkv
