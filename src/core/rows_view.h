// snapkv: a read-only view of f16/f32/q8_0/q4_0 rows, the currency between the KV cache and the presses
// (below both: the cache hands out RowsViews, presses read them).
#pragma once

#include <cstdint>

#include "snapkv/kv_type.h"

namespace snapkv {

/// Read-only view of `n` rows of `head_dim` elements of `type` (f16, f32, q8_0 or q4_0 blocks), row-major,
/// contiguous: row i starts kv_row_bytes(type, head_dim) * i bytes after `data`.
struct RowsView {
  const void* data = nullptr;
  KVType type = KVType::F16;
  int64_t n = 0;
  int head_dim = 0;
  /// Copies row i (0 <= i < n) into out[head_dim] as f32. Throws snapkv::Error for i out of range.
  void row(int64_t i, float* out) const;
  /// Copies rows [i0, i0 + count) into out[count][head_dim] as f32 (exact for every type: f16,
  /// q8_0 and q4_0 values are representable in f32). Throws snapkv::Error for a range outside [0, n).
  void rows(int64_t i0, int64_t count, float* out) const;
};

}  // namespace snapkv
