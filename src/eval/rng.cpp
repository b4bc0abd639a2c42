#include "eval/rng.h"

#include <numeric>

#include "snapkv/error.h"

namespace snapkv::eval {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t derive_seed(uint64_t seed, std::string_view label) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char c : label) h = (h ^ c) * 0x100000001B3ull;
  uint64_t s = seed ^ h;
  splitmix64(s);
  return splitmix64(s);
}

Rng::Rng(uint64_t seed) {
  uint64_t s = seed;
  for (uint64_t& w : s_) w = splitmix64(s);
}

namespace {
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  if (n == 0) throw Error("Rng::below(0)");
  // Uniform: reject the 2^64 mod n smallest outputs, so that the rest divide evenly by n.
  const uint64_t reject = (UINT64_MAX % n + 1) % n;
  uint64_t x = next();
  while (x < reject) x = next();
  return x % n;
}

int64_t Rng::range(int64_t lo, int64_t hi) {
  if (hi < lo) throw Error("Rng::range: hi < lo");
  const auto span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(next());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + below(span + 1));
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::vector<size_t> Rng::sample(size_t n, size_t k) {
  if (k > n) throw Error("Rng::sample: k > n");
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  for (size_t i = 0; i < k; ++i) std::swap(idx[i], idx[i + static_cast<size_t>(below(n - i))]);
  idx.resize(k);
  return idx;
}

}  // namespace snapkv::eval
