#include "eval/fidelity.h"

#include <cmath>
#include <vector>

#include "snapkv/error.h"
#include "snapkv/sampling.h"

namespace snapkv::eval {

namespace {

// log-sum-exp of a row, in double.
double log_sum_exp(std::span<const float> x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}

}  // namespace

void FidelityAccum::add(std::span<const float> full, std::span<const float> press, int32_t target) {
  if (full.size() != press.size() || full.empty()) throw Error("fidelity: logit rows of different sizes");
  if (target < 0 || static_cast<size_t>(target) >= full.size()) throw Error("fidelity: target id out of range");
  const double zf = log_sum_exp(full), zp = log_sum_exp(press);
  double kl = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    const double lp = full[i] - zf, lq = press[i] - zp;
    const double p = std::exp(lp);
    if (p > 0) kl += p * (lp - lq);
  }
  kl_ += std::max(kl, 0.0);  // rounding can leave a tiny negative sum for equal rows
  const auto t = static_cast<size_t>(target);
  nll_full_ += zf - full[t];
  nll_press_ += zp - press[t];
  top1_ += argmax(full) == argmax(press) ? 1 : 0;
  ++n_;
}

FidelityStats FidelityAccum::stats() const {
  FidelityStats s;
  s.n = n_;
  if (n_ == 0) return s;
  const auto n = static_cast<double>(n_);
  s.kl = kl_ / n;
  s.top1 = static_cast<double>(top1_) / n;
  s.ppl_full = std::exp(nll_full_ / n);
  s.ppl = std::exp(nll_press_ / n);
  return s;
}

}  // namespace snapkv::eval
