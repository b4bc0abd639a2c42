// The cold tier's store (src/kv/cold_store.h, issue 10): int8 round trip within its bound, F16
// exact for an F16 cache, a disk store equal to the RAM one (and its file removed), exact byte
// counts, and clear errors for bad layers, ranges and settings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kv/cold_store.h"
#include "kv/kv_cache.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

constexpr int kHeads = 3, kDim = 24;

// A layer of n prompt entries (positions 0..n-1) per head; row magnitudes vary over decades.
KVLayerCache make_layer(int il, int64_t n, KVType type, uint64_t seed) {
  KVLayerCache l;
  l.layer = il;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int h = 0; h < kHeads; ++h) {
    std::vector<float> k(static_cast<size_t>(n) * kDim), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      const float mag = std::pow(10.0f, static_cast<float>((i / kDim) % 4) - 2.0f);
      k[i] = d(rng) * mag;
      v[i] = d(rng) * mag;
    }
    k[5] = 0.0f;  // an all-but-one-zero row is fine; so is a row of zeros below
    for (int j = 0; j < kDim; ++j) v[static_cast<size_t>(kDim + j)] = 0.0f;
    l.heads.emplace_back(type, kDim);
    l.heads.back().append(n, pos.data(), k.data(), kDim, v.data(), kDim);
  }
  return l;
}

TEST(ColdStore, Int8RoundTripIsWithinHalfAStep) {
  const KVLayerCache l = make_layer(2, 37, KVType::F32, 1);
  ColdStore s(4, kHeads, kDim, parse_cold_tier("int8"));
  s.put_layer(l);
  EXPECT_TRUE(s.has_layer(2));
  EXPECT_FALSE(s.has_layer(1));
  EXPECT_EQ(s.n_tokens(2), 37);
  EXPECT_EQ(s.bytes(), static_cast<size_t>(kHeads) * 2 * 37 * (kDim + 4));
  EXPECT_EQ(s.ram_bytes(), s.bytes());
  std::vector<float> k(37 * kDim), v(k.size()), x(kDim);
  double worst_rel = 0;
  for (int h = 0; h < kHeads; ++h) {
    s.read(2, h, 0, 37, k.data(), v.data());
    for (int64_t i = 0; i < 37; ++i)
      for (const bool value : {false, true}) {
        value ? l.heads[static_cast<size_t>(h)].value_row(i, x.data())
              : l.heads[static_cast<size_t>(h)].key_row(i, x.data());
        float amax = 0;
        for (float a : x) amax = std::max(amax, std::fabs(a));
        const float* got = (value ? v.data() : k.data()) + i * kDim;
        for (int j = 0; j < kDim; ++j) {
          const float err = std::fabs(got[j] - x[static_cast<size_t>(j)]);
          EXPECT_LE(err, amax / 254.0f * (1.0f + 1e-5f)) << "head " << h << " row " << i << " dim " << j;
          if (amax > 0) worst_rel = std::max(worst_rel, static_cast<double>(err / amax));
        }
      }
  }
  EXPECT_GT(worst_rel, 0.0) << "int8 is lossy";
  // A sub-range reads the same rows.
  std::vector<float> k2(5 * kDim);
  s.read(2, 1, 30, 5, k2.data(), nullptr);
  s.read(2, 1, 0, 37, k.data(), nullptr);
  EXPECT_TRUE(std::equal(k2.begin(), k2.end(), k.begin() + 30 * kDim));
}

TEST(ColdStore, F16IsExactForAnF16Cache) {
  const KVLayerCache l = make_layer(0, 20, KVType::F16, 2);
  ColdStore s(1, kHeads, kDim, parse_cold_tier("f16"));
  s.put_layer(l);
  EXPECT_EQ(s.bytes(), static_cast<size_t>(kHeads) * 2 * 20 * 2 * kDim);
  std::vector<float> k(20 * kDim), v(k.size()), x(kDim);
  for (int h = 0; h < kHeads; ++h) {
    s.read(0, h, 0, 20, k.data(), v.data());
    for (int64_t i = 0; i < 20; ++i) {
      l.heads[static_cast<size_t>(h)].key_row(i, x.data());
      EXPECT_TRUE(std::equal(x.begin(), x.end(), k.begin() + i * kDim));
      l.heads[static_cast<size_t>(h)].value_row(i, x.data());
      EXPECT_TRUE(std::equal(x.begin(), x.end(), v.begin() + i * kDim));
    }
  }
}

TEST(ColdStore, DiskStoreEqualsRamStoreAndRemovesItsFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("snapkv_coldstore_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const KVLayerCache a = make_layer(0, 700, KVType::F16, 3), b = make_layer(3, 700, KVType::F16, 4);
  ColdStore ram(4, kHeads, kDim, parse_cold_tier("int8"));
  {
    ColdStore disk(4, kHeads, kDim, parse_cold_tier("disk:" + dir.string()));
    for (ColdStore* s : {&ram, &disk}) {
      s->put_layer(a);
      s->put_layer(b);
    }
    EXPECT_EQ(disk.bytes(), ram.bytes());
    EXPECT_EQ(disk.ram_bytes(), 0u);
    // The file was unlinked at creation: nothing in the directory, nothing left behind by a crash.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
    std::vector<float> x(700 * kDim), y(x.size());
    for (int il : {0, 3})
      for (int h = 0; h < kHeads; ++h) {
        ram.read(il, h, 0, 700, x.data(), nullptr);
        disk.read(il, h, 0, 700, y.data(), nullptr);
        EXPECT_EQ(x, y);
        ram.read(il, h, 0, 700, nullptr, x.data());
        disk.read(il, h, 0, 700, nullptr, y.data());
        EXPECT_EQ(x, y);
      }
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
  fs::remove_all(dir);
}

TEST(ColdStore, BadInputsAreClearErrors) {
  ColdStore s(2, kHeads, kDim, parse_cold_tier("int8"));
  const KVLayerCache l = make_layer(1, 10, KVType::F16, 5);
  s.put_layer(l);
  EXPECT_THROW(s.put_layer(l), Error) << "a layer is stored once";
  EXPECT_THROW(s.put_layer(make_layer(2, 10, KVType::F16, 6)), Error) << "layer outside the model";
  std::vector<float> k(11 * kDim);
  EXPECT_THROW(s.read(1, 0, 5, 6, k.data(), nullptr), Error) << "rows past the end";
  EXPECT_THROW(s.read(0, 0, 0, 1, k.data(), nullptr), Error) << "layer not stored";
  EXPECT_THROW(s.read(1, kHeads, 0, 1, k.data(), nullptr), Error) << "head out of range";
  // A head whose positions are not the prompt's 0..n-1 (a compressed layer) is refused.
  KVLayerCache gap = make_layer(0, 10, KVType::F16, 7);
  gap.heads[1].keep(std::vector<int32_t>{0, 1, 2, 4, 5, 6, 7, 8, 9});
  try {
    s.put_layer(gap);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(s.has_layer(0));
  EXPECT_THROW(ColdStore(0, 1, 1, {}), Error);
  EXPECT_EQ(cold_tier_name(parse_cold_tier("f16")), "f16");
  EXPECT_EQ(cold_tier_name(parse_cold_tier("disk:/tmp/x")), "disk:/tmp/x");
  EXPECT_EQ(cold_tier_name(ColdTierOptions{}), "off");
  try {
    parse_cold_tier("q4");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q4'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace snapkv
