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

}  // namespace snapkv::attn
