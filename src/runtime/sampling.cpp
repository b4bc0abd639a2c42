#include "snapkv/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/logit_scan.h"
#include "snapkv/error.h"

namespace snapkv {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error("argmax: empty logits");
  return static_cast<int32_t>(first_max_index(logits.data(), static_cast<int64_t>(logits.size())));
}

Sampler::Sampler(const SamplerOptions& opt) : opt_(opt), rng_(opt.seed) {
  if (std::isnan(opt.temp)) throw Error("sampler: --temp is NaN");
  if (std::isnan(opt.top_p) || opt.top_p <= 0.0f)
    throw Error(fmt::format("sampler: --top-p must be in (0, 1], got {}", opt.top_p));
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) throw Error("sampler: empty logits");
  // NaN has no place in the ordering the sort needs (and made the draw's range NaN), +inf no
  // probability; -inf is a masked token: never drawn while a finite logit exists.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  bool any_finite = false;
  const int64_t bad = first_nan_or_pos_inf(logits.data(), static_cast<int64_t>(logits.size()), &any_finite);
  if (bad >= 0)
    throw Error(fmt::format("sampler: logit {} of token {} is not a number the sampler can use",
                            logits[static_cast<size_t>(bad)], bad));
  if (!any_finite) throw Error("sampler: every logit is -inf (no token can be drawn)");
  if (opt_.temp <= 0.0f) return argmax(logits);

  const size_t n = logits.size();
  size_t k = (opt_.top_k > 0) ? std::min<size_t>(static_cast<size_t>(opt_.top_k), n) : n;
  cand_.resize(n);
  for (size_t i = 0; i < n; ++i) cand_[i] = {logits[i], static_cast<int32_t>(i)};
  // Descending by logit, ascending id on ties (deterministic).
  auto better = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k), cand_.end(), better);
  cand_.resize(k);

  // Softmax at temperature over the top-k candidates (max-subtracted).
  const float mx = cand_[0].first;
  double sum = 0.0;
  for (auto& c : cand_) {
    // A masked token has probability 0 (also at temp = inf, where (-inf - mx) / temp is NaN).
    c.first = c.first == -kInf ? 0.0f : std::exp((c.first - mx) / opt_.temp);
    sum += c.first;
  }
  // Top-p: smallest prefix whose probability mass reaches top_p.
  size_t keep = k;
  if (opt_.top_p < 1.0f) {
    double acc = 0.0;
    for (size_t i = 0; i < k; ++i) {
      acc += cand_[i].first / sum;
      if (acc >= opt_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += cand_[i].first;
  std::uniform_real_distribution<double> u(0.0, mass);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= cand_[i].first;
    if (r < 0.0) return cand_[i].second;
  }
  // Rounding left r >= 0: the last candidate with a nonzero probability (the first one has 1).
  while (keep > 1 && cand_[keep - 1].first <= 0.0f) --keep;
  return cand_[keep - 1].second;
}

}  // namespace snapkv
