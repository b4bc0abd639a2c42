// Test helpers: llama.cpp golden data (../shared/models/golden, tests/data/gemma3-270m).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "test_util.h"

namespace snapkv::test {

inline std::filesystem::path golden_dir(const std::string& model, const std::string& kv) {
  return shared_dir() / "models" / "golden" / model / kv;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::json::parse(f);
}

/// Raw little-endian float32 file.
inline std::vector<float> read_f32(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  f.seekg(0, std::ios::end);
  const auto n = static_cast<size_t>(f.tellg());
  f.seekg(0);
  std::vector<float> v(n / sizeof(float));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

/// argmax, lowest id wins ties.
inline int32_t argmax(std::span<const float> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

/// top1 - top2 of a logits row.
inline float top_gap(std::span<const float> v) {
  float a = -INFINITY, b = -INFINITY;
  for (const float x : v) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return a - b;
}

inline std::vector<int32_t> ids(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

}  // namespace snapkv::test
