// snapkv: RowsView::row (declared in core/rows_view.h).
#include "core/rows_view.h"

#include <fmt/format.h>

#include <cstring>

#include "core/fp16.h"
#include "core/kv_rows.h"
#include "snapkv/error.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace snapkv {

void RowsView::row(int64_t i, float* out) const {
  if (i < 0 || i >= n) throw Error(fmt::format("RowsView::row: row {} out of range [0, {})", i, n));
  rows(i, 1, out);
}

void RowsView::rows(int64_t i0, int64_t count, float* out) const {
  if (i0 < 0 || count < 0 || i0 + count > n)
    throw Error(fmt::format("RowsView::rows: rows [{}, {}) out of range [0, {})", i0, i0 + count, n));
  if (count == 0) return;
  const size_t off = static_cast<size_t>(i0) * kv_row_bytes(type, head_dim);
  const auto* base = static_cast<const uint8_t*>(data) + off;
  const size_t elems = static_cast<size_t>(count) * static_cast<size_t>(head_dim);
  if (type == KVType::F32) {
    std::memcpy(out, base, sizeof(float) * elems);
    return;
  }
  if (kv_type_quantized(type)) {
    dequantize_kv_rows(type, base, out, count, head_dim);
    return;
  }
  const auto* src = reinterpret_cast<const uint16_t*>(base);
  size_t d = 0;
#if defined(__F16C__)
  for (; d + 8 <= elems; d += 8)
    _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
#endif
  for (; d < elems; ++d) out[d] = fp16_to_fp32(src[d]);
}

}  // namespace snapkv
