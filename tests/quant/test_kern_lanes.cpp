// The token-lane prefill kernels (src/quant/kern_lanes.h) of the 32-element block types compute,
// for every (row, token), exactly the lane arithmetic written out below in scalar code: per
// block in order, isum = sum q_w * q_x (exact), acc = fma(float(isum), d_w * d_x, acc), then
// + fma(m_w, s_x, acc) for the types with a minimum. The AVX2 policy and the AVX-512 VNNI one
// both meet it bit for bit, so a prefill gives the same floats on either kind of host. The same
// holds for the K-quant kernels (src/quant/kern_lanes_k.h) and their per-super-block arithmetic
// (expect_k_lane_arithmetic below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
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

/// Calls check(t, w, rows, cols, x, n, what) for every type of `types`, 13 and 40 rows (13: a
/// partial tile of 8 rows), every column count of `cols_list` and the fewest tokens the token-lane
/// kernel takes, 17 and 33 (partial token tiles): random weights, normal activations with one
/// outlier (as real activations have).
template <class Types, class Check>
void for_each_lane_case(const Types& types, std::initializer_list<int64_t> cols_list, Check check) {
  for (const GGMLType t : types) {
    for (const int64_t rows : {13, 40}) {
      for (const int64_t cols : cols_list) {
        for (const int64_t n : {quant::lane_min_tokens(t), int64_t{17}, int64_t{33}}) {
          const std::string what = std::string(ggml_type_name(static_cast<uint32_t>(t))) + " rows " +
                                   std::to_string(rows) + " cols " + std::to_string(cols) + " n " + std::to_string(n);
          const auto seed = static_cast<uint32_t>(rows * 1000 + cols + n);
          const auto w = qtest::random_rows(t, rows, cols, seed);
          std::mt19937 rng(seed);
          std::normal_distribution<float> nd(0.0f, 1.0f);
          std::vector<float> x(static_cast<size_t>(n * cols));
          for (auto& e : x) e = nd(rng);
          x[3] = -30.0f;
          check(t, w, rows, cols, x, n, what);
        }
      }
    }
  }
}
#endif

TEST(TokenLanes, EqualTheLaneArithmeticBitForBit) {
#if !defined(SNAPKV_AVX2)
  GTEST_SKIP() << "the scalar build has no token-lane kernels";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  for_each_lane_case(kLegacyTypes, {64, 96, 640}, expect_lane_arithmetic);
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

#if defined(SNAPKV_AVX2)
/// Unsigned quants u[256], scales and minimums of one K-quant super-block, read from the ggml
/// block specs: Q4_K / Q5_K u in 0..15 / 0..31 with 8 six-bit scales and minimums (one per 32
/// elements), Q6_K u in 0..63 (the value is u - 32) with 16 int8 scales (one per 16).
struct KBlock {
  int u[256];
  int sc[16];
  int mn[8];
  float d, dmin;
};

KBlock read_kblock(GGMLType t, const uint8_t* b) {
  KBlock k{};
  if (t == GGMLType::Q6_K) {
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, part = (i % 128) / 32, l = i % 32;
      const uint8_t low = (part & 1) ? b[64 * h + 32 + l] : b[64 * h + l];
      k.u[i] = (part < 2 ? (low & 15) : (low >> 4)) | (((b[128 + 32 * h + l] >> (2 * part)) & 3) << 4);
    }
    for (int g = 0; g < 16; ++g) k.sc[g] = static_cast<int8_t>(b[192 + g]);
    k.d = static_cast<float>(qtest::h2d(b + 208));
    return k;
  }
  const bool five = t == GGMLType::Q5_K;
  const uint8_t* s = b + 4;
  for (int j = 0; j < 8; ++j) {
    k.sc[j] = j < 4 ? (s[j] & 63) : ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
    k.mn[j] = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
  const uint8_t* qs = b + (five ? 48 : 16);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32, l = i % 32;
    const uint8_t byte = qs[32 * (i / 64) + l];
    k.u[i] = (j % 2 == 0 ? (byte & 15) : (byte >> 4)) + (five ? ((b[16 + l] >> j) & 1) * 16 : 0);
  }
  k.d = static_cast<float>(qtest::h2d(b));
  k.dmin = static_cast<float>(qtest::h2d(b + 2));
  return k;
}

/// Runs matmul on n tokens x (K-quant weights) and compares every output with the lane
/// arithmetic of kern_lanes_k.h: per super-block in order, with x the token's Q8_K quants, dx
/// its scale and bsum16 / bsum32 its sums of 16 / 32 quants,
///   Q4_K / Q5_K: isum = sum_j sc[j] * (u . x over sub-block j), ms = sum_j mn[j] * bsum32[j],
///                acc = fma(float(isum), d * dx, acc), acc = fma(-float(ms), dmin * dx, acc)
///   Q6_K:        is = sum_g sc[g] * (u . x over group g) - 32 * sum_g sc[g] * bsum16[g],
///                acc = fma(float(is), d * dx, acc)
/// with every integer exact.
void expect_k_lane_arithmetic(GGMLType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& x, int64_t n, const std::string& what) {
  const WeightView W{t, rows, cols, w.data()};
  std::vector<float> y(static_cast<size_t>(n * rows));
  ThreadContext tc(2);
  matmul(W, x.data(), n, y.data(), tc);
  const int64_t nb = cols / 256;
  std::vector<uint8_t> xq(quant::q8k_row_stride(cols));
  for (int64_t tok = 0; tok < n; ++tok) {
    quant::quantize_q8k_row(x.data() + tok * cols, cols, xq.data());
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const KBlock k = read_kblock(t, W.row(r) + static_cast<size_t>(b) * qtest::bytes_of(t));
        const uint8_t* xb = xq.data() + static_cast<size_t>(b) * quant::kQ8KBlock;
        const auto* q = reinterpret_cast<const int8_t*>(xb);
        int16_t bsum16[16], bsum32[8];
        float dx = 0.0f;
        std::memcpy(bsum16, xb + quant::kQ8KBsum16, sizeof(bsum16));
        std::memcpy(bsum32, xb + quant::kQ8KBsum32, sizeof(bsum32));
        std::memcpy(&dx, xb + quant::kQ8KD, 4);
        if (t == GGMLType::Q6_K) {
          int32_t isum = 0, corr = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += k.u[16 * g + l] * q[16 * g + l];
            isum += k.sc[g] * dot;
            corr += k.sc[g] * bsum16[g];
          }
          acc = std::fma(static_cast<float>(isum - 32 * corr), k.d * dx, acc);
        } else {
          int32_t isum = 0, ms = 0;
          for (int j = 0; j < 8; ++j) {
            int32_t dot = 0;
            for (int l = 0; l < 32; ++l) dot += k.u[32 * j + l] * q[32 * j + l];
            isum += k.sc[j] * dot;
            ms += k.mn[j] * bsum32[j];
          }
          acc = std::fma(static_cast<float>(isum), k.d * dx, acc);
          acc = std::fma(-static_cast<float>(ms), k.dmin * dx, acc);
        }
      }
      ASSERT_EQ(y[static_cast<size_t>(tok * rows + r)], acc) << what << " token " << tok << " row " << r;
    }
  }
}

const GGMLType kKTypes[] = {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};
#endif

TEST(TokenLanes, KQuantsEqualTheLaneArithmeticBitForBit) {
#if !defined(SNAPKV_AVX2)
  GTEST_SKIP() << "the scalar build has no token-lane kernels";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  for_each_lane_case(kKTypes, {256, 768, 2048}, expect_k_lane_arithmetic);
#endif
}

// The AVX2 K-quant policies' int16 sums at their limits: every quant at its largest value (Q4_K 15,
// Q5_K 31, Q6_K 63), the largest scales and minimums (63; Q6_K scales -128), against activations
// of +-127 of one sign per token: each int16 lane holds kGroupSum pair sums of 2 x umax x 127
// (30480 / 31496 / 32004 of 32767).
TEST(TokenLanes, KQuantsLargestQuantsStayExact) {
#if !defined(SNAPKV_AVX2)
  GTEST_SKIP() << "the scalar build has no token-lane kernels";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  const int64_t rows = 9, cols = 512, n = 16;
  for (const GGMLType t : kKTypes) {
    const size_t bs = qtest::bytes_of(t);
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 256) * bs, 0xFF);
    for (size_t i = 0; i < w.size(); i += bs) {
      if (t == GGMLType::Q6_K) {
        std::memset(w.data() + i + 192, 0x80, 16);  // scales -128
        qtest::wr16(w.data() + i + 208, fp32_to_fp16(0.001f));
      } else {
        qtest::wr16(w.data() + i, fp32_to_fp16(0.001f));
        qtest::wr16(w.data() + i + 2, fp32_to_fp16(0.002f));
      }
    }
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (int64_t tok = 0; tok < n; ++tok)
      for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(tok * cols + c)] = tok % 2 == 0 ? 1.5f : -1.5f;
    expect_k_lane_arithmetic(t, w, rows, cols, x, n, ggml_type_name(static_cast<uint32_t>(t)));
  }
#endif
}

}  // namespace
}  // namespace snapkv
