// snapkv: next-token sampling (greedy, temperature, top-k, top-p), as llama.cpp's CLI chains them.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace snapkv {

/// Sampler settings. temp <= 0 is greedy (argmax; the lowest id wins ties).
/// top_k <= 0 disables top-k; top_p >= 1 disables top-p.
struct SamplerOptions {
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
};

/// Picks token ids from logits. Order of the stochastic chain: top-k, softmax at temperature,
/// top-p (smallest prefix of the sorted distribution whose mass reaches p), then a draw from
/// the renormalised distribution with a seeded std::mt19937_64. Deterministic for a fixed seed.
class Sampler {
 public:
  /// Throws snapkv::Error for NaN temp/top_p or top_p <= 0.
  explicit Sampler(const SamplerOptions& opt);
  /// Returns the chosen id in [0, logits.size()); a -inf logit (a masked token) is never chosen.
  /// Throws snapkv::Error for empty logits, a NaN or +inf logit, or logits that are all -inf.
  int32_t sample(std::span<const float> logits);

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // reused between calls (no per-token allocation)
};

/// Index of the largest value; the lowest index wins ties. Throws snapkv::Error for empty input.
int32_t argmax(std::span<const float> logits);

}  // namespace snapkv
