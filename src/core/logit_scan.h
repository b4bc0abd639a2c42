// snapkv: scans over one row of logits (n_vocab floats) run once per generated token: the greedy
// pick and the sampler's check that every logit is usable. On a 262,144-token vocabulary (Gemma 3)
// a scalar scan cost ~1 ms per token on the calling thread while the other threads wait;
// these use 16 (AVX-512) or 8 (AVX2) lanes and give exactly the scalar scan's answer.
#pragma once

#include <cstdint>

namespace snapkv {

/// Index of the first maximum of x[0..n) (n >= 1), as the sequential scan
/// `best = 0; for i: if (x[i] > x[best]) best = i` gives it: the lowest index on ties, NaN never
/// wins (and a NaN at index 0 is never beaten, so the answer is then 0).
int64_t first_max_index(const float* x, int64_t n);

/// Index of the first element of x[0..n) that is NaN or +inf, or -1 when there is none (n >= 0).
/// When it returns -1, *any_finite says whether some element is finite (i.e. not -inf; false for
/// n == 0); otherwise *any_finite is unspecified.
int64_t first_nan_or_pos_inf(const float* x, int64_t n, bool* any_finite);

}  // namespace snapkv
