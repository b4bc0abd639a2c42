// Shared helpers for the test suites: where ../shared and the model cache are.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace snapkv::test {

/// ../shared next to the source tree, or $SNAPKV_SHARED_DIR.
inline std::filesystem::path shared_dir() {
  if (const char* e = std::getenv("SNAPKV_SHARED_DIR")) return e;
  return std::filesystem::path(SNAPKV_SOURCE_DIR) / ".." / "shared";
}

/// The model cache filled by scripts/get-model.sh: $SNAPKV_MODELS or ~/.cache/snapkv/models.
inline std::filesystem::path models_dir() {
  if (const char* e = std::getenv("SNAPKV_MODELS")) return e;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : ".") / ".cache" / "snapkv" / "models";
}

/// Path of the default Gemma 3 270M Q4_K_M model in the cache.
inline std::filesystem::path gemma_path() { return models_dir() / "gemma-3-270m-q4_k_m.gguf"; }

/// Path of SmolLM2-135M-Instruct Q4_1 in the cache (scripts/get-model.sh smollm2).
inline std::filesystem::path smollm2_path() { return models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"; }

/// Directory of the snapkv binary (the CLI) in the build tree.
inline std::filesystem::path binary_dir() { return SNAPKV_BINARY_DIR; }

/// Source tree root (tests/data lives under it).
inline std::filesystem::path source_dir() { return SNAPKV_SOURCE_DIR; }

/// Whole file as bytes ("" if it cannot be read).
inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// n floats drawn from N(0, sd^2) with a fixed seed (test inputs for the kernels).
inline std::vector<float> randn(size_t n, uint64_t seed, float sd = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

}  // namespace snapkv::test
