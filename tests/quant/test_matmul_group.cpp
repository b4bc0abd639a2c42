// matmul_group: bitwise the results of one matmul per product, for every weight type, mixed
// types, shared conversions, any thread count and token count; errors before any work.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant_test_util.h"
#include "snapkv/error.h"
#include "support/threads.h"

namespace snapkv {
namespace {

using qtest::kAllTypes;

constexpr int64_t kCols = 768;  // a multiple of every block size (32, 256)

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  return x;
}

struct Product {
  GGMLType type;
  int64_t rows;
  std::vector<uint8_t> data;
  WeightView view() const { return {type, rows, kCols, data.data()}; }
};

std::vector<Product> products(const std::vector<GGMLType>& types) {
  std::vector<Product> out;
  for (size_t i = 0; i < types.size(); ++i) {
    const int64_t rows = 33 + 29 * static_cast<int64_t>(i);  // odd sizes: tile and row-block remainders
    out.push_back({types[i], rows, qtest::random_rows(types[i], rows, kCols, 100u + static_cast<uint32_t>(i))});
  }
  return out;
}

/// Runs the group and the separate calls and compares every output bit.
void expect_group_equals_calls(const std::vector<Product>& ps, int64_t n, int threads, const std::string& what) {
  const auto X = random_x(n * kCols, 9u);
  std::vector<std::vector<float>> yg, ys;
  std::vector<MatmulProduct> group;
  for (const Product& p : ps) {
    yg.emplace_back(static_cast<size_t>(n * p.rows), -7.0f);
    ys.emplace_back(static_cast<size_t>(n * p.rows), -7.0f);
  }
  for (size_t i = 0; i < ps.size(); ++i) group.push_back({ps[i].view(), yg[i].data()});
  matmul_group(group, X.data(), n, test::threads(threads));
  for (size_t i = 0; i < ps.size(); ++i) matmul(ps[i].view(), X.data(), n, ys[i].data(), test::threads(threads));
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(yg[i].data(), ys[i].data(), yg[i].size() * sizeof(float)))
        << what << ": product " << i << " (" << ggml_type_name(static_cast<uint32_t>(ps[i].type)) << "), n=" << n
        << ", threads=" << threads;
  }
}

TEST(MatmulGroup, EveryTypeEqualsSeparateCalls) {
  // All 11 types in one group: more than one shared region (8 products per region).
  const std::vector<GGMLType> all(std::begin(kAllTypes), std::end(kAllTypes));
  const auto ps = products(all);
  for (const int64_t n : {1, 2, 5, 7, 8, 17})
    for (const int threads : {1, 2, 3}) expect_group_equals_calls(ps, n, threads, "all types");
}

TEST(MatmulGroup, SameTypeSharesTheConversion) {
  // q / k / v of one type (SmolLM2: Q4_1), and Gemma 3's mix (Q5_0 q / k, Q8_0 v).
  for (const auto& types : {std::vector<GGMLType>{GGMLType::Q4_1, GGMLType::Q4_1, GGMLType::Q4_1},
                            std::vector<GGMLType>{GGMLType::Q5_0, GGMLType::Q5_0, GGMLType::Q8_0},
                            std::vector<GGMLType>{GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q4_K},
                            std::vector<GGMLType>{GGMLType::F16, GGMLType::F32, GGMLType::F16}}) {
    const auto ps = products(types);
    for (const int64_t n : {1, 3})
      for (const int threads : {1, 2}) expect_group_equals_calls(ps, n, threads, "shared conversion");
  }
}

TEST(MatmulGroup, InsideParallelRegionMatchesSerial) {
  const auto ps = products({GGMLType::Q8_0, GGMLType::Q4_1});
  const auto X = random_x(kCols, 4u);
  std::vector<float> ref0(static_cast<size_t>(ps[0].rows)), ref1(static_cast<size_t>(ps[1].rows));
  matmul(ps[0].view(), X.data(), 1, ref0.data(), test::threads());
  matmul(ps[1].view(), X.data(), 1, ref1.data(), test::threads());
  std::vector<std::vector<float>> y(8);
  for (auto& v : y) v.resize(static_cast<size_t>(ps[0].rows + ps[1].rows));
#pragma omp parallel for num_threads(2)
  for (int k = 0; k < 4; ++k) {
    const MatmulProduct g[] = {{ps[0].view(), y[k].data()}, {ps[1].view(), y[k].data() + ps[0].rows}};
    matmul_group(g, X.data(), 1, test::threads());
  }
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(0, std::memcmp(y[k].data(), ref0.data(), ref0.size() * sizeof(float))) << k;
    EXPECT_EQ(0, std::memcmp(y[k].data() + ps[0].rows, ref1.data(), ref1.size() * sizeof(float))) << k;
  }
}

TEST(MatmulGroup, EmptyProductsAndShapes) {
  matmul_group({}, nullptr, 1, test::threads());  // no products: nothing to do
  const auto ps = products({GGMLType::Q8_0});
  const auto X = random_x(kCols, 2u);
  std::vector<float> y0(static_cast<size_t>(ps[0].rows), 5.0f), ynone(4, 5.0f);
  const WeightView none{GGMLType::F32, 0, kCols, nullptr};
  const MatmulProduct g[] = {{none, ynone.data()}, {ps[0].view(), y0.data()}};
  matmul_group(g, X.data(), 1, test::threads());
  EXPECT_EQ(ynone[0], 5.0f);  // no rows: untouched
  std::vector<float> ref(y0.size());
  matmul(ps[0].view(), X.data(), 1, ref.data(), test::threads());
  EXPECT_EQ(0, std::memcmp(y0.data(), ref.data(), ref.size() * sizeof(float)));
  // No columns: Y = 0 (all products must then have 0 columns).
  std::vector<float> z(6, 5.0f);
  const MatmulProduct zero[] = {{{GGMLType::Q8_0, 3, 0, nullptr}, z.data()},
                                {{GGMLType::F16, 3, 0, nullptr}, z.data() + 3}};
  matmul_group(zero, X.data(), 1, test::threads());
  for (float v : z) EXPECT_EQ(v, 0.0f);
}

TEST(MatmulGroup, ErrorsBeforeAnyWork) {
  const auto ps = products({GGMLType::Q8_0, GGMLType::Q4_K});
  const auto X = random_x(2 * kCols, 3u);
  std::vector<float> y0(static_cast<size_t>(2 * ps[0].rows), 5.0f), y1(static_cast<size_t>(2 * ps[1].rows), 5.0f);
  std::vector<uint8_t> buf(4096);
  auto expect_untouched = [&] {
    for (float v : y0) ASSERT_EQ(v, 5.0f);
  };
  // Differing columns name both counts.
  const WeightView narrow{GGMLType::Q8_0, 1, 64, buf.data()};
  const MatmulProduct cols[] = {{ps[0].view(), y0.data()}, {narrow, y1.data()}};
  try {
    matmul_group(cols, X.data(), 1, test::threads());
    FAIL() << "expected snapkv::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64 columns"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("768"), std::string::npos) << e.what();
  }
  expect_untouched();
  // An unsupported type, a null output or a negative token count in a later product.
  const WeightView q3k{GGMLType::Q3_K, 1, kCols, buf.data()};
  const MatmulProduct unsupported[] = {{ps[0].view(), y0.data()}, {q3k, y1.data()}};
  EXPECT_THROW(matmul_group(unsupported, X.data(), 1, test::threads()), Error);
  expect_untouched();
  const MatmulProduct null_y[] = {{ps[0].view(), y0.data()}, {ps[1].view(), nullptr}};
  EXPECT_THROW(matmul_group(null_y, X.data(), 2, test::threads()), Error);
  expect_untouched();
  const MatmulProduct ok[] = {{ps[0].view(), y0.data()}, {ps[1].view(), y1.data()}};
  EXPECT_THROW(matmul_group(ok, X.data(), -1, test::threads()), Error);
  EXPECT_THROW(matmul_group(ok, nullptr, 1, test::threads()), Error);
  expect_untouched();
}

}  // namespace
}  // namespace snapkv
