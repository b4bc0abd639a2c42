// snapkv eval: how far a compressed cache moves the next-token distribution from the full
// cache's on the same teacher-forced tokens: KL(full || compressed), top-1 agreement and the
// perplexity of the true tokens under each.
#pragma once

#include <cstdint>
#include <span>

namespace snapkv::eval {

struct FidelityStats {
  double kl = 0;        ///< mean KL(p_full || p_press) in nats
  double top1 = 0;      ///< share of positions whose argmax (lowest id on ties) agrees
  double ppl_full = 0;  ///< exp(mean NLL of the targets) under the full cache
  double ppl = 0;       ///< the same under the compressed cache
  int64_t n = 0;        ///< positions scored
};

/// Accumulates positions one at a time (log-softmax in double).
class FidelityAccum {
 public:
  /// One position: the two logit rows (same length) and the token that came next.
  void add(std::span<const float> full, std::span<const float> press, int32_t target);
  FidelityStats stats() const;

 private:
  double kl_ = 0, nll_full_ = 0, nll_press_ = 0;
  int64_t top1_ = 0, n_ = 0;
};

}  // namespace snapkv::eval
