// snapkv: a read-only view of f16/f32 rows, the currency between the KV cache and the presses
// (below both: the cache hands out RowsViews, presses read them).
#pragma once

#include <cstdint>

#include "snapkv/kv_type.h"

namespace snapkv {

/// Read-only view of `n` rows of `head_dim` elements (f16 or f32), row-major, contiguous.
struct RowsView {
  const void* data = nullptr;
  KVType type = KVType::F16;
  int64_t n = 0;
  int head_dim = 0;
  /// Copies row i (0 <= i < n) into out[head_dim] as f32. Throws snapkv::Error for i out of range.
  void row(int64_t i, float* out) const;
};

}  // namespace snapkv
