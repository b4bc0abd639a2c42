// snapkv eval: a seeded random number generator whose draws are the same with any C++ standard
// library (std::*_distribution is implementation-defined): xoshiro256** seeded by splitmix64,
// uniform integers by rejection, Fisher-Yates shuffles.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace snapkv::eval {

/// One splitmix64 step: advances `state` and returns the next output.
uint64_t splitmix64(uint64_t& state);

/// A seed for one purpose of a run: `seed` mixed with the FNV-1a hash of `label` (e.g.
/// "niah_single_2/4096/3"), so that every sample draws from its own stream.
uint64_t derive_seed(uint64_t seed, std::string_view label);

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next();
  /// Uniform in [0, n); n >= 1.
  uint64_t below(uint64_t n);
  /// Uniform in [lo, hi] (inclusive); lo <= hi.
  int64_t range(int64_t lo, int64_t hi);
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();

  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(below(i))]);
  }
  /// `k` distinct indices of [0, n) in the order drawn (partial Fisher-Yates); k <= n.
  std::vector<size_t> sample(size_t n, size_t k);
  template <class T>
  const T& choice(const std::vector<T>& v) {
    return v[static_cast<size_t>(below(v.size()))];
  }

 private:
  uint64_t s_[4];
};

}  // namespace snapkv::eval
