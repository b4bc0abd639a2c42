// The row-lane Q8_0 decode prototype (src/quant/kern_rowlane.h): its layout holds every weight
// once, and a row's value for 1..7 tokens at once equals the token-lane kernel's (the matmul of
// >= 8 tokens) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_context.h"
#include "quant/act_quant.h"
#include "quant/kern_rowlane.h"
#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using quant::kRowLaneBlockBytes;

TEST(RowLane, PackHoldsEveryWeightOnce) {
  const int64_t rows = 37, cols = 96, nb = cols / 32;  // the last group half full
  const auto w = qtest::random_rows(GGMLType::Q8_0, rows, cols, 11);
  const size_t stride = static_cast<size_t>(nb) * 34;
  std::vector<uint8_t> p(quant::rowlane_q8_0_bytes(rows, cols), 0xAB);
  ASSERT_EQ(p.size(), size_t{3} * 3 * kRowLaneBlockBytes);
  quant::pack_rowlane_q8_0(w.data(), stride, rows, cols, p.data());
  for (int64_t r = 0; r < 48; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = p.data() + static_cast<size_t>((r / 16) * nb + b) * kRowLaneBlockBytes;
      const int l = static_cast<int>(r % 16);
      const uint8_t* src = w.data() + static_cast<size_t>(r) * stride + static_cast<size_t>(b) * 34;
      for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 4; ++i) {
          const uint8_t want = r < rows ? static_cast<uint8_t>(src[2 + 4 * k + i] ^ 0x80) : 0;
          EXPECT_EQ(blk[32 + 64 * k + 4 * l + i], want) << r << " " << b;
        }
      EXPECT_EQ(std::memcmp(blk + 2 * l, r < rows ? src : std::vector<uint8_t>(2, 0).data(), 2), 0) << r;
    }
}

TEST(RowLane, RowsDequantizeAsTheGgufRows) {
  const int64_t rows = 45, cols = 640;
  const auto w = qtest::random_rows(GGMLType::Q8_0, rows, cols, 21);
  const WeightView W{GGMLType::Q8_0, rows, cols, w.data()};
  std::vector<uint8_t> p(quant::rowlane_q8_0_bytes(rows, cols));
  quant::pack_rowlane_q8_0(w.data(), W.row_bytes(), rows, cols, p.data());
  std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(GGMLType::Q8_0, W.row(r), a.data(), cols);
    quant::dequantize_rowlane_q8_0_row(p.data(), cols, r, b.data());
    ASSERT_EQ(a, b) << "row " << r;
  }
}

TEST(RowLane, EqualsTheTokenLaneKernelBitForBit) {
#if !defined(SNAPKV_VNNI)
  GTEST_SKIP() << "AVX-512 VNNI only";
#else
  if (!quant::token_lanes_enabled()) GTEST_SKIP() << "SNAPKV_TOKEN_LANES=0";
  for (const int64_t rows : {16, 53, 300}) {
    for (const int64_t cols : {32, 640, 2048}) {
      const int64_t n = 16;  // >= 8 tokens: the token-lane kernel
      const auto w = qtest::random_rows(GGMLType::Q8_0, rows, cols, static_cast<uint32_t>(rows + cols));
      std::mt19937 rng(static_cast<uint32_t>(rows * 7 + cols));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n * cols));
      for (auto& v : x) v = nd(rng);
      x[5] = 40.0f;  // an outlier, as real activations have
      const WeightView W{GGMLType::Q8_0, rows, cols, w.data()};
      std::vector<float> y_lanes(static_cast<size_t>(n * rows));
      ThreadContext tc(2);
      matmul(W, x.data(), n, y_lanes.data(), tc);

      std::vector<uint8_t> packed(quant::rowlane_q8_0_bytes(rows, cols));
      quant::pack_rowlane_q8_0(w.data(), W.row_bytes(), rows, cols, packed.data());
      std::vector<uint8_t> act(quant::q8_row_stride(cols));
      std::vector<quant::RowLaneAct> ra(static_cast<size_t>(n));
      const size_t ab = quant::rowlane_act_bytes(cols);
      std::vector<uint8_t> abuf(static_cast<size_t>(n) * ab);
      for (int64_t t = 0; t < n; ++t) {
        quant::quantize_q8_row(x.data() + t * cols, cols, 128, false, act.data());
        ra[static_cast<size_t>(t)] =
            quant::build_rowlane_act(act.data(), cols, abuf.data() + static_cast<size_t>(t) * ab);
      }
      // 1..7 tokens at once (the weights loaded once for all), from token t0 on.
      const auto y_stride = static_cast<size_t>(rows) + 16;
      for (int k = 1; k <= 7; ++k)
        for (int64_t t0 = 0; t0 + k <= n; t0 += k) {
          std::vector<float> y(static_cast<size_t>(k) * y_stride, -1.0f);
          quant::rowlane_q8_0(packed.data(), rows, cols, ra.data() + t0, k, y.data(), y_stride, 0, (rows + 15) / 16);
          for (int t = 0; t < k; ++t) {
            for (int64_t r = 0; r < rows; ++r)
              ASSERT_EQ(y[static_cast<size_t>(t) * y_stride + static_cast<size_t>(r)],
                        y_lanes[static_cast<size_t>((t0 + t) * rows + r)])
                  << "rows " << rows << " cols " << cols << " tokens " << k << " token " << t0 + t << " row " << r;
            // the last group's missing rows are not stored
            EXPECT_EQ(y[static_cast<size_t>(t) * y_stride + static_cast<size_t>(rows)], -1.0f);
          }
          // The driver the engine calls (quantizes the tokens itself, threads over the groups).
          std::vector<float> yd(static_cast<size_t>(k * rows), -1.0f);
          quant::matmul_rowlane_q8_0(packed.data(), rows, cols, x.data() + t0 * cols, k, yd.data(), tc);
          ASSERT_TRUE(std::equal(yd.begin(), yd.end(), y_lanes.begin() + t0 * rows))
              << "driver: rows " << rows << " cols " << cols << " tokens " << k << " from " << t0;
        }
    }
  }
#endif
}

TEST(RowLane, DriverRejectsBadShapes) {
  ThreadContext tc(1);
  std::vector<uint8_t> packed(quant::rowlane_q8_0_bytes(16, 64));
  std::vector<float> x(8 * 64), y(8 * 16);
  for (const int64_t n : {0, 8}) {
    try {
      quant::matmul_rowlane_q8_0(packed.data(), 16, 64, x.data(), n, y.data(), tc);
      ADD_FAILURE() << "no error for " << n << " tokens";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("1-7 tokens"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(quant::matmul_rowlane_q8_0(packed.data(), 16, 48, x.data(), 1, y.data(), tc), Error);
}

}  // namespace
}  // namespace snapkv
