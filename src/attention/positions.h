// Searches in a KV head's entry positions (ascending, as the cache stores them).
#pragma once

#include <algorithm>
#include <cstdint>

namespace snapkv::attn {

/// First entry index in pos[0..n) whose position is >= p (n if none).
inline int64_t lower_index(const int32_t* pos, int64_t n, int64_t p) {
  return std::lower_bound(pos, pos + n, p, [](int32_t a, int64_t b) { return a < b; }) - pos;
}

/// First entry index in pos[0..n) whose position is > p (n if none).
inline int64_t upper_index(const int32_t* pos, int64_t n, int64_t p) {
  return std::upper_bound(pos, pos + n, p, [](int64_t a, int32_t b) { return a < b; }) - pos;
}

/// The entries a prefill task's query tokens q_pos[t0..t1) may see in a head with positions
/// pos[0..n): [begin, end), end = first entry after the last query's position, begin = 0 (full
/// attention) or the first entry inside the earliest query's sliding window, rounded down to a
/// multiple of `block` so that every query sees the same key blocks whatever the chunking.
/// Also returns the tokens' smallest and largest positions.
struct KeyRange {
  int64_t begin = 0, end = 0, qmin = 0, qmax = 0;
};
inline KeyRange prefill_key_range(const int32_t* pos, int64_t n, const int32_t* q_pos, int64_t t0, int64_t t1,
                                  int window, int block) {
  KeyRange k;
  k.qmin = k.qmax = q_pos[t0];
  for (int64_t t = t0; t < t1; ++t) {
    k.qmin = std::min<int64_t>(k.qmin, q_pos[t]);
    k.qmax = std::max<int64_t>(k.qmax, q_pos[t]);
  }
  k.end = upper_index(pos, n, k.qmax);
  k.begin = window > 0 ? lower_index(pos, k.end, k.qmin - window + 1) / block * block : 0;
  return k;
}

}  // namespace snapkv::attn
